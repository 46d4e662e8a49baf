package mirror

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/config"
)

// syncTopicConfigs is the topic-configs loop's round: for every in-scope
// topic this mirror owns that exists on both clusters, it applies the
// differences between the source's dynamic topic configs and the
// destination's, minus mirror.topic.properties.exclude, with
// IncrementalAlterConfigs. Each key is altered on its own so that a key the
// destination rejects (a policy, a value its version does not know) is
// reported by name, in the mirror status and in
// kmirror_topic_config_metadata_sync_error_total, while the other keys and
// topics still sync. Rejected keys are tried again every round.
//
// The destination's max.message.bytes is kept at least the source's
// effective limit, even where the source inherits it from its brokers
// (wantedConfigs). With the key excluded, kmirror leaves it alone; a
// destination limit below the source's is then listed in the status, since
// a batch above it will fail its partition.
func (m *mirrorRun) syncTopicConfigs(ctx context.Context) error {
	topics, _, err := listSourceTopics(ctx, m.src, &m.cfg)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	var names []string
	m.mu.Lock()
	recreated := m.recreated
	m.mu.Unlock()
	for _, t := range topics {
		if m.e.topicOwner(m.dstID, t.Name) == m.name && !recreated[t.Name] {
			names = append(names, t.Name)
		}
	}
	src, err := topicConfigs(ctx, m.srcAdm, names...)
	if err != nil {
		return fmt.Errorf("mirror %s: describing source topic configs: %w", m.name, err)
	}
	dst, err := topicConfigs(ctx, m.dstAdm, names...)
	if err != nil {
		return fmt.Errorf("mirror %s: describing destination topic configs: %w", m.name, err)
	}
	var rejected []TopicConfigError
	for _, name := range names {
		s, ok1 := src[name]
		d, ok2 := dst[name]
		if !ok1 || !ok2 {
			continue // deleted on the source, or not created on the destination yet (the topics loop does)
		}
		for _, ch := range configChanges(s, d, m.cfg.TopicPropertiesExclude) {
			if err := alterTopicConfig(ctx, m.dstAdm, name, ch); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				rejected = append(rejected, TopicConfigError{Topic: name, Key: ch.Name, Error: err.Error()})
				m.e.inst.configSyncError(m.name)
				continue
			}
			m.log.Info("destination topic config synced", "topic", name, "key", ch.Name, "op", opName(ch.Op))
		}
		if e, ok := excludedLimitBelowSource(name, s, d, m.cfg.TopicPropertiesExclude); ok {
			rejected = append(rejected, e)
		}
	}
	m.setConfigErrors(rejected)
	return nil
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

// setConfigErrors replaces the rejected configs shown in the status and logs
// the ones that are new.
func (m *mirrorRun) setConfigErrors(errs []TopicConfigError) {
	sort.Slice(errs, func(i, j int) bool {
		if errs[i].Topic != errs[j].Topic {
			return errs[i].Topic < errs[j].Topic
		}
		return errs[i].Key < errs[j].Key
	})
	m.mu.Lock()
	old := map[TopicConfigError]bool{}
	for _, e := range m.cfgErrs {
		old[e] = true
	}
	m.cfgErrs = errs
	m.mu.Unlock()
	for _, e := range errs {
		if !old[e] {
			m.log.Warn("destination rejected a topic config", "topic", e.Topic, "key", e.Key, "error", e.Error)
		}
	}
}

func opName(op kadm.IncrementalOp) string {
	if op == kadm.DeleteConfig {
		return "DELETE"
	}
	return "SET"
}

// excludedLimitBelowSource reports, as a status entry, a destination topic
// whose max.message.bytes kmirror may not touch (the key is excluded) and
// that is below the source's limit: source batches between the two will be
// refused and fail their partition.
func excludedLimitBelowSource(topic string, src, dst topicConfig, exclude config.RegexList) (TopicConfigError, bool) {
	if !exclude.Match(maxMessageBytesKey) || src.Limit.Bytes <= 0 || dst.Limit.Bytes <= 0 || dst.Limit.Bytes >= src.Limit.Bytes {
		return TopicConfigError{}, false
	}
	return TopicConfigError{Topic: topic, Key: maxMessageBytesKey, Error: fmt.Sprintf(
		"the destination topic's max.message.bytes %s is below the source topic's %s, and the key is in mirror.topic.properties.exclude so kmirror does not raise it: "+
			"a source batch larger than %d bytes will fail its partition; raise max.message.bytes of destination topic %s", dst.Limit, src.Limit, dst.Limit.Bytes, topic)}, true
}
