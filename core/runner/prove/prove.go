// Package prove decides whether a destination partition is its source's
// copy before the partition continues (daemon start, start after STOPPED,
// resume after PAUSED, retry after FAILED, failback), and what a difference
// leads to: where the comparison begins (the checkpoint), the comparison
// itself (Tail), where a copy starts again (Recopy), where a stop leaves
// the partition (StopPoint) and where a proven partition continues
// (ResumeAt).
// Every decision is a function of plain inputs (the partition record, the
// log bounds, the offset map, readers of the two logs), table-tested on
// hand-built states; Partition reads the clusters and the state store for
// them and records what is decided. docs/design/datapath.md, "Proving the
// destination", explains the choices.
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
package prove

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
)

// CheckpointEvery is how often a mirroring partition records its
// checkpoint (partition.Data.Verified), which bounds the stretch of
// destination log compared with the source when it continues.
const CheckpointEvery = 30 * time.Second

// Bounds are a partition's log start and end offsets on both clusters.
type Bounds struct {
	SrcStart, SrcEnd, DstStart, DstEnd int64
}

// Action returns the action mirror.destination.mismatch.action names
// ("" is map, the default).
func Action(setting string) string {
	if setting == "" {
		return config.MismatchMap
	}
	return setting
}

// StablePoint is the destination offset below which no transaction of the
// mirror is open: the checkpoint a proven destination gets.
func StablePoint(rep writer.ResumeReport, dstEnd int64) int64 {
	p := dstEnd
	for _, rw := range rep.Resumed {
		if rw.StartOffset >= 0 && rw.StartOffset < p {
			p = rw.StartOffset
		}
	}
	return p
}

// CheckStart is where the comparison of the destination with the source
// begins: the checkpoint (sure), or, for a record written before kmirror
// kept one, the last mirrored offset (preserve mode) or a stretch before
// the end, widened as far back as a difference needs.
func CheckStart(rec partition.Record, lb Bounds) (from int64, sure bool) {
	switch {
	case rec.Verified != nil:
		from, sure = rec.Verified.Dest, true
	case rec.Mode == partition.ModePreserve && rec.LastMirroredOffset >= 0:
		from = rec.LastMirroredOffset + 1
	default:
		from = lb.DstEnd - 4096
	}
	return min(max(from, lb.DstStart), lb.DstEnd), sure
}

// Tail compares the destination with the source from CheckStart to the
// destination's end; nil when it is the source's copy. m is the offset map
// truncated to the destination's end in map mode, nil otherwise (identity).
// source and dest open each log at an offset, read up to its end in lb.
// from is where the comparison that decided began.
func Tail(ctx context.Context, rec partition.Record, lb Bounds, m *offsetmap.Map, source, dest func(from int64) BatchReader) (diff *Difference, from int64, err error) {
	from, sure := CheckStart(rec, lb)
	if from >= lb.DstEnd {
		return nil, from, nil
	}
	toSource := func(d int64) (int64, bool) { return d, true }
	var passOver func(int64) bool
	identity := m == nil
	if !identity {
		mapped := m.DestNext()
		toSource = m.SourceOf
		// Unmapped offsets between mapped ones are what kmirror left
		// behind on purpose: the aborted first copy of a recovery.
		passOver = func(d int64) bool { _, ok := m.SourceOf(d); return !ok && d < mapped }
	}
	for {
		c := newTailChecker(toSource, identity, source, lb.SrcStart, lb.SrcEnd)
		c.passOver = passOver
		diff, err := c.check(ctx, dest(from))
		if err != nil {
			return nil, from, fmt.Errorf("comparing the destination with the source from destination offset %d: %w", from, err)
		}
		if diff == nil || !diff.Unsure || sure || from <= lb.DstStart {
			return diff, from, nil
		}
		from = max(lb.DstStart, lb.DstEnd-8*max(lb.DstEnd-from, 512))
	}
}

// Recopy decides where a partition copies the source again (map mode) when
// its destination differs from diff.At on: from the difference, or from the
// start of a transaction still open before it, which is aborted and copied
// again too. m is the partition's offset map in map mode (it is truncated
// to the decision's destination offset), nil in preserve mode (the map
// returned then holds the identity run below it). The decision's DestFrom
// is where the earlier copy begins.
func Recopy(mode partition.Mode, m *offsetmap.Map, lb Bounds, rep writer.ResumeReport, diff *Difference) (*offsetmap.Map, partition.Recopy, error) {
	from := diff.At
	// Transactions still open from before are aborted and copied again too.
	for _, rw := range rep.Resumed {
		if rw.StartOffset >= 0 && rw.StartOffset < from {
			from = rw.StartOffset
		}
	}
	var rc partition.Recopy
	if mode == partition.ModeMap {
		m.TruncateDest(from)
		rc = partition.Recopy{SourceFrom: m.SourceNext(), DestFrom: from}
		if m.Empty() {
			rc.SourceFrom = lb.SrcStart
		}
	} else {
		m = &offsetmap.Map{}
		if from > lb.DstStart {
			if err := m.AddRun(lb.DstStart, lb.DstStart, from-lb.DstStart); err != nil {
				return nil, rc, fmt.Errorf("building the offset map: %w", err)
			}
		}
		rc = partition.Recopy{SourceFrom: from, DestFrom: from}
	}
	rc.Why = diff.What
	return m, rc, nil
}

// RecopyNote says what a recorded decision to copy again does once the
// destination ends at end: reason for the partition's notes, msg for the
// log, and why the destination differed.
func RecopyNote(rc partition.Recopy, end int64) (reason, msg, why string) {
	why = rc.Why
	if why == "" {
		why = "the destination aborted a replayed transaction on its own (transaction timeout)"
	}
	reason = fmt.Sprintf("map mode from source offset %d: %s; so records are copied again from source offset %d to destination offset %d on; destination offsets %d to %d hold the earlier copy",
		rc.SourceFrom, why, rc.SourceFrom, end, rc.DestFrom, end-1)
	msg = "foreign or differing records on the destination: copying again in map mode"
	if strings.Contains(why, "aborted a replayed transaction") {
		msg = "lost destination transaction: copying again in map mode"
	}
	return reason, msg, why
}

// StopPoint is where a stop leaves a partition: below any difference from
// the source (a transaction the destination aborted on its own was not
// mirrored), so that the start that follows decides what to do about it.
// next is the runner's next source offset (-1 unknown), m the offset map
// truncated to the destination's end (map mode; nil otherwise, and
// truncated further to the difference), stable the checkpoint without a
// difference. It returns the next source offset and the checkpoint.
func StopPoint(next int64, m *offsetmap.Map, dstEnd, stable int64, diff *Difference) (int64, int64) {
	switch {
	case diff != nil:
		stable = min(stable, diff.At)
		at := diff.At
		if m != nil {
			m.TruncateDest(diff.At)
			at = m.SourceNext()
		}
		if next < 0 || at < next {
			next = at
		}
	case next < 0 && m != nil:
		next = m.SourceNext()
	case next < 0:
		next = dstEnd
	}
	return next, stable
}

// ForgetLost removes the recorded transactional writers of the lost ones:
// the destination no longer holds them as recorded, and their next
// transaction initialises them again.
func ForgetLost(d *partition.Data, lost []writer.LostWriter) {
	ids := make(map[int64]bool, len(lost))
	for _, l := range lost {
		ids[l.Writer.SourceProducerID] = true
	}
	kept := d.TxnWriters[:0]
	for _, w := range d.TxnWriters {
		if !ids[w.SourceProducerID] {
			kept = append(kept, w)
		}
	}
	d.TxnWriters = kept
}

// ResumeAt is the source offset a partition whose destination is proven
// continues from: the destination's end dstEnd (after alignment) in
// preserve mode; in map mode, after the last mapping of the offset map m
// below dstEnd (m is truncated to it), or the source's log start when
// nothing is mapped yet. A preserve-mode destination beyond the source's
// end, or short of its log start, cannot continue (non-retryable).
func ResumeAt(mode partition.Mode, lb Bounds, dstEnd int64, m *offsetmap.Map) (int64, error) {
	switch mode {
	case partition.ModePreserve:
		if dstEnd > lb.SrcEnd {
			return 0, partition.NonRetryable(fmt.Errorf("the destination ends at offset %d, beyond the source's high watermark %d: the source lost records it had "+
				"(unclean leader election, or the topic was recreated); the logs diverge", dstEnd, lb.SrcEnd))
		}
		if dstEnd < lb.SrcStart && !(dstEnd == 0 && lb.SrcStart == lb.SrcEnd) {
			return 0, partition.NonRetryable(fmt.Errorf("the source log now starts at offset %d, beyond what was mirrored (destination end %d): "+
				"records were deleted on the source before kmirror copied them", lb.SrcStart, dstEnd))
		}
		return dstEnd, nil
	case partition.ModeMap:
		m.TruncateDest(dstEnd)
		if m.Empty() {
			// Nothing copied yet: from the source's log start (which may
			// fall inside a batch: forwardMapped copies from it).
			return lb.SrcStart, nil
		}
		return m.SourceNext(), nil
	default:
		return 0, fmt.Errorf("unknown mode %q in the state store", mode)
	}
}
