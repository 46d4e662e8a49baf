package prove

import (
	"bytes"
	"context"
	"fmt"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/kafkalog"
)

// Before a partition continues — daemon start, start after STOPPED, resume
// after PAUSED, retry after FAILED, failback — the runner proves that the
// destination log, from the last point known good (the partition's
// checkpoint) to its end, is the copy of the source: every batch there must
// hold, at the source offset it maps to, the same records, or the same
// marker. What the check catches (docs/design/datapath.md, "Proving the
// destination"):
//
//   - a record of a foreign producer (written while kmirror was down, or
//     after a failover by someone who then ran start instead of failback);
//   - an ABORT marker where the source has something else: the abort of a
//     stop, or of the destination's transaction timeout, where the source
//     later committed (the transaction's records have another fate there);
//   - anything beyond the source's end.
//
// The tailChecker below is the comparison alone, over two streams of raw
// batches; Tail (prove.go) feeds it.

// BatchReader yields raw batches in offset order: kafkalog.Reader, or a
// slice in tests.
type BatchReader interface {
	Next(ctx context.Context) (batch.Batch, bool, error)
}

// Difference is the first place where a destination log stops being the
// copy of its source.
type Difference struct {
	// At is the destination offset from which the destination is no longer
	// the source's copy: the differing batch, or the first record of the
	// transaction whose marker differs.
	At int64
	// Batch is the destination offset of the batch found different.
	Batch int64
	// What says what differs, for the reason, the note and the log.
	What string
	// Unsure: the difference may begin before the stretch checked (the
	// stretch's first batch differs, or a differing marker's transaction
	// has no record in the stretch).
	Unsure bool
}

// tailChecker compares destination batches with the source's. The
// comparison is per entry (record or marker) at the source offset the
// destination offset maps to; a batch forwarded as it is (preserve mode)
// is recognised without decoding. An offset that the source no longer
// holds below its log start cannot be checked and is passed over; one it
// holds in a batch from which compaction removed it is passed over too
// (the destination keeps what it copied before the compaction).
type tailChecker struct {
	// toSource maps a destination offset to its source offset (identity
	// in preserve mode, the offset map's SourceOf in map mode).
	toSource func(dst int64) (int64, bool)
	// identity: destination offsets are source offsets (preserve mode).
	identity bool
	// openSource opens the source at an offset, reading up to srcEnd.
	openSource       func(from int64) BatchReader
	srcStart, srcEnd int64
	// passOver, when set, names destination offsets not to compare
	// (map mode: what kmirror left unmapped on purpose).
	passOver func(dst int64) bool

	src        BatchReader
	srcBatch   batch.Batch // current source batch; nil before the first
	srcEntries []kafkalog.Entry
	decoded    bool
	srcDone    bool

	// txnStart: destination producer → first offset of its transaction
	// begun in the stretch and not yet ended by a marker.
	txnStart map[int64]int64
}

func newTailChecker(toSource func(int64) (int64, bool), identity bool, openSource func(int64) BatchReader, srcStart, srcEnd int64) *tailChecker {
	return &tailChecker{toSource: toSource, identity: identity, openSource: openSource, srcStart: srcStart, srcEnd: srcEnd, txnStart: map[int64]int64{}}
}

// check reads the destination stretch to its end and returns the
// difference, or nil when the stretch is the source's copy. It reads on
// after the first differing batch: a marker further on may end, with
// another fate than the source's, a transaction that began before it, and
// then the difference begins with that transaction.
func (c *tailChecker) check(ctx context.Context, dst BatchReader) (*Difference, error) {
	var diff *Difference
	first := true
	for {
		d, ok, err := dst.Next(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the destination: %w", err)
		}
		if !ok {
			return diff, nil
		}
		what, err := c.compare(ctx, d)
		if err != nil {
			return nil, err
		}
		pid := d.ProducerID()
		if what != "" {
			at, unsure := d.BaseOffset(), first
			if d.IsControl() {
				if st, ok := c.txnStart[pid]; ok {
					at = st
				} else {
					unsure = true // marker-only, or its records lie before the stretch
				}
			}
			if diff == nil {
				diff = &Difference{At: at, Batch: d.BaseOffset(), What: what}
			}
			diff.At = min(diff.At, at)
			diff.Unsure = diff.Unsure || unsure
		}
		first = false
		switch {
		case d.IsControl():
			delete(c.txnStart, pid)
		case d.IsTransactional():
			if _, ok := c.txnStart[pid]; !ok {
				c.txnStart[pid] = d.BaseOffset()
			}
		}
	}
}

// compare returns what differs between destination batch d and the
// source, or "".
func (c *tailChecker) compare(ctx context.Context, d batch.Batch) (string, error) {
	if c.identity && d.BaseOffset() >= c.srcStart && d.BaseOffset() < c.srcEnd {
		s, err := c.sourceBatchAt(ctx, d.BaseOffset())
		if err != nil {
			return "", err
		}
		if s != nil && sameBatch(s, d) {
			return "", nil
		}
	}
	dents, err := kafkalog.Entries(d)
	if err != nil {
		return "", fmt.Errorf("decoding the destination batch at offset %d: %w", d.BaseOffset(), err)
	}
	lat := d.TimestampType() == batch.LogAppendTime
	for _, de := range dents {
		if c.passOver != nil && c.passOver(de.Offset) {
			continue
		}
		so, ok := c.toSource(de.Offset)
		switch {
		case !ok && de.Control && de.Marker == batch.ControlAbort:
			return fmt.Sprintf("destination offset %d holds an ABORT marker that stands for no source marker: the destination aborted a replayed transaction "+
				"(a stop aborted it, or the destination timed it out)", de.Offset), nil
		case !ok:
			return fmt.Sprintf("destination offset %d holds %s that is not in the offset map: kmirror did not write it", de.Offset, describeEntry(de, d)), nil
		case so < c.srcStart:
			continue // the source deleted it: nothing to compare with
		case so >= c.srcEnd:
			return fmt.Sprintf("destination offset %d holds %s, but the source ends at offset %d", de.Offset, describeEntry(de, d), c.srcEnd), nil
		}
		se, ok, err := c.sourceEntry(ctx, so)
		if err != nil {
			return "", err
		}
		if !ok {
			continue // compaction removed it on the source
		}
		if lat {
			se.Timestamp, de.Timestamp = 0, 0 // the destination's broker stamped its own append time
		}
		if diff := kafkalog.DiffEntry(se, de, false); diff != "" {
			if de.Control && de.Marker == batch.ControlAbort && (!se.Control || se.Marker != batch.ControlAbort) {
				return fmt.Sprintf("destination offset %d holds an ABORT marker where the source has %s: the destination aborted a replayed transaction "+
					"(a stop aborted it, or the destination timed it out) that the source did not abort there", de.Offset, describeSource(se)), nil
			}
			return fmt.Sprintf("destination offset %d (source offset %d) differs from the source: %s", de.Offset, so, diff), nil
		}
	}
	return "", nil
}

func describeEntry(e kafkalog.Entry, b batch.Batch) string {
	if e.Control {
		return fmt.Sprintf("a %s marker of producer %d", e.Marker, b.ProducerID())
	}
	return fmt.Sprintf("a record of producer %d", b.ProducerID())
}

func describeSource(e kafkalog.Entry) string {
	if e.Control {
		return "a " + e.Marker.String() + " marker"
	}
	if e.Txn {
		return "a transactional record"
	}
	return "a record"
}

// attrCompared are the attribute bits a forwarded batch keeps: codec,
// timestamp type, transactional, control (not the delete horizon, which
// compaction sets).
const attrCompared = 0x3f

// sameBatch reports whether destination batch d is source batch s
// forwarded as it is: same offsets, attributes, timestamps and records
// section byte for byte (producer fields, CRC and leader epoch are the
// destination's).
func sameBatch(s, d batch.Batch) bool {
	if s.BaseOffset() != d.BaseOffset() || s.LastOffsetDelta() != d.LastOffsetDelta() || s.RecordCount() != d.RecordCount() ||
		s.Attributes()&attrCompared != d.Attributes()&attrCompared || s.IsControl() {
		return false
	}
	if d.TimestampType() != batch.LogAppendTime && (s.BaseTimestamp() != d.BaseTimestamp() || s.MaxTimestamp() != d.MaxTimestamp()) {
		return false
	}
	return bytes.Equal(s[batch.HeaderSize:], d[batch.HeaderSize:])
}

// sourceBatchAt returns the source batch holding offset off, or nil when
// the source has none (a gap, or its end).
func (c *tailChecker) sourceBatchAt(ctx context.Context, off int64) (batch.Batch, error) {
	if c.srcBatch == nil || off < c.srcBatch.BaseOffset() {
		c.src, c.srcBatch, c.srcDone = c.openSource(off), nil, false
	}
	for !c.srcDone && (c.srcBatch == nil || c.srcBatch.NextOffset() <= off) {
		b, ok, err := c.src.Next(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the source: %w", err)
		}
		if !ok {
			c.srcDone = true
			break
		}
		c.srcBatch, c.decoded = b, false
	}
	if c.srcBatch == nil || c.srcBatch.NextOffset() <= off || c.srcBatch.BaseOffset() > off {
		return nil, nil
	}
	return c.srcBatch, nil
}

// sourceEntry returns the source entry at offset off; ok is false when the
// source holds none there.
func (c *tailChecker) sourceEntry(ctx context.Context, off int64) (kafkalog.Entry, bool, error) {
	b, err := c.sourceBatchAt(ctx, off)
	if err != nil || b == nil {
		return kafkalog.Entry{}, false, err
	}
	if !c.decoded {
		if c.srcEntries, err = kafkalog.Entries(b); err != nil {
			return kafkalog.Entry{}, false, fmt.Errorf("decoding the source batch at offset %d: %w", b.BaseOffset(), err)
		}
		c.decoded = true
	}
	for _, e := range c.srcEntries {
		if e.Offset == off {
			return e, true, nil
		}
	}
	return kafkalog.Entry{}, false, nil
}
