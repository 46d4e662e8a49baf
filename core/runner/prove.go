package runner

import (
	"context"
	"regexp"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner/prove"
	"github.com/kmirror/kmirror/core/writer"
)

// Proving the destination before a partition continues, and what happens
// when it differs: the runner reads the clusters and the state store and
// records what core/runner/prove decides. docs/design/datapath.md explains
// the choice.

// readBounds reads the partition's log bounds on both clusters, the two
// at once.
func (r *Runner) readBounds(ctx context.Context) (prove.Bounds, error) {
	var lb prove.Bounds
	var srcErr error
	done := make(chan struct{})
	go func() { // owned by readBounds, which waits for it
		defer close(done)
		lb.SrcStart, lb.SrcEnd, srcErr = r.offsets(ctx, true)
	}()
	var dstErr error
	lb.DstStart, lb.DstEnd, dstErr = r.offsets(ctx, false)
	<-done
	if srcErr != nil {
		return lb, r.errorf("reading source offsets: %w", srcErr)
	}
	if dstErr != nil {
		return lb, r.errorf("reading destination offsets: %w", dstErr)
	}
	return lb, nil
}

// proveDestination runs before the partition continues: it completes a
// recopy decided before a crash, or compares the destination with the
// source from the partition's checkpoint to the destination's end. It
// returns handled true when it set the resume point (map mode, copying
// again); false when the destination is proven and the caller resumes as
// usual.
//
// Writers the destination no longer holds as recorded (rep.Lost) are not
// taken as proof of a loss: a crash between InitProducerId and the record of
// its new epoch leaves the same trace. Only the log decides: an ABORT marker
// where the source has something else, or a record that is not the
// source's.
func (r *Runner) proveDestination(ctx context.Context, rep writer.ResumeReport, lb prove.Bounds) (bool, error) {
	rec := r.state.Record()
	if rec.Recopy != nil {
		rc := *rec.Recopy
		m, err := r.maps.Load(ctx)
		if err != nil {
			return false, err
		}
		m.TruncateDest(lb.DstEnd)
		if m.DestNext() <= rc.DestFrom {
			// Nothing appended since the decision: complete it.
			if err := r.dropLost(ctx, rep.Lost); err != nil {
				return false, err
			}
			return true, r.applyRecopy(ctx, m, rc)
		}
		if err := r.state.Update(ctx, func(d *partition.Data) error { d.Recopy = nil; return nil }); err != nil {
			return false, r.errorf("clearing the completed recovery: %w", err)
		}
		rec = r.state.Record()
	}
	diff, err := r.checkTail(ctx, rec, lb)
	if err != nil {
		return false, err
	}
	if diff == nil {
		if len(rep.Lost) > 0 {
			// The coordinator holds another epoch for these writers, but the
			// log shows nothing of theirs that differs from the source:
			// kmirror re-initialised them and stopped before recording the
			// new epoch. Nothing was lost; their next transaction
			// initialises them again.
			r.log.Info("recorded transactional writers moved on without a trace in the log: nothing lost, they are initialised again",
				"writers", len(rep.Lost))
			if err := r.dropLost(ctx, rep.Lost); err != nil {
				return false, err
			}
		}
		return false, r.checkpoint(ctx, prove.StablePoint(rep, lb.DstEnd))
	}
	action := prove.Action(r.d.Settings.MismatchAction)
	r.d.Events.Mismatch(r.topic, r.partition, action)
	if action == config.MismatchFail {
		err := partition.NonRetryable(r.errorf("the destination is not the source's copy from destination offset %d on: %s; mirror.destination.mismatch.action is fail, so the partition waits. "+
			"To copy the source again in map mode after the destination's end (offset %d), set mirror.destination.mismatch.action: map and run `kmirror mirrors start --mirror %s --topics '%s'`; "+
			"or delete and recreate the destination topic", diff.At, diff.What, lb.DstEnd, r.d.Mirror, regexp.QuoteMeta(r.topic)))
		r.log.Error("destination differs from the source", "from", diff.At, "what", diff.What, "action", action)
		return false, err
	}
	return true, r.recopy(ctx, rep, lb, diff)
}

// checkpoint records the partition's checkpoint (no write when unchanged).
func (r *Runner) checkpoint(ctx context.Context, dest int64) error {
	if v := r.state.Record().Verified; v != nil && v.Dest == dest {
		return nil
	}
	if err := r.state.Update(ctx, func(d *partition.Data) error { d.Verified = &partition.Checkpoint{Dest: dest}; return nil }); err != nil {
		return r.errorf("recording the checkpoint %d: %w", dest, err)
	}
	r.checkpointed = time.Now()
	return nil
}

// maybeCheckpoint records the checkpoint of a mirroring partition when the
// last one is older than prove.CheckpointEvery: the destination end, or the
// start of the earliest transaction the partition holds open. It runs after
// every delivery and writes to the state store at most once per
// CheckpointEvery; a checkpoint found unchanged (deliveries of watermarks
// only) waits CheckpointEvery too before it is looked at again.
func (r *Runner) maybeCheckpoint(ctx context.Context) error {
	if time.Since(r.checkpointed) < prove.CheckpointEvery {
		return nil
	}
	pw, err := r.dest.Partition()
	if err != nil {
		return r.errorf("%w", err)
	}
	p := r.dstNext
	for _, t := range pw.OpenTransactions() {
		if t.StartOffset >= 0 && t.StartOffset < p {
			p = t.StartOffset
		}
	}
	if err := r.checkpoint(ctx, p); err != nil {
		return err
	}
	r.checkpointed = time.Now()
	return nil
}

// checkTail compares the destination with the source from the checkpoint
// to the destination's end (prove.Tail); nil when it is the source's copy.
func (r *Runner) checkTail(ctx context.Context, rec partition.Record, lb prove.Bounds) (*prove.Difference, error) {
	if from, _ := prove.CheckStart(rec, lb); from >= lb.DstEnd {
		return nil, nil
	}
	var m *offsetmap.Map
	if rec.Mode == partition.ModeMap {
		var err error
		if m, err = r.maps.Load(ctx); err != nil {
			return nil, err
		}
		m.TruncateDest(lb.DstEnd)
	}
	diff, from, err := prove.Tail(ctx, rec, lb, m, func(off int64) prove.BatchReader {
		return kafkalog.NewReader(r.d.Source, r.topic, r.partition, off, lb.SrcEnd)
	}, func(off int64) prove.BatchReader {
		return kafkalog.NewReader(r.d.Dest, r.topic, r.partition, off, lb.DstEnd)
	})
	if err != nil {
		return nil, r.errorf("%w", err)
	}
	if diff != nil {
		r.log.Warn("the destination is not the source's copy", "from", diff.At, "batch", diff.Batch, "what", diff.What, "checked_from", from)
	}
	return diff, nil
}

// recopy decides to copy the source again from the difference on (map
// mode, prove.Recopy), records the decision, then applies it.
func (r *Runner) recopy(ctx context.Context, rep writer.ResumeReport, lb prove.Bounds, diff *prove.Difference) error {
	rec := r.state.Record()
	var m *offsetmap.Map
	if rec.Mode == partition.ModeMap {
		var err error
		if m, err = r.maps.Load(ctx); err != nil {
			return err
		}
	}
	m, rc, err := prove.Recopy(rec.Mode, m, lb, rep, diff)
	if err != nil {
		return r.errorf("%w", err)
	}
	r.omap = m
	if err := r.maps.Save(ctx, r.omap); err != nil {
		return err
	}
	err = r.state.Update(ctx, func(d *partition.Data) error {
		d.Mode = partition.ModeMap
		prove.ForgetLost(d, rep.Lost)
		d.Recopy = &rc
		return nil
	})
	if err != nil {
		return r.errorf("recording the decision to copy again from destination offset %d: %w", rc.DestFrom, err)
	}
	return r.applyRecopy(ctx, m, rc)
}

// applyRecopy carries out a recorded decision: abort what is still open
// (idempotent), then continue after the destination's end.
func (r *Runner) applyRecopy(ctx context.Context, m *offsetmap.Map, rc partition.Recopy) error {
	if err := r.dest.AbortAll(ctx); err != nil {
		return err
	}
	_, end, err := r.offsets(ctx, false)
	if err != nil {
		return r.errorf("reading destination offsets: %w", err)
	}
	// The first copy, from DestFrom to end, is never compared again.
	if err := r.checkpoint(ctx, end); err != nil {
		return err
	}
	r.omap, r.mode = m, partition.ModeMap
	r.setNext(rc.SourceFrom)
	r.dstNext = end
	r.mu.Lock()
	r.dstEnd = end
	r.mu.Unlock()
	reason, msg, why := prove.RecopyNote(rc, end)
	r.note(reason)
	r.log.Warn(msg, "source_from", rc.SourceFrom, "destination_from", end, "earlier_copy_from", rc.DestFrom, "why", why)
	return nil
}

// dropLost forgets lost writers whose transactions need no recovery.
func (r *Runner) dropLost(ctx context.Context, lost []writer.LostWriter) error {
	if len(lost) == 0 {
		return nil
	}
	if err := r.state.Update(ctx, func(d *partition.Data) error { prove.ForgetLost(d, lost); return nil }); err != nil {
		return r.errorf("forgetting lost destination transactional writers: %w", err)
	}
	return nil
}
