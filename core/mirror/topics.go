package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/config"
)

// inScope reports whether a source topic is mirrored: it matches some
// mirror.topics.include pattern and no mirror.topics.exclude pattern (exclude
// always wins), and it is not internal (internal topics never mirror).
func inScope(m *config.Mirror, topic string) bool {
	if strings.HasPrefix(topic, "__") {
		return false
	}
	return m.TopicsInclude.Match(topic) && !m.TopicsExclude.Match(topic)
}

// sourceTopic is what the mirror needs to know of a source topic.
type sourceTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// listSourceTopics returns the in-scope topics of the source, sorted by name.
func listSourceTopics(ctx context.Context, adm *kadm.Client, m *config.Mirror) ([]sourceTopic, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing source topics: %w", err)
	}
	var out []sourceTopic
	for _, t := range md.Topics {
		if t.Err != nil || t.IsInternal || !inScope(m, t.Topic) {
			continue
		}
		out = append(out, sourceTopic{Name: t.Topic, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ensureDestinationTopic creates the destination topic with the source's
// partition count when it is missing, and returns the destination's partition
// count. The destination's default replication factor applies. (The topic
// sync loop of issue #4 extends this: configs, partition expansion.)
func ensureDestinationTopic(ctx context.Context, adm *kadm.Client, t sourceTopic) (int32, error) {
	details, err := adm.ListTopics(ctx, t.Name)
	if err != nil {
		return 0, fmt.Errorf("describing destination topic %s: %w", t.Name, err)
	}
	if d, ok := details[t.Name]; ok && d.Err == nil {
		return int32(len(d.Partitions)), nil
	}
	resp, err := adm.CreateTopic(ctx, t.Partitions, -1, nil, t.Name)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("creating destination topic %s with %d partitions: %w", t.Name, t.Partitions, err)
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("creating destination topic %s with %d partitions: %w", t.Name, t.Partitions, resp.Err)
	}
	// A new topic's partitions take a moment to get leaders; wait for them
	// so that the partitions do not start with a spurious failure.
	for i := 0; i < 50; i++ {
		ends, err := adm.ListEndOffsets(ctx, t.Name)
		ready := err == nil
		for p := int32(0); ready && p < t.Partitions; p++ {
			o, ok := ends.Lookup(t.Name, p)
			ready = ok && o.Err == nil
		}
		if ready || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	return t.Partitions, nil
}
