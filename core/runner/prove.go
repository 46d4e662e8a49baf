package runner

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
)

// Proving the destination before a partition continues, and what happens
// when it differs (tailcheck.go has the comparison itself).
//
// A difference found at destination offset At means that, from At on, the
// destination is not the source's copy: a foreign producer wrote there, or
// a replayed transaction was aborted on the destination (by a stop, or by
// the destination's transaction timeout) where the source did not abort it.
// Offsets can no longer be kept from At on, so, with
// mirror.destination.mismatch.action=map (the default), the partition
// continues in map mode: it copies the source again from the source offset
// of At, after the destination's end. The offset map stays monotonic;
// records of other producers between At and the old end of the destination
// are copied a second time (they are mapped to their new copy).
// docs/design/datapath.md explains the choice.

// checkpointEvery is how often a mirroring partition records its
// checkpoint (partition.Data.Verified), which bounds the stretch of
// destination log compared with the source when it continues.
const checkpointEvery = 30 * time.Second

// logBounds are a partition's log start and end offsets on both clusters.
type logBounds struct {
	srcStart, srcEnd, dstStart, dstEnd int64
}

// readBounds reads the partition's log bounds on both clusters, the two
// at once.
func (r *Runner) readBounds(ctx context.Context) (logBounds, error) {
	var lb logBounds
	var srcErr error
	done := make(chan struct{})
	go func() { // owned by readBounds, which waits for it
		defer close(done)
		lb.srcStart, lb.srcEnd, srcErr = r.offsets(ctx, true)
	}()
	var dstErr error
	lb.dstStart, lb.dstEnd, dstErr = r.offsets(ctx, false)
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
func (r *Runner) proveDestination(ctx context.Context, rep writer.ResumeReport, lb logBounds) (bool, error) {
	rec := r.state.Record()
	if rec.Recopy != nil {
		rc := *rec.Recopy
		m, err := r.loadMap(ctx)
		if err != nil {
			return false, err
		}
		m.TruncateDest(lb.dstEnd)
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
		return false, r.checkpoint(ctx, stablePoint(rep, lb.dstEnd))
	}
	action := r.d.Settings.MismatchAction
	if action == "" {
		action = config.MismatchMap
	}
	r.d.Events.Mismatch(r.topic, r.partition, action)
	if action == config.MismatchFail {
		err := partition.NonRetryable(r.errorf("the destination is not the source's copy from destination offset %d on: %s; mirror.destination.mismatch.action is fail, so the partition waits. "+
			"To copy the source again in map mode after the destination's end (offset %d), set mirror.destination.mismatch.action: map and run `kmirror mirrors start --mirror %s --topics '%s'`; "+
			"or delete and recreate the destination topic", diff.At, diff.What, lb.dstEnd, r.d.Mirror, regexp.QuoteMeta(r.topic)))
		r.log.Error("destination differs from the source", "from", diff.At, "what", diff.What, "action", action)
		return false, err
	}
	return true, r.recopy(ctx, rep, lb, diff)
}

// stablePoint is the destination offset below which no transaction of the
// mirror is open: the checkpoint a proven destination gets.
func stablePoint(rep writer.ResumeReport, dstEnd int64) int64 {
	p := dstEnd
	for _, rw := range rep.Resumed {
		if rw.StartOffset >= 0 && rw.StartOffset < p {
			p = rw.StartOffset
		}
	}
	return p
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
// last one is older than checkpointEvery: the destination end, or the
// start of the earliest transaction the partition holds open. It runs after
// every delivery and writes to the state store at most once per
// checkpointEvery; a checkpoint found unchanged (deliveries of watermarks
// only) waits checkpointEvery too before it is looked at again.
func (r *Runner) maybeCheckpoint(ctx context.Context) error {
	if time.Since(r.checkpointed) < checkpointEvery {
		return nil
	}
	pw, err := r.partitionWriter()
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

// checkStart is where the comparison of the destination with the source
// begins: the checkpoint (sure), or, for a record written before kmirror
// kept one, the last mirrored offset (preserve mode) or a stretch before
// the end, widened as far back as a difference needs.
func checkStart(rec partition.Record, lb logBounds) (from int64, sure bool) {
	switch {
	case rec.Verified != nil:
		from, sure = rec.Verified.Dest, true
	case rec.Mode == partition.ModePreserve && rec.LastMirroredOffset >= 0:
		from = rec.LastMirroredOffset + 1
	default:
		from = lb.dstEnd - 4096
	}
	return min(max(from, lb.dstStart), lb.dstEnd), sure
}

// checkTail compares the destination with the source from checkStart to
// the destination's end; nil when it is the source's copy.
func (r *Runner) checkTail(ctx context.Context, rec partition.Record, lb logBounds) (*difference, error) {
	from, sure := checkStart(rec, lb)
	if from >= lb.dstEnd {
		return nil, nil
	}
	toSource := func(d int64) (int64, bool) { return d, true }
	var passOver func(int64) bool
	identity := rec.Mode != partition.ModeMap
	if !identity {
		m, err := r.loadMap(ctx)
		if err != nil {
			return nil, err
		}
		m.TruncateDest(lb.dstEnd)
		mapped := m.DestNext()
		toSource = m.SourceOf
		// Unmapped offsets between mapped ones are what kmirror left
		// behind on purpose: the aborted first copy of a recovery.
		passOver = func(d int64) bool { _, ok := m.SourceOf(d); return !ok && d < mapped }
	}
	for {
		c := newTailChecker(toSource, identity, func(off int64) batchReader {
			return kafkalog.NewReader(r.d.Source, r.topic, r.partition, off, lb.srcEnd)
		}, lb.srcStart, lb.srcEnd)
		c.passOver = passOver
		diff, err := c.check(ctx, kafkalog.NewReader(r.d.Dest, r.topic, r.partition, from, lb.dstEnd))
		if err != nil {
			return nil, r.errorf("comparing the destination with the source from destination offset %d: %w", from, err)
		}
		if diff == nil || !diff.Unsure || sure || from <= lb.dstStart {
			if diff != nil {
				r.log.Warn("the destination is not the source's copy", "from", diff.At, "batch", diff.Batch, "what", diff.What, "checked_from", from)
			}
			return diff, nil
		}
		from = max(lb.dstStart, lb.dstEnd-8*max(lb.dstEnd-from, 512))
	}
}

// recopy decides to copy the source again from the difference on (map
// mode), records the decision, then applies it.
func (r *Runner) recopy(ctx context.Context, rep writer.ResumeReport, lb logBounds, diff *difference) error {
	rec := r.state.Record()
	from := diff.At
	// Transactions still open from before are aborted and copied again too.
	for _, rw := range rep.Resumed {
		if rw.StartOffset >= 0 && rw.StartOffset < from {
			from = rw.StartOffset
		}
	}
	var (
		m  *offsetmap.Map
		rc partition.Recopy
	)
	if rec.Mode == partition.ModeMap {
		var err error
		if m, err = r.loadMap(ctx); err != nil {
			return err
		}
		m.TruncateDest(from)
		rc = partition.Recopy{SourceFrom: m.SourceNext(), DestFrom: from}
		if m.Empty() {
			rc.SourceFrom = lb.srcStart
		}
	} else {
		m = &offsetmap.Map{}
		if from > lb.dstStart {
			if err := m.AddRun(lb.dstStart, lb.dstStart, from-lb.dstStart); err != nil {
				return r.errorf("building the offset map: %w", err)
			}
		}
		rc = partition.Recopy{SourceFrom: from, DestFrom: from}
	}
	rc.Why = diff.What
	r.omap = m
	if err := r.saveMap(ctx); err != nil {
		return err
	}
	lost := lostIDs(rep.Lost)
	err := r.state.Update(ctx, func(d *partition.Data) error {
		d.Mode = partition.ModeMap
		dropWriterRecords(d, lost)
		d.Recopy = &rc
		return nil
	})
	if err != nil {
		return r.errorf("recording the decision to copy again from destination offset %d: %w", from, err)
	}
	return r.applyRecopy(ctx, m, rc)
}

// applyRecopy carries out a recorded decision: abort what is still open
// (idempotent), then continue after the destination's end.
func (r *Runner) applyRecopy(ctx context.Context, m *offsetmap.Map, rc partition.Recopy) error {
	if err := r.abortAll(ctx); err != nil {
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
	why := rc.Why
	if why == "" {
		why = "the destination aborted a replayed transaction on its own (transaction timeout)"
	}
	reason := fmt.Sprintf("map mode from source offset %d: %s; so records are copied again from source offset %d to destination offset %d on; destination offsets %d to %d hold the earlier copy",
		rc.SourceFrom, why, rc.SourceFrom, end, rc.DestFrom, end-1)
	r.note(reason)
	msg := "foreign or differing records on the destination: copying again in map mode"
	if strings.Contains(why, "aborted a replayed transaction") {
		msg = "lost destination transaction: copying again in map mode"
	}
	r.log.Warn(msg, "source_from", rc.SourceFrom, "destination_from", end, "earlier_copy_from", rc.DestFrom, "why", why)
	return nil
}

func lostIDs(lost []writer.LostWriter) map[int64]bool {
	ids := make(map[int64]bool, len(lost))
	for _, l := range lost {
		ids[l.Writer.SourceProducerID] = true
	}
	return ids
}

// dropWriterRecords removes the recorded transactional writers of the given
// source producers: the destination no longer holds them as recorded, and
// their next transaction initialises them again.
func dropWriterRecords(d *partition.Data, sourcePIDs map[int64]bool) {
	kept := d.TxnWriters[:0]
	for _, w := range d.TxnWriters {
		if !sourcePIDs[w.SourceProducerID] {
			kept = append(kept, w)
		}
	}
	d.TxnWriters = kept
}

// dropLost forgets lost writers whose transactions need no recovery.
func (r *Runner) dropLost(ctx context.Context, lost []writer.LostWriter) error {
	if len(lost) == 0 {
		return nil
	}
	ids := lostIDs(lost)
	if err := r.state.Update(ctx, func(d *partition.Data) error { dropWriterRecords(d, ids); return nil }); err != nil {
		return r.errorf("forgetting lost destination transactional writers: %w", err)
	}
	return nil
}
