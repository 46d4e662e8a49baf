package supervisor

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
)

// mirrorEvents reports a mirror's runners' events to the engine. Each
// runner has its own, holding the mirror's counts of appended batches, so
// that Appended (run on every batch) takes no lock and builds nothing.
type mirrorEvents struct {
	m       *Mirror
	appends *metrics.AppendCounts
}

func newMirrorEvents(m *Mirror) mirrorEvents {
	return mirrorEvents{m: m, appends: m.d.Instruments.AppendCountsOf(m.name)}
}

// Appended counts b and, for a data batch, its end-to-end latency.
func (ev mirrorEvents) Appended(b batch.Batch, offsets int64) {
	ev.appends.Appended(int64(len(b)), offsets)
	if !b.IsControl() {
		ev.appends.Landed(b.MaxTimestamp(), b.TimestampType() == batch.LogAppendTime)
	}
}

func (ev mirrorEvents) Mismatch(topic string, p int32, action string) {
	ev.m.d.Instruments.DestinationMismatch(ev.m.name, topic, p, action)
}

func (ev mirrorEvents) Stopped() { ev.m.TriggerSync() }

// runnerFor returns the runner of an already loaded partition of source
// topic t.
func runnerFor(m *Mirror, t sourceTopic, part *partition.Partition) *runner.Runner {
	return runner.New(runner.Deps{
		Mirror: m.name, Topic: t.Name, TopicID: t.ID, Partition: part,
		Store: m.d.Store, Log: m.log,
		Source: m.dp.Source(), Dest: m.dst, DestAdmin: m.dstAdm,
		SourceBounds: m.dp.SourceBounds, DestBounds: m.dp.DestBounds,
		SourceLeaders: m.dp.SourceLeaders, DestLeaders: m.dp.DestLeaders,
		Path: m.dp, Control: m.d.Rules(), Events: newMirrorEvents(m),
		Settings: runner.Settings{
			AlignmentBudget: m.dcfg.OffsetAlignmentMaxRecords,
			MismatchAction:  m.cfg.DestinationMismatchAction,
			MaxAttempts:     m.d.Machine.Backoff().MaxAttempts,
			LagRefresh:      m.dcfg.MetadataRefreshInterval,
		},
	})
}

// newRunner loads or creates the partition's record. The source topic id
// is recorded on first use; when the record holds another id, the source
// topic was recreated while kmirror was not looking, and the runner fails
// the partition as soon as it runs.
func newRunner(ctx context.Context, m *Mirror, t sourceTopic, p int32) (*runner.Runner, error) {
	// A new record holds the source topic id from its first write.
	var init func(*partition.Data) error
	if t.ID != ([16]byte{}) {
		init = func(d *partition.Data) error { d.SourceTopicID = topicIDString(t.ID); return nil }
	}
	part, _, err := m.d.Machine.LoadOrCreateWith(ctx, m.name, t.Name, p, "topic in scope of the mirror", init)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: topic %s partition %d: loading its state: %w", m.name, t.Name, p, err)
	}
	recorded := part.Record().SourceTopicID
	if recorded == "" && t.ID != ([16]byte{}) {
		if err := part.Update(ctx, func(d *partition.Data) error { d.SourceTopicID = topicIDString(t.ID); return nil }); err != nil {
			return nil, fmt.Errorf("mirror %s: topic %s partition %d: recording the source topic id: %w", m.name, t.Name, p, err)
		}
	}
	newID := t.ID
	recreated := recorded != "" && recorded != topicIDString(t.ID) && t.ID != ([16]byte{})
	if recreated {
		if old, ok := parseTopicID(recorded); ok {
			t.ID = old // the runner mirrors the recorded topic
		}
	}
	r := runnerFor(m, t, part)
	if recreated {
		r.RequestRecreated(newID)
	}
	return r, nil
}
