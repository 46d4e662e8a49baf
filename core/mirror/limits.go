package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/partition"
)

// maxMessageBytesKey is the topic config that bounds the record batches a
// broker accepts for the topic. When a topic does not set it, the broker's
// message.max.bytes applies (a dynamic cluster default, the broker's static
// setting, or Kafka's default of 1048588).
const maxMessageBytesKey = "max.message.bytes"

// messageLimit is a topic's max.message.bytes on one cluster, as
// DescribeConfigs reports it.
type messageLimit struct {
	// Bytes is the effective value; 0 when the cluster did not report it.
	Bytes int64
	// Topic is true when the topic sets it itself (DYNAMIC_TOPIC_CONFIG),
	// false when it comes from the broker.
	Topic bool
	// Default is what the topic would have without a setting of its own:
	// the broker's message.max.bytes; 0 when unknown.
	Default int64
}

// String says the value and where it comes from, for error messages.
func (l messageLimit) String() string {
	switch {
	case l.Bytes <= 0:
		return "unknown"
	case l.Topic:
		return fmt.Sprintf("%d (set on the topic)", l.Bytes)
	}
	return fmt.Sprintf("%d (the brokers' message.max.bytes)", l.Bytes)
}

// readMessageLimit finds max.message.bytes among a topic's described
// configs. The broker's value, when the topic sets its own, is the first
// synonym that is not the topic's (kadm asks for synonyms).
func readMessageLimit(configs []kadm.Config) messageLimit {
	for _, c := range configs {
		if c.Key != maxMessageBytesKey || c.Value == nil {
			continue
		}
		n, err := strconv.ParseInt(*c.Value, 10, 64)
		if err != nil || n <= 0 {
			return messageLimit{}
		}
		l := messageLimit{Bytes: n, Topic: c.Source == kmsg.ConfigSourceDynamicTopicConfig}
		if !l.Topic {
			l.Default = n
			return l
		}
		for _, s := range c.Synonyms {
			if s.Source == kmsg.ConfigSourceDynamicTopicConfig || s.Value == nil {
				continue
			}
			if d, err := strconv.ParseInt(*s.Value, 10, 64); err == nil && d > 0 {
				l.Default = d
			}
			break
		}
		return l
	}
	return messageLimit{}
}

// wantedConfigs returns the dynamic topic configs the destination topic
// should have (before mirror.topic.properties.exclude applies): the source's,
// plus max.message.bytes set to the source's effective limit when the source
// inherits it from its brokers and the destination's brokers allow less (or
// do not say), so that the destination takes every batch the source took. A
// source topic that sets max.message.bytes itself has it copied like any
// other config.
func wantedConfigs(src, dst topicConfig) map[string]string {
	out := make(map[string]string, len(src.Dynamic)+1)
	for k, v := range src.Dynamic {
		out[k] = v
	}
	if l := src.Limit; l.Bytes > 0 && !l.Topic && (dst.Limit.Default <= 0 || dst.Limit.Default < l.Bytes) {
		out[maxMessageBytesKey] = strconv.FormatInt(l.Bytes, 10)
	}
	return out
}

// mapDecodeMultiple and mapDecodeFloor bound the memory decoding one
// map-mode batch may take (its decompressed records and the records decoded
// from them, batch.Batch.RecordsWithin), from the destination topic's
// max.message.bytes: 64 times that limit, never less than 16 MiB nor more
// than batch.MaxDecompressedBytes (1 GiB). Map mode decodes every batch to
// build the offset map, and the destination takes the batch (as it is, or
// re-encoded with the same codec, no larger) only up to its limit, measured
// compressed. 64 times it leaves room for the compression ratios producers
// reach on real data (Java producers size batches after compression), while
// a hostile batch of kilobytes that inflates to gigabytes is refused before
// it is allocated. The floor keeps a small limit from refusing ordinary
// zstd windows (up to 8 MiB at the levels producers use).
const (
	mapDecodeMultiple = 64
	mapDecodeFloor    = 16 << 20
)

// mapDecodeBound returns the decoding bound for a destination limit (0:
// unknown, Kafka's default of 1048588 is assumed).
func mapDecodeBound(dstLimit int64) int {
	if dstLimit <= 0 {
		dstLimit = 1048588
	}
	if dstLimit > batch.MaxDecompressedBytes/mapDecodeMultiple {
		return batch.MaxDecompressedBytes
	}
	return int(max(dstLimit*mapDecodeMultiple, mapDecodeFloor))
}

// MapRecords decodes source batch b for map mode within mapDecodeBound
// of the destination topic's max.message.bytes. A batch over the bound
// fails the partition, non-retryable (the same batch would fail again),
// naming its offsets, its size and the bound; nothing past the bound is
// allocated.
func (dp *dataPath) MapRecords(ctx context.Context, topic string, b batch.Batch) ([]batch.Record, error) {
	dst, err := dp.destLimit(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("reading the destination topic's max.message.bytes, which bounds map-mode decoding: %w", err)
	}
	bound := mapDecodeBound(dst.Bytes)
	recs, err := b.RecordsWithin(bound)
	if errors.Is(err, batch.ErrDecompressTooLarge) {
		dp.limits.forget(topic) // a raised limit is read again when the partition restarts
		return nil, partition.NonRetryable(fmt.Errorf("map mode refuses to decode the source batch: %w; the bound is %d bytes (%d times the destination topic's max.message.bytes %s, at least %d, at most %d): "+
			"a batch that decodes to far more than the destination accepts is taken for a decompression bomb; if it is genuine, raise max.message.bytes of destination topic %s, "+
			"then restart the partition (kmirror mirrors stop, then start, of its topic)", err, bound, mapDecodeMultiple, dst, mapDecodeFloor, batch.MaxDecompressedBytes, topic))
	}
	if err != nil {
		return nil, fmt.Errorf("decoding source batch at %d: %w", b.BaseOffset(), err)
	}
	return recs, nil
}

// limitCache keeps the destination's max.message.bytes of each topic for the
// data path, which needs it for every map-mode batch; an entry is read again
// after a metadata refresh interval.
type limitCache struct {
	mu sync.Mutex
	m  map[string]cachedLimit
}

type cachedLimit struct {
	l  messageLimit
	at time.Time
}

func (c *limitCache) put(topic string, l messageLimit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedLimit{}
	}
	c.m[topic] = cachedLimit{l: l, at: time.Now()}
}

func (c *limitCache) get(topic string, ttl time.Duration) (messageLimit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[topic]
	if !ok || time.Since(e.at) > ttl {
		return messageLimit{}, false
	}
	return e.l, true
}

func (c *limitCache) forget(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, topic)
}

// destLimit returns the destination topic's max.message.bytes, from the
// cache or from the destination.
func (dp *dataPath) destLimit(ctx context.Context, topic string) (messageLimit, error) {
	ttl := time.Minute
	if dp.m.dcfg != nil {
		ttl = dp.m.dcfg.MetadataRefreshInterval
	}
	if l, ok := dp.limits.get(topic, ttl); ok {
		return l, nil
	}
	cfgs, err := topicConfigs(ctx, dp.m.dstAdm, topic)
	if err != nil {
		return messageLimit{}, err
	}
	l := cfgs[topic].Limit
	dp.limits.put(topic, l)
	return l, nil
}

// isTooLarge reports whether the destination refused a batch for its size:
// MESSAGE_TOO_LARGE (over max.message.bytes) or RECORD_LIST_TOO_LARGE (over
// the topic's segment.bytes).
func isTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// raiseDestLimit reads both topics' configs and, when the change
// configChanges asks for max.message.bytes would raise the destination's
// effective limit (a SET of the source's limit, or a DELETE back to a larger
// broker default), applies it. It returns the limits it read (the
// destination's as raised) and whether it raised it. An excluded key is
// left alone.
func (dp *dataPath) raiseDestLimit(ctx context.Context, topic string) (src, dst messageLimit, raised bool, err error) {
	srcCfgs, err := topicConfigs(ctx, dp.m.srcAdm, topic)
	if err != nil {
		return src, dst, false, fmt.Errorf("describing the source topic's configs: %w", err)
	}
	dstCfgs, err := topicConfigs(ctx, dp.m.dstAdm, topic)
	if err != nil {
		return src, dst, false, fmt.Errorf("describing the destination topic's configs: %w", err)
	}
	s, d := srcCfgs[topic], dstCfgs[topic]
	src, dst = s.Limit, d.Limit
	ch, ok := limitChange(s, d, dp.m.cfg.TopicPropertiesExclude)
	if !ok {
		return src, dst, false, nil
	}
	after := messageLimit{Bytes: d.Limit.Default, Default: d.Limit.Default}
	if ch.Op == kadm.SetConfig {
		v, _ := strconv.ParseInt(*ch.Value, 10, 64)
		after = messageLimit{Bytes: v, Topic: true, Default: d.Limit.Default}
	}
	if after.Bytes <= dst.Bytes {
		return src, dst, false, nil // the change would not let this batch in: the config loop's business
	}
	if err := alterTopicConfig(ctx, dp.m.dstAdm, topic, ch); err != nil {
		return src, dst, false, err
	}
	dp.m.log.Info("raised the destination topic's max.message.bytes to take the source's batches", "topic", topic, "from", dst.Bytes, "to", after.Bytes, "op", opName(ch.Op))
	dp.limits.put(topic, after)
	return src, after, true, nil
}

// limitChange returns the change of max.message.bytes that configChanges
// asks of the destination, if any.
func limitChange(src, dst topicConfig, exclude config.RegexList) (kadm.AlterConfig, bool) {
	for _, ch := range configChanges(src, dst, exclude) {
		if ch.Name == maxMessageBytesKey {
			return ch, true
		}
	}
	return kadm.AlterConfig{}, false
}

// ensureDestLimit gives a just created destination topic the
// max.message.bytes wantedConfigs asks for, before any of its partitions
// starts: the topic was created with the source's dynamic configs only, and
// the destination's broker default is known only now.
func ensureDestLimit(ctx context.Context, adm *kadm.Client, topic string, src topicConfig, exclude config.RegexList) error {
	if src.Limit.Bytes <= 0 || src.Limit.Topic {
		return nil // unknown, or copied with the topic's configs
	}
	dst, err := topicConfigs(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("describing the configs of new destination topic %s: %w", topic, err)
	}
	ch, ok := limitChange(src, dst[topic], exclude)
	if !ok || ch.Op != kadm.SetConfig {
		return nil
	}
	return alterTopicConfig(ctx, adm, topic, ch)
}

// tooLarge builds the failure of a batch the destination refused for its
// size even after raiseDestLimit: non-retryable, since the same batch would
// be refused again, with the batch size, both limits and what to raise.
func (dp *dataPath) tooLarge(topic string, b batch.Batch, expect int64, cause error, src, dst messageLimit, limitErr error) error {
	size := len(b)
	var ke *kerr.Error // the broker's answer, without the writer's context (the runner adds it)
	if !errors.As(cause, &ke) {
		ke = kerr.MessageTooLarge
	}
	what := fmt.Sprintf("the destination refused a record batch of %d bytes (destination offset %d, record count %d) as too large; "+
		"the source topic's max.message.bytes is %s, the destination topic's is %s", size, expect, b.RecordCount(), src, dst)
	var fix string
	switch {
	case errors.Is(cause, kerr.RecordListTooLarge):
		fix = fmt.Sprintf("the batch is larger than the destination topic's segment.bytes: raise segment.bytes of destination topic %s above %d bytes", topic, size)
	case dp.m.cfg.TopicPropertiesExclude.Match(maxMessageBytesKey):
		fix = fmt.Sprintf("max.message.bytes is in mirror.topic.properties.exclude, so kmirror does not set it: set max.message.bytes of destination topic %s to at least %d", topic, size)
		if !dst.Topic {
			fix += " (or raise message.max.bytes of the destination brokers)"
		}
	default:
		fix = fmt.Sprintf("set max.message.bytes of destination topic %s to at least %d", topic, size)
		if !dst.Topic {
			fix += " (or raise message.max.bytes of the destination brokers)"
		}
	}
	if limitErr != nil {
		fix += fmt.Sprintf(" (kmirror could not raise the destination's limit itself: %v)", limitErr)
	}
	return fmt.Errorf("%s; %s, then restart the partition (kmirror mirrors stop, then start, of its topic): %w", what, fix, ke)
}
