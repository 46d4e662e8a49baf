package topicsync

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
)

// MaxMessageBytesKey is the topic config that bounds the record batches a
// broker accepts for the topic. When a topic does not set it, the broker's
// message.max.bytes applies (a dynamic cluster default, the broker's static
// setting, or Kafka's default of 1048588).
const MaxMessageBytesKey = "max.message.bytes"

// Limit is a topic's max.message.bytes on one cluster, as DescribeConfigs
// reports it.
type Limit struct {
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
func (l Limit) String() string {
	switch {
	case l.Bytes <= 0:
		return "unknown"
	case l.Topic:
		return fmt.Sprintf("%d (set on the topic)", l.Bytes)
	}
	return fmt.Sprintf("%d (the brokers' message.max.bytes)", l.Bytes)
}

// readLimit finds max.message.bytes among a topic's described configs. The
// broker's value, when the topic sets its own, is the first synonym that is
// not the topic's (kadm asks for synonyms).
func readLimit(configs []kadm.Config) Limit {
	for _, c := range configs {
		if c.Key != MaxMessageBytesKey || c.Value == nil {
			continue
		}
		n, err := strconv.ParseInt(*c.Value, 10, 64)
		if err != nil || n <= 0 {
			return Limit{}
		}
		l := Limit{Bytes: n, Topic: c.Source == kmsg.ConfigSourceDynamicTopicConfig}
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
	return Limit{}
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
		out[MaxMessageBytesKey] = strconv.FormatInt(l.Bytes, 10)
	}
	return out
}

// limitChange returns the change of max.message.bytes that configChanges
// asks of the destination, if any.
func limitChange(src, dst topicConfig, exclude config.RegexList) (kadm.AlterConfig, bool) {
	for _, ch := range configChanges(src, dst, exclude) {
		if ch.Name == MaxMessageBytesKey {
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

// limitCache keeps the destination's max.message.bytes of each topic for the
// data path, which needs it for every map-mode batch; an entry is read again
// after Options.LimitTTL.
type limitCache struct {
	mu sync.Mutex
	m  map[string]cachedLimit
}

type cachedLimit struct {
	l  Limit
	at time.Time
}

func (c *limitCache) put(topic string, l Limit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedLimit{}
	}
	c.m[topic] = cachedLimit{l: l, at: time.Now()}
}

func (c *limitCache) get(topic string, ttl time.Duration) (Limit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[topic]
	if !ok || time.Since(e.at) > ttl {
		return Limit{}, false
	}
	return e.l, true
}

func (c *limitCache) forget(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, topic)
}

// DestLimit returns the destination topic's max.message.bytes, read from the
// destination at most once per Options.LimitTTL (or after ForgetLimit).
func (s *Syncer) DestLimit(ctx context.Context, topic string) (Limit, error) {
	if l, ok := s.limits.get(topic, s.opts.LimitTTL); ok {
		return l, nil
	}
	cfgs, err := topicConfigs(ctx, s.dst, topic)
	if err != nil {
		return Limit{}, err
	}
	l := cfgs[topic].Limit
	s.limits.put(topic, l)
	return l, nil
}

// ForgetLimit makes the next DestLimit of topic read the destination again.
func (s *Syncer) ForgetLimit(topic string) { s.limits.forget(topic) }

// RaiseLimit reads both topics' configs and, when the change the config
// rule asks for max.message.bytes would raise the destination's effective
// limit (a SET of the source's limit, or a DELETE back to a larger broker
// default), applies it. It returns the limits it read (the destination's as
// raised) and whether it raised it. An excluded key is left alone.
func (s *Syncer) RaiseLimit(ctx context.Context, topic string) (src, dst Limit, raised bool, err error) {
	srcCfgs, err := topicConfigs(ctx, s.src, topic)
	if err != nil {
		return src, dst, false, fmt.Errorf("describing the source topic's configs: %w", err)
	}
	dstCfgs, err := topicConfigs(ctx, s.dst, topic)
	if err != nil {
		return src, dst, false, fmt.Errorf("describing the destination topic's configs: %w", err)
	}
	sc, dc := srcCfgs[topic], dstCfgs[topic]
	src, dst = sc.Limit, dc.Limit
	ch, ok := limitChange(sc, dc, s.opts.PropertiesExclude)
	if !ok {
		return src, dst, false, nil
	}
	after := Limit{Bytes: dc.Limit.Default, Default: dc.Limit.Default}
	if ch.Op == kadm.SetConfig {
		v, _ := strconv.ParseInt(*ch.Value, 10, 64)
		after = Limit{Bytes: v, Topic: true, Default: dc.Limit.Default}
	}
	if after.Bytes <= dst.Bytes {
		return src, dst, false, nil // the change would not let this batch in: the config round's business
	}
	if err := alterTopicConfig(ctx, s.dst, topic, ch); err != nil {
		return src, dst, false, err
	}
	s.log.Info("raised the destination topic's max.message.bytes to take the source's batches", "topic", topic, "from", dst.Bytes, "to", after.Bytes, "op", opName(ch.Op))
	s.limits.put(topic, after)
	return src, after, true, nil
}

// Refused handles a batch the destination refused for its size (cause is
// MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE): it raises the destination
// topic's max.message.bytes to the source's limit when the rule allows (the
// config rounds do too, but a partition may reach such a batch first) and
// asks for one more try; otherwise it says why the batch is refused, with
// both limits and the key to raise. expect is the batch's destination
// offset.
func (s *Syncer) Refused(ctx context.Context, topic string, b batch.Batch, expect int64, cause error) (retry bool, err error) {
	src, dst, raised, limitErr := s.RaiseLimit(ctx, topic)
	if raised {
		return true, nil
	}
	return false, s.tooLarge(topic, b, expect, cause, src, dst, limitErr)
}

// tooLarge builds the failure of a batch the destination refused for its
// size even after RaiseLimit: the caller makes it non-retryable, since the
// same batch would be refused again. It says the batch size, both limits
// and what to raise.
func (s *Syncer) tooLarge(topic string, b batch.Batch, expect int64, cause error, src, dst Limit, limitErr error) error {
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
	case s.opts.PropertiesExclude.Match(MaxMessageBytesKey):
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
