package topicsync

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/config"
)

// ConfigError is a source topic config the destination rejected, or a
// destination limit that cannot take the source's batches.
type ConfigError struct {
	Topic string
	Key   string
	Error string
}

// ConfigReport is the result of one config round.
type ConfigReport struct {
	// Changed counts the config changes applied to destination topics.
	Changed int
	// Rejected counts the changes the destination rejected (each is in
	// Errors).
	Rejected int
	// Errors are the rejected keys and the excluded destination limits
	// below the source's, sorted by topic and key: what describe shows.
	Errors []ConfigError
}

// topicConfig is what the sync reads of a topic's configs on one cluster.
type topicConfig struct {
	// Dynamic are the configs set on the topic itself (DescribeConfigs
	// source DYNAMIC_TOPIC_CONFIG), not defaults or broker settings.
	// Sensitive configs (no value returned) are left out: they cannot be
	// copied.
	Dynamic map[string]string
	// Limit is the topic's effective max.message.bytes, wherever it comes
	// from: the broker-level limit is not a topic config, yet it decides
	// which batches the topic holds.
	Limit Limit
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
		out[rc.Name] = topicConfig{Dynamic: cfg, Limit: readLimit(rc.Configs)}
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

// SyncConfigs runs one config round: for every in-scope topic this mirror
// owns that exists on both clusters (and whose source topic the last topics
// round did not find recreated), it applies the differences between the
// source's dynamic topic configs and the destination's, minus
// mirror.topic.properties.exclude, with IncrementalAlterConfigs. Each key is
// altered on its own so that a key the destination rejects (a policy, a
// value its version does not know) is reported by name while the other keys
// and topics still sync. Rejected keys are tried again every round.
//
// The destination's max.message.bytes is kept at least the source's
// effective limit, even where the source inherits it from its brokers
// (wantedConfigs). With the key excluded, it is left alone; a destination
// limit below the source's is then reported, since a batch above it will
// fail its partition.
//
// The error is non-nil only when the round could not run (a listing
// failed). A round cut short by ctx returns what it did so far.
func (s *Syncer) SyncConfigs(ctx context.Context) (ConfigReport, error) {
	s.configsRound.Lock()
	defer s.configsRound.Unlock()
	var rep ConfigReport
	topics, _, err := s.listSource(ctx)
	if err != nil {
		return rep, fmt.Errorf("mirror %s: %w", s.opts.Mirror, err)
	}
	var names []string
	for _, t := range topics {
		if s.opts.Engine.Owns(t.Name) && !s.isRecreated(t.Name) {
			names = append(names, t.Name)
		}
	}
	src, err := topicConfigs(ctx, s.src, names...)
	if err != nil {
		return rep, fmt.Errorf("mirror %s: describing source topic configs: %w", s.opts.Mirror, err)
	}
	dst, err := topicConfigs(ctx, s.dst, names...)
	if err != nil {
		return rep, fmt.Errorf("mirror %s: describing destination topic configs: %w", s.opts.Mirror, err)
	}
	exclude := s.opts.PropertiesExclude
	for _, name := range names {
		sc, ok1 := src[name]
		dc, ok2 := dst[name]
		if !ok1 || !ok2 {
			continue // deleted on the source, or not created on the destination yet (the topics round does)
		}
		for _, ch := range configChanges(sc, dc, exclude) {
			if err := alterTopicConfig(ctx, s.dst, name, ch); err != nil {
				if ctx.Err() != nil {
					return rep, nil
				}
				rep.Errors = append(rep.Errors, ConfigError{Topic: name, Key: ch.Name, Error: err.Error()})
				rep.Rejected++
				continue
			}
			rep.Changed++
			s.log.Info("destination topic config synced", "topic", name, "key", ch.Name, "op", opName(ch.Op))
		}
		if e, ok := excludedLimitBelowSource(name, sc, dc, exclude); ok {
			rep.Errors = append(rep.Errors, e)
		}
	}
	s.setConfigErrors(rep.Errors)
	return rep, nil
}

// alterTopicConfig applies one incremental change to one destination topic.
func alterTopicConfig(ctx context.Context, adm *kadm.Client, topic string, ch kadm.AlterConfig) error {
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{ch}, topic)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		value := ""
		if ch.Value != nil {
			value = "=" + *ch.Value
		}
		return fmt.Errorf("the destination rejected %s %s%s on topic %s: %w; fix the destination (policy, broker version) or add the key to mirror.topic.properties.exclude", opName(ch.Op), ch.Name, value, topic, err)
	}
	return nil
}

// setConfigErrors sorts errs, keeps them as the last round's, and logs the
// ones that the last round did not have.
func (s *Syncer) setConfigErrors(errs []ConfigError) {
	sort.Slice(errs, func(i, j int) bool {
		if errs[i].Topic != errs[j].Topic {
			return errs[i].Topic < errs[j].Topic
		}
		return errs[i].Key < errs[j].Key
	})
	s.mu.Lock()
	old := map[ConfigError]bool{}
	for _, e := range s.cfgErrs {
		old[e] = true
	}
	s.cfgErrs = errs
	s.mu.Unlock()
	for _, e := range errs {
		if !old[e] {
			s.log.Warn("destination rejected a topic config", "topic", e.Topic, "key", e.Key, "error", e.Error)
		}
	}
}

func opName(op kadm.IncrementalOp) string {
	if op == kadm.DeleteConfig {
		return "DELETE"
	}
	return "SET"
}

// excludedLimitBelowSource reports, as a config error, a destination topic
// whose max.message.bytes kmirror may not touch (the key is excluded) and
// that is below the source's limit: source batches between the two will be
// refused and fail their partition.
func excludedLimitBelowSource(topic string, src, dst topicConfig, exclude config.RegexList) (ConfigError, bool) {
	if !exclude.Match(MaxMessageBytesKey) || src.Limit.Bytes <= 0 || dst.Limit.Bytes <= 0 || dst.Limit.Bytes >= src.Limit.Bytes {
		return ConfigError{}, false
	}
	return ConfigError{Topic: topic, Key: MaxMessageBytesKey, Error: fmt.Sprintf(
		"the destination topic's max.message.bytes %s is below the source topic's %s, and the key is in mirror.topic.properties.exclude so kmirror does not raise it: "+
			"a source batch larger than %d bytes will fail its partition; raise max.message.bytes of destination topic %s", dst.Limit, src.Limit, dst.Limit.Bytes, topic)}, true
}
