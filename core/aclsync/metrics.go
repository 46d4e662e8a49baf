package aclsync

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instruments are the sync's metrics (KIP-1279 AclSyncError and the ACLs
// synced per cycle), each with a mirror attribute.
type instruments struct {
	mirror  metric.MeasurementOption
	errs    metric.Int64Counter
	synced  metric.Int64Gauge
	created metric.Int64Counter
	deleted metric.Int64Counter
}

func newInstruments(m metric.Meter, mirror string) (instruments, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	in := instruments{mirror: metric.WithAttributes(attribute.String("mirror", mirror))}
	var err error
	if in.errs, err = m.Int64Counter("acl.sync.error",
		metric.WithDescription("ACL creations or deletions that failed, plus cycles that could not read either cluster's ACLs (KIP-1279 AclSyncError), by mirror.")); err != nil {
		return in, err
	}
	if in.synced, err = m.Int64Gauge("acls.synced",
		metric.WithDescription("In-scope source ACL bindings present on the destination after the last cycle, by mirror.")); err != nil {
		return in, err
	}
	if in.created, err = m.Int64Counter("acl.sync.created",
		metric.WithDescription("ACL bindings created on the destination by the ACL sync, by mirror.")); err != nil {
		return in, err
	}
	if in.deleted, err = m.Int64Counter("acl.sync.deleted",
		metric.WithDescription("ACL bindings deleted from the destination by the ACL sync because the source no longer has them, by mirror.")); err != nil {
		return in, err
	}
	return in, nil
}

func (in instruments) errors(ctx context.Context, n int64) { in.errs.Add(ctx, n, in.mirror) }

// cycle records the outcome of a completed cycle; synced is the number of
// in-scope bindings now on the destination.
func (in instruments) cycle(ctx context.Context, rep Report, synced int64) {
	in.synced.Record(ctx, synced, in.mirror)
	in.created.Add(ctx, int64(rep.Created), in.mirror)
	in.deleted.Add(ctx, int64(rep.Deleted), in.mirror)
}
