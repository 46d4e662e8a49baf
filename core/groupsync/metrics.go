package groupsync

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instruments are the sync's metrics (KIP-1279 ConsumerGroupOffsetSyncError
// and ShareGroupOffsetSyncError, plus the groups synced per cycle), each with
// a mirror attribute.
type instruments struct {
	mirror      metric.MeasurementOption
	consumerErr func(context.Context)
	shareErr    func(context.Context)
	synced      metric.Int64Gauge
}

func newInstruments(m metric.Meter, mirror string) (instruments, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	in := instruments{mirror: metric.WithAttributes(attribute.String("mirror", mirror))}
	cErr, err := m.Int64Counter("consumer.group.offset.sync.error",
		metric.WithDescription("Consumer groups whose offset sync failed in a cycle, or cycles that could not list groups (KIP-1279 ConsumerGroupOffsetSyncError), by mirror."))
	if err != nil {
		return in, err
	}
	sErr, err := m.Int64Counter("share.group.offset.sync.error",
		metric.WithDescription("Share groups whose start-offset sync failed in a cycle, plus one when a cluster is found not to support share groups (KIP-1279 ShareGroupOffsetSyncError), by mirror."))
	if err != nil {
		return in, err
	}
	if in.synced, err = m.Int64Gauge("group.offset.sync.groups",
		metric.WithDescription("Groups synced in the last cycle (written or already in sync; not skipped, not failed), by mirror and kind (consumer, share).")); err != nil {
		return in, err
	}
	in.consumerErr = func(ctx context.Context) { cErr.Add(ctx, 1, in.mirror) }
	in.shareErr = func(ctx context.Context) { sErr.Add(ctx, 1, in.mirror) }
	return in, nil
}

func (in instruments) groupsSynced(ctx context.Context, byKind map[string]int64) {
	for kind, n := range byKind {
		in.synced.Record(ctx, n, in.mirror, metric.WithAttributes(attribute.String("kind", kind)))
	}
}
