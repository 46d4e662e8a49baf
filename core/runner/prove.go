package runner

import (
	"context"

	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner/prove"
	"github.com/kmirror/kmirror/core/writer"
)

// newProof returns what proving the runner's destination uses
// (core/runner/prove): its record, offset map, destination writer, the two
// clusters and their bounds.
func (r *Runner) newProof() *prove.Partition {
	return &prove.Partition{
		Mirror: r.d.Mirror, Topic: r.topic, Partition: r.partition,
		State: r.state, Maps: r.maps, Writer: r.dest, Source: r.d.Source, Dest: r.d.Dest,
		SourceLeaders: r.d.SourceLeaders, DestLeaders: r.d.DestLeaders,
		SourceBounds: func(ctx context.Context) (int64, int64, error) { return r.offsets(ctx, true) },
		DestBounds:   func(ctx context.Context) (int64, int64, error) { return r.offsets(ctx, false) },
		Mismatch:     func(action string) { r.d.Events.Mismatch(r.topic, r.partition, action) },
		Log:          r.log,
	}
}

// proveDestination runs before the partition continues (prove.Partition.Prove).
// It returns handled true when it set the resume point (map mode, copying
// again); false when the destination is proven and the caller resumes as
// usual.
func (r *Runner) proveDestination(ctx context.Context, rep writer.ResumeReport, lb prove.Bounds) (bool, error) {
	r.proof.Action = r.d.Settings.MismatchAction // the setting as it is now
	rc, err := r.proof.Prove(ctx, rep, lb)
	if rc == nil || err != nil {
		return rc != nil, err
	}
	r.omap, r.mode = rc.Map, partition.ModeMap
	r.setNext(rc.SourceFrom)
	r.dstNext = rc.DestEnd
	r.mu.Lock()
	r.dstEnd = rc.DestEnd
	r.mu.Unlock()
	r.note(rc.Note)
	return true, nil
}
