package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/runner"
)

// RunnersOf returns the mirror's runners whose topic match selects.
func (m *Mirror) RunnersOf(match func(string) bool) []*runner.Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*runner.Runner
	for _, r := range m.runners {
		if match(r.Topic()) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *runner.Runner) int {
		if c := strings.Compare(a.Topic(), b.Topic()); c != 0 {
			return c
		}
		return int(a.Partition() - b.Partition())
	})
	return out
}

// Operated returns the mirror as the operators' actions see it
// (core/control).
func (m *Mirror) Operated() control.Mirror {
	return control.Mirror{Name: m.name, Log: m.log, Rules: m.d.Rules(), Runners: m.RunnersOf,
		LaunchRecorded: m.launchRecorded, TriggerSync: m.TriggerSync,
		InScope:   func(t string) bool { return inScope(&m.cfg, t) },
		NoReverse: func(rs []*runner.Runner) error { return m.d.NoReverse(m, rs) },
		Topics:    m.knownTopics,
		StatusOf:  m.PartitionStatus,
		Forget: func(ctx context.Context, r *runner.Runner) error {
			return m.removeRunner(ctx, topicPartition{r.Topic(), r.Partition()}, func(r *runner.Runner) error { return r.Forget(ctx) })
		}}
}

// knownTopics returns, sorted, the topics of the mirror's runners and of
// its recorded partitions.
func (m *Mirror) knownTopics(ctx context.Context) ([]string, error) {
	var out []string
	for _, r := range m.RunnersOf(func(string) bool { return true }) {
		out = append(out, r.Topic())
	}
	parts, err := m.d.Machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return nil, fmt.Errorf("%w: mirror %s: loading partition states: %v", control.ErrUnavailable, m.name, err)
	}
	for _, p := range parts {
		out = append(out, p.Record().Topic)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// launchRecorded starts runners for recorded partitions of matching topics
// that have none yet (after a restart, before the topics loop ran), so that
// an operator's request reaches them.
func (m *Mirror) launchRecorded(ctx context.Context, match func(string) bool) error {
	parts, err := m.d.Machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	for _, p := range parts {
		rec := p.Record()
		if !match(rec.Topic) {
			continue
		}
		tp := topicPartition{rec.Topic, rec.Partition}
		m.mu.Lock()
		_, running := m.runners[tp]
		m.mu.Unlock()
		if !running {
			var id [16]byte
			if rec.SourceTopicID != "" {
				id, _ = parseTopicID(rec.SourceTopicID)
			}
			m.launch(tp, runnerFor(m, sourceTopic{Name: rec.Topic, ID: id}, p))
		}
	}
	return nil
}

// withoutStopped drops the topics an operator stopped from a topics round,
// and makes sure their recorded partitions have runners (which keep them
// STOPPED and show them in describe).
func (m *Mirror) withoutStopped(ctx context.Context, topics []sourceTopic) ([]sourceTopic, error) {
	c := m.d.Rules()
	var kept []sourceTopic
	stopped := map[string]bool{}
	for _, t := range topics {
		s, err := c.Stopped(ctx, t.Name)
		if err != nil {
			return nil, err
		}
		if s {
			stopped[t.Name] = true
		} else {
			kept = append(kept, t)
		}
	}
	if len(stopped) > 0 {
		if err := m.launchRecorded(ctx, func(t string) bool { return stopped[t] }); err != nil {
			return nil, err
		}
	}
	return kept, nil
}
