package mirror

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/filters"
	"github.com/kmirror/kmirror/sdk/filter"
)

// scopeFilter returns the filter that decides a mirror's scope (topics,
// groups, ACL bindings): the built-in include/exclude rules of its
// configuration (core/filters). Filter plugins chain here, with filter.Chain.
func scopeFilter(m *config.Mirror) filter.Filter { return filters.New(m) }

// inScope reports whether a source topic is mirrored by the built-in rules:
// it matches some mirror.topics.include pattern and no mirror.topics.exclude
// pattern (exclude always wins), and it is not internal (internal topics
// never mirror). It serves the checks of a single name; discovery filters
// every source topic at once (listSourceTopics).
func inScope(m *config.Mirror, topic string) bool {
	return filters.New(m).Topic(filter.Topic{Name: topic})
}

// sourceTopic is what the mirror needs to know of a source topic.
type sourceTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// topicIDString prints a topic id as a UUID, as the fetcher's errors do.
func topicIDString(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// parseTopicID reads what topicIDString wrote.
func parseTopicID(s string) ([16]byte, bool) {
	var id [16]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		return id, false
	}
	return [16]byte(b), true
}

// listSourceTopics returns the in-scope topics of the source that can be
// mirrored now, sorted by name, and the id of every topic the source has
// (in scope or not, usable or not): a topic missing from present was
// deleted, whereas one with a metadata error (no leader yet) merely waits.
//
// It asks a broker every time: kadm's Metadata answers from the client's
// metadata cache, which can keep a deleted topic or miss a new one.
func listSourceTopics(ctx context.Context, cl *kgo.Client, m *config.Mirror) (topics []sourceTopic, present map[string][16]byte, err error) {
	req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("listing source topics: %w", err)
	}
	present = make(map[string][16]byte, len(resp.Topics))
	usable := map[string]sourceTopic{}
	var cands []filter.Topic
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			continue
		}
		present[name] = t.TopicID
		if err != nil {
			continue
		}
		if _, dup := usable[name]; dup {
			continue
		}
		st := sourceTopic{Name: name, ID: t.TopicID, Partitions: int32(len(t.Partitions))}
		usable[name] = st
		cands = append(cands, filter.Topic{Name: name, Partitions: st.Partitions, Internal: t.IsInternal})
	}
	// One call with every usable source topic. Configs are not read here:
	// the built-in rules decide on names and the internal flag alone.
	kept, err := scopeFilter(m).FilterTopics(ctx, m.Name, cands)
	if err == nil {
		err = filter.VerifyOutput(cands, kept)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("filtering %d source topics made no decision; topics are not synced this round: %w", len(cands), err)
	}
	for _, t := range kept {
		topics = append(topics, usable[t.Name])
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	return topics, present, nil
}

// confirmDeleted asks the source for the named topics and returns those it
// does not know (UNKNOWN_TOPIC_OR_PARTITION): deleted. A topic answered with
// any other error (not authorized, no leader) is not taken as deleted.
func confirmDeleted(ctx context.Context, cl *kgo.Client, names map[string]bool) (map[string]bool, error) {
	gone := map[string]bool{}
	if len(names) == 0 {
		return gone, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // asking about a deleted topic must never create it again
	for name := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("checking whether source topics were deleted: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.UnknownTopicOrPartition) {
			gone[*t.Topic] = true
		}
	}
	return gone, nil
}

// topicConfig is what the mirror reads of a topic's configs on one cluster.
type topicConfig struct {
	// Dynamic are the configs set on the topic itself (DescribeConfigs
	// source DYNAMIC_TOPIC_CONFIG), not defaults or broker settings.
	// Sensitive configs (no value returned) are left out: they cannot be
	// copied.
	Dynamic map[string]string
	// Limit is the topic's effective max.message.bytes, wherever it comes
	// from: the broker-level limit is not a topic config, yet it decides
	// which batches the topic holds.
	Limit messageLimit
}

// topicConfigs returns the configs of the topics that exist on the cluster
// behind adm.
func topicConfigs(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]topicConfig, error) {
	out := map[string]topicConfig{}
	if len(topics) == 0 {
		return out, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue // the topic is missing (or was just deleted)
		}
		cfg := map[string]string{}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				cfg[c.Key] = *c.Value
			}
		}
		out[rc.Name] = topicConfig{Dynamic: cfg, Limit: readMessageLimit(rc.Configs)}
	}
	return out, nil
}

// mirroredConfigs returns the source configs minus mirror.topic.properties.exclude.
func mirroredConfigs(src map[string]string, exclude config.RegexList) map[string]*string {
	out := map[string]*string{}
	for k, v := range src {
		if !exclude.Match(k) {
			out[k] = &v
		}
	}
	return out
}

// configChanges returns the incremental changes that make the destination's
// dynamic topic configs equal what wantedConfigs asks (the source's, with
// max.message.bytes raised to the source's limit where the destination's
// brokers allow less), ignoring excluded keys on both sides, sorted by key:
// SET where the value differs or is missing, DELETE (back to the
// destination's default) where the destination sets a key not wanted.
func configChanges(src, dst topicConfig, exclude config.RegexList) []kadm.AlterConfig {
	want := wantedConfigs(src, dst)
	var out []kadm.AlterConfig
	for k, v := range want {
		if exclude.Match(k) {
			continue
		}
		if d, ok := dst.Dynamic[k]; !ok || d != v {
			out = append(out, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
		}
	}
	for k := range dst.Dynamic {
		if _, ok := want[k]; !ok && !exclude.Match(k) {
			out = append(out, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ensureDestinationTopic makes the destination topic exist with at least the
// source's partition count and returns its partition count. dstParts is the
// destination's current count (0: the topic is missing). A missing topic is
// created with the source's partition count and dynamic configs minus the
// excluded ones, and the destination's default replication factor; if the
// destination rejects the configs, it is created without them and the config
// sync reports each rejected key. Its max.message.bytes is then raised to the
// source's limit if the destination's brokers allow less (ensureDestLimit);
// a failure there is returned with the partition count, so that the
// partitions still start. A destination with fewer partitions is expanded
// (CreatePartitions) to the source's count.
func ensureDestinationTopic(ctx context.Context, adm *kadm.Client, t sourceTopic, dstParts int32, src topicConfig, exclude config.RegexList) (int32, error) {
	var limitErr error
	switch {
	case dstParts == 0:
		configs := mirroredConfigs(src.Dynamic, exclude)
		resp, err := adm.CreateTopic(ctx, t.Partitions, -1, configs, t.Name)
		if err == nil {
			err = resp.Err
		}
		if isConfigRejection(err) && len(configs) > 0 {
			resp, err = adm.CreateTopic(ctx, t.Partitions, -1, nil, t.Name)
			if err == nil {
				err = resp.Err
			}
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, fmt.Errorf("creating destination topic %s with %d partitions: %w", t.Name, t.Partitions, err)
		}
		limitErr = ensureDestLimit(ctx, adm, t.Name, src, exclude)
	case dstParts < t.Partitions:
		resp, err := adm.UpdatePartitions(ctx, int(t.Partitions), t.Name)
		if err == nil {
			if r, ok := resp[t.Name]; ok && r.Err != nil {
				err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
			}
		}
		if err != nil {
			return dstParts, fmt.Errorf("adding partitions to destination topic %s (from %d to the source's %d): %w", t.Name, dstParts, t.Partitions, err)
		}
	default:
		return dstParts, nil
	}
	// New partitions take a moment to get leaders; wait for them so that
	// they do not start with a spurious failure.
	for i := 0; i < 50; i++ {
		ends, err := adm.ListEndOffsets(ctx, t.Name)
		ready := err == nil
		for p := int32(0); ready && p < t.Partitions; p++ {
			o, ok := ends.Lookup(t.Name, p)
			ready = ok && o.Err == nil
		}
		if ready || backoff.Sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	return t.Partitions, limitErr
}

// isConfigRejection reports whether a CreateTopics error is about the
// configs it carried.
func isConfigRejection(err error) bool {
	return errors.Is(err, kerr.InvalidConfig) || errors.Is(err, kerr.PolicyViolation) || errors.Is(err, kerr.InvalidRequest)
}
