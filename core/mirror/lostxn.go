package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/core/writer"
)

// A destination transaction replaying a source transaction can be lost: the
// destination's coordinator aborts it when it stays open longer than its
// timeout (kmirror was down, or a source transaction stayed open that long).
// Its records are then aborted on the destination, and its ABORT marker
// occupies an offset where the source has something else, while the source
// may still commit the transaction. Offsets can no longer be kept from the
// transaction's first record on, so the partition continues in map mode
// from there: it copies the source again from the source offset of that
// first record, after the destination's end. The offset map stays
// monotonic; records of other producers between the lost transaction's start
// and the old end of the destination are copied a second time (they are
// mapped to their new copy). docs/design/datapath.md explains the choice.

// extRecopy is the extension holding a recopyState while the partition has
// not appended anything since the recovery was decided.
const extRecopy = "recopy"

// recopyState records a decided recovery, before anything is aborted, so
// that a crash in the middle completes it instead of deciding again from a
// destination that has meanwhile changed.
type recopyState struct {
	// SourceFrom is the source offset the copy restarts from.
	SourceFrom int64 `json:"source_from"`
	// DestFrom is the destination offset of the lost transaction's first
	// record (or its marker): nothing from there on is mapped.
	DestFrom int64 `json:"dest_from"`
}

// errLostNotFound: the destination log does not show where a lost
// transaction started.
var errLostNotFound = errors.New("lost transaction not found in the destination log")

// lostScan finds, in a stretch of the destination log, where the
// transactions of lost writers (destination producer ids) began: the first
// data batch of the producer after its previous marker, or the final marker
// itself when the transaction wrote no data to the partition.
type lostScan struct {
	pids map[int64]*lostTrack
}

type lostTrack struct {
	prevCtl  int64 // control batch before lastCtl; -1 none seen
	lastCtl  int64 // last control batch; -1 none seen
	segStart int64 // first data batch after lastCtl; -1 none
	lastSeg  int64 // first data batch between prevCtl and lastCtl; -1 none
}

func newLostScan(pids []int64) *lostScan {
	s := &lostScan{pids: make(map[int64]*lostTrack, len(pids))}
	for _, p := range pids {
		s.pids[p] = &lostTrack{prevCtl: -1, lastCtl: -1, segStart: -1, lastSeg: -1}
	}
	return s
}

func (s *lostScan) add(b batch.Batch) {
	t := s.pids[b.ProducerID()]
	if t == nil || !b.IsTransactional() {
		return
	}
	if b.IsControl() {
		t.prevCtl, t.lastCtl = t.lastCtl, b.BaseOffset()
		t.lastSeg, t.segStart = t.segStart, -1
		return
	}
	if t.segStart < 0 {
		t.segStart = b.BaseOffset()
	}
}

// start returns the earliest start of the lost transactions. complete is
// false when the scanned stretch (beginning after the log start when
// atLogStart is false) may not hold a transaction's beginning.
func (s *lostScan) start(atLogStart bool) (start int64, complete bool, err error) {
	start = -1
	for pid, t := range s.pids {
		var st int64
		switch {
		case t.segStart >= 0:
			return 0, true, fmt.Errorf("destination producer %d has transactional records from offset %d with no marker after them: its transaction is still open", pid, t.segStart)
		case t.lastCtl < 0:
			if !atLogStart {
				return 0, false, nil
			}
			return 0, true, fmt.Errorf("%w: no marker of destination producer %d", errLostNotFound, pid)
		case t.prevCtl < 0 && !atLogStart:
			return 0, false, nil // the transaction may have begun before the stretch
		case t.lastSeg >= 0:
			st = t.lastSeg
		default:
			st = t.lastCtl // no data on this partition: only its marker
		}
		if start < 0 || st < start {
			start = st
		}
	}
	return start, true, nil
}

// lostStart scans the destination partition backwards from its end, in
// growing stretches, for the start of the lost writers' transactions.
func (r *runner) lostStart(ctx context.Context, lost []writer.LostWriter, dstStart, dstEnd int64) (int64, error) {
	pids := make([]int64, 0, len(lost))
	for _, l := range lost {
		pids = append(pids, l.Writer.ProducerID)
	}
	for step := int64(4096); ; step *= 8 {
		from := max(dstStart, dstEnd-step)
		s := newLostScan(pids)
		if err := verify.Scan(ctx, r.m.dst, r.topic, r.partition, from, dstEnd, func(b batch.Batch) error { s.add(b); return nil }); err != nil {
			return 0, r.errorf("reading the destination to find where a lost transaction began: %w", err)
		}
		st, complete, err := s.start(from == dstStart)
		if err != nil {
			return 0, r.errorf("%w", err)
		}
		if complete {
			return st, nil
		}
	}
}

// recoverLost continues a partition whose destination transactions were
// lost (rep.Lost), or completes a recovery decided before a crash. It
// returns handled false when there is nothing to recover; otherwise it has
// set the resume point (map mode).
func (r *runner) recoverLost(ctx context.Context, rep writer.ResumeReport, dstStart, dstEnd int64) (bool, error) {
	rec := r.p.Record()
	var rc recopyState
	decided, err := rec.Extension(extRecopy, &rc)
	if err != nil {
		return false, r.errorf("reading the recorded recovery: %w", err)
	}
	var m *offsetmap.Map
	if decided {
		if m, err = r.loadMap(ctx); err != nil {
			return false, err
		}
		m.TruncateDest(dstEnd)
		if m.DestNext() > rc.DestFrom {
			// Appended since the recovery: it is complete.
			if err := r.p.Update(ctx, func(d *partition.Data) error { delete(d.Extensions, extRecopy); return nil }); err != nil {
				return false, r.errorf("clearing the completed recovery: %w", err)
			}
			return false, r.dropLost(ctx, rep.Lost)
		}
		// Writers lost since the decision have nothing mapped after it:
		// forget them; the copy restarts before their transactions.
		if err := r.dropLost(ctx, rep.Lost); err != nil {
			return false, err
		}
	} else {
		if len(rep.Lost) == 0 {
			return false, nil
		}
		from, err := r.lostStart(ctx, rep.Lost, dstStart, dstEnd)
		if err != nil {
			return false, err
		}
		// Transactions still open are aborted below and copied again too.
		for _, rw := range rep.Resumed {
			if rw.StartOffset >= 0 && rw.StartOffset < from {
				from = rw.StartOffset
			}
		}
		if rec.Mode == partition.ModeMap {
			if m, err = r.loadMap(ctx); err != nil {
				return false, err
			}
			m.TruncateDest(from)
			rc = recopyState{SourceFrom: m.SourceNext(), DestFrom: from}
			if m.Empty() {
				rc.SourceFrom = r.getLogStart()
			}
		} else {
			m = &offsetmap.Map{}
			if from > dstStart {
				if err := m.AddRun(dstStart, dstStart, from-dstStart); err != nil {
					return false, r.errorf("building the offset map: %w", err)
				}
			}
			rc = recopyState{SourceFrom: from, DestFrom: from}
		}
		r.omap = m
		if err := r.saveMap(ctx); err != nil {
			return false, err
		}
		lost := lostIDs(rep.Lost)
		err = r.p.Update(ctx, func(d *partition.Data) error {
			d.Mode = partition.ModeMap
			if err := dropWriterRecords(d, lost); err != nil {
				return err
			}
			return d.SetExtension(extRecopy, rc)
		})
		if err != nil {
			return false, r.errorf("recording the recovery of a lost destination transaction: %w", err)
		}
	}
	// Abort what is still open (idempotent), then continue after the
	// destination's end.
	if err := r.m.dp.abortAll(ctx, r); err != nil {
		return false, err
	}
	_, end, err := offsets(ctx, r.m.dstAdm, r.topic, r.partition)
	if err != nil {
		return false, r.errorf("reading destination offsets: %w", err)
	}
	r.omap, r.mode = m, partition.ModeMap
	r.setNext(rc.SourceFrom)
	r.dstNext = end
	r.mu.Lock()
	r.dstEnd = end
	r.mu.Unlock()
	reason := fmt.Sprintf("map mode from source offset %d: the destination aborted a replayed transaction on its own (transaction timeout), "+
		"so its records are copied again from source offset %d to destination offset %d on; destination offsets %d to %d hold the aborted copy",
		rc.SourceFrom, rc.SourceFrom, end, rc.DestFrom, end-1)
	r.note(reason)
	r.log.Warn("lost destination transaction: copying again in map mode", "source_from", rc.SourceFrom, "destination_from", end, "aborted_from", rc.DestFrom)
	return true, nil
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
func dropWriterRecords(d *partition.Data, sourcePIDs map[int64]bool) error {
	var list []txnWriterRecord
	if _, err := d.Extension(extTxnWriters, &list); err != nil {
		return err
	}
	kept := list[:0]
	for _, w := range list {
		if !sourcePIDs[w.SourceProducerID] {
			kept = append(kept, w)
		}
	}
	return d.SetExtension(extTxnWriters, kept)
}

// dropLost forgets lost writers whose transactions need no recovery (one is
// complete, or the partition stops).
func (r *runner) dropLost(ctx context.Context, lost []writer.LostWriter) error {
	if len(lost) == 0 {
		return nil
	}
	ids := lostIDs(lost)
	if err := r.p.Update(ctx, func(d *partition.Data) error { return dropWriterRecords(d, ids) }); err != nil {
		return r.errorf("forgetting lost destination transactional writers: %w", err)
	}
	return nil
}
