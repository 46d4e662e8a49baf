package writer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// duplicatedMarker makes the destination look as if its transaction
// coordinator had written the next marker twice: once the marker is on the
// partition, ListOffsets answers one offset more, and a fetch from the
// marker answers the marker and then extra (built by the test with the
// writer's producer id).
func duplicatedMarker(t *testing.T, c *kfake.Cluster, marker int64, extra func() batch.Batch) {
	t.Helper()
	var ended atomic.Bool
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		ended.Store(true)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !ended.Load() {
			return nil, nil, false
		}
		lr := req.(*kmsg.ListOffsetsRequest)
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = testTopic
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Offset = marker + 2
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || fr.Topics[0].Topic != testTopic || fr.Topics[0].Partitions[0].FetchOffset != marker {
			return nil, nil, false
		}
		// The real marker first (answered by the cluster), then the copy.
		c.DropControl()
		first, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: marker, ProducerID: extra().ProducerID(), ProducerEpoch: extra().ProducerEpoch()}, batch.ControlCommit, 1, 1)
		if err != nil {
			t.Errorf("EncodeControl: %v", err)
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = testTopic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset = marker+2, marker+2
		rp.RecordBatches = append(append([]byte{}, first...), extra()...)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}

// A marker the destination wrote twice (its coordinator failed over while
// writing markers) is reported as a *DuplicateMarkerError — which is also
// an offset mismatch for callers that do not handle it — with the
// destination's end offset, which the next append expects.
func TestMarkerWrittenTwiceIsReportedAsADuplicate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	info := rec.recorded()[0]
	duplicatedMarker(t, c, 2, func() batch.Batch {
		b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 3, ProducerID: info.ProducerID, ProducerEpoch: info.Epoch}, batch.ControlCommit, 2, 2)
		if err != nil {
			t.Fatalf("EncodeControl: %v", err)
		}
		return b
	})
	_, err := p.Append(context.Background(), markerBatch(t, 2, 4001, batch.ControlCommit))
	var dup *DuplicateMarkerError
	if !errors.As(err, &dup) || !errors.Is(err, ErrDuplicateMarker) || !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("Append of the marker: %v, want a *DuplicateMarkerError", err)
	}
	if dup.Marker != 2 || dup.End != 4 || dup.Topic != testTopic || dup.Mirror != "test" {
		t.Fatalf("duplicate %+v, want marker 2, end 4", dup)
	}
	if open := p.OpenTransactions(); len(open) != 0 {
		t.Fatalf("transaction still open after its marker: %+v", open)
	}
}

// Anything but copies of the marker after it — here a data record — is a
// plain offset mismatch.
func TestRecordAfterTheMarkerIsAMismatchNotADuplicate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	info := rec.recorded()[0]
	duplicatedMarker(t, c, 2, func() batch.Batch {
		b, err := batch.Encode(batch.EncodeOptions{BaseOffset: 3, ProducerID: info.ProducerID, ProducerEpoch: info.Epoch, BaseSequence: 2},
			[]batch.Record{{Offset: 3, Key: []byte("foreign")}})
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		return b
	})
	_, err := p.Append(context.Background(), markerBatch(t, 2, 4001, batch.ControlCommit))
	var me *OffsetMismatchError
	if !errors.As(err, &me) || errors.Is(err, ErrDuplicateMarker) {
		t.Fatalf("Append of the marker: %v, want an offset mismatch that is not a duplicate marker", err)
	}
}

// copyMarker makes destination cluster c write a transaction marker of
// producer pid/epoch on testTopic/0 as its transaction coordinator does
// (WriteTxnMarkers), as a coordinator that failed over writes a marker
// again after the transaction's marker was written and seen.
func copyMarker(t *testing.T, c *kfake.Cluster, pid int64, epoch int16, commit bool) {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = testTopic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	cl := kfaketest.NewClient(t, c)
	resp, err := cl.Broker(0).Request(context.Background(), req)
	if err != nil {
		t.Fatalf("WriteTxnMarkers: %v", err)
	}
	if code := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
}

// committedTxn appends a committed transaction of source producer 4001 to
// p: its records at base and base+1, the COMMIT marker at base+2. It
// returns the destination writer's producer id and epoch.
func committedTxn(t *testing.T, p *Partition, rec *recorder, base int64) (int64, int16) {
	t.Helper()
	mustAppend(t, p, kvBatch(t, base, 4001, true, fmt.Sprintf("t%d", base), "x", fmt.Sprintf("t%d", base+1), "y"))
	mustAppend(t, p, markerBatch(t, base+2, 4001, batch.ControlCommit))
	info := rec.recorded()[0]
	return info.ProducerID, info.Epoch
}

// A copy of a marker that the destination writes after the marker's append
// returned (its coordinator failed over once the marker was written) moves
// the next append: the writer finds only that copy between the offset it
// expected and where the batch landed, and reports a duplicated marker with
// where the batch is, not foreign data. The partition goes on from there.
func TestMarkerCopyAfterTheMarkerShiftsTheNextAppend(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	pid, epoch := committedTxn(t, p, rec, 0)
	copyMarker(t, c, pid, epoch, true)

	_, err := p.Append(context.Background(), kvBatch(t, 3, -1, false, "C", "3"))
	var dup *DuplicateMarkerError
	if !errors.As(err, &dup) || !errors.Is(err, ErrDuplicateMarker) || !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("Append after the copy: %v, want a *DuplicateMarkerError", err)
	}
	if dup.Marker != 2 || dup.Expected != 3 || dup.End != 5 || len(dup.Shifted) != 1 || dup.Shifted[0].BaseOffset != 4 || dup.Shifted[0].NextOffset != 5 {
		t.Fatalf("duplicate %+v, want marker 2, expected 3, the batch at 4, end 5", dup)
	}
	if !strings.Contains(err.Error(), "offset 2") || !strings.Contains(err.Error(), "landed at offset 4") {
		t.Fatalf("error %q does not name the marker and where the batch landed", err)
	}
	// The writer knows where the destination ends: the next append (source
	// offset 4, mapped) lands after the shifted one.
	if res, err := p.AppendAt(context.Background(), kvBatch(t, 4, -1, false, "D", "4"), 5); err != nil || res.BaseOffset != 5 {
		t.Fatalf("AppendAt 5 after the shift: %+v, %v", res, err)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, false, 5)), "0:t0=x 1:t1=y 4:C=3 5:D=4"; got != want {
		t.Fatalf("destination %q, want %q", got, want)
	}
}

// With several appends pipelined behind the first one the copy moved, each
// lands one offset later, once: the error lists where every one landed, and
// none is written twice.
func TestMarkerCopyAfterTheMarkerShiftsThePipelinedAppends(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	w := newWriter(t, c)
	rec := &recorder{}
	p := openPartition(t, w, testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, -1, false, "k0", "v0")) // the idempotent producer is confirmed: the next appends pipeline
	pid, epoch := committedTxn(t, p, rec, 1)
	copyMarker(t, c, pid, epoch, true)
	peak := peakInflight(c, w)

	bs := seqBatches(t, 4, 4, 2, -1, false) // source offsets 4–11
	var done int
	n, err := p.AppendAll(context.Background(), bs, func(int, Result) { done++ })
	var dup *DuplicateMarkerError
	if !errors.As(err, &dup) || !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("AppendAll after the copy: %d appended, %v; want a *DuplicateMarkerError", n, err)
	}
	if peak.Load() < 2 {
		t.Fatalf("at most %d appends in flight: the test needs a pipeline", peak.Load())
	}
	if n != 0 || done != 0 {
		t.Fatalf("AppendAll reported %d appended (done %d times), want 0: the shifted batches are in the error", n, done)
	}
	if dup.Marker != 3 || dup.Expected != 4 || dup.End != 13 || len(dup.Shifted) != len(bs) {
		t.Fatalf("duplicate %+v, want marker 3, expected 4, end 13, %d shifted", dup, len(bs))
	}
	for i, b := range bs {
		if got := dup.Shifted[i]; got.BaseOffset != b.BaseOffset()+1 || got.NextOffset != b.NextOffset()+1 {
			t.Errorf("batch %d (source %d–%d) landed at %d–%d, want one later", i, b.BaseOffset(), b.LastOffset(), got.BaseOffset, got.NextOffset-1)
		}
		if b.BaseOffset() != 4+2*int64(i) {
			t.Errorf("batch %d: base offset not restored: %d", i, b.BaseOffset())
		}
	}
	var want []string
	for off := int64(4); off < 12; off++ {
		want = append(want, fmt.Sprintf("%d:k%d=v%d", off+1, off, off))
	}
	if got := keysAt(consume(t, c, testTopic, 0, false, 12)); got != "0:k0=v0 1:t1=x 2:t2=y "+strings.Join(want, " ") {
		t.Fatalf("destination %q, want each record once, one offset later", got)
	}
}

// Anything but copies of the last marker between the expected offset and
// where the batch landed — a record another producer wrote, a marker of the
// other type — is foreign data: a plain offset mismatch, for one append and
// for a pipeline.
func TestForeignDataAfterTheMarkerIsStillAMismatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pipe    bool
		foreign func(t *testing.T, c *kfake.Cluster, pid int64, epoch int16)
	}{
		{"a foreign record", false, func(t *testing.T, c *kfake.Cluster, _ int64, _ int16) { produceForeign(t, c) }},
		{"a foreign record before a pipeline", true, func(t *testing.T, c *kfake.Cluster, _ int64, _ int16) { produceForeign(t, c) }},
		{"a marker of the other type", false, func(t *testing.T, c *kfake.Cluster, pid int64, epoch int16) { copyMarker(t, c, pid, epoch, false) }},
		{"a copy, then a foreign record", true, func(t *testing.T, c *kfake.Cluster, pid int64, epoch int16) {
			copyMarker(t, c, pid, epoch, true)
			produceForeign(t, c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, kfake.NumBrokers(1))
			rec := &recorder{}
			p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
			mustAppend(t, p, kvBatch(t, 0, -1, false, "k0", "v0"))
			pid, epoch := committedTxn(t, p, rec, 1)
			tc.foreign(t, c, pid, epoch)
			var err error
			if tc.pipe {
				_, err = p.AppendAll(context.Background(), seqBatches(t, 4, 3, 2, -1, false), nil)
			} else {
				_, err = p.Append(context.Background(), kvBatch(t, 4, -1, false, "C", "4"))
			}
			var me *OffsetMismatchError
			if !errors.As(err, &me) || errors.Is(err, ErrDuplicateMarker) {
				t.Fatalf("append after %s: %v, want an offset mismatch that is not a duplicate marker", tc.name, err)
			}
		})
	}
}

// produceForeign writes a record to testTopic/0 with a client of its own:
// data kmirror did not write.
func produceForeign(t *testing.T, c *kfake.Cluster) {
	t.Helper()
	cl := kfaketest.NewClient(t, c, kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatalf("produce a foreign record: %v", err)
	}
}

// A late copy of one producer's marker moves the next marker too (another
// producer's transaction ends right after): the writer reports where that
// marker landed, and the partition goes on after it.
func TestMarkerCopyBeforeTheNextMarkerShiftsIt(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	mustAppend(t, p, kvBatch(t, 2, 4002, true, "X", "9"))
	mustAppend(t, p, markerBatch(t, 3, 4001, batch.ControlCommit))
	info := rec.recorded()[0]
	copyMarker(t, c, info.ProducerID, info.Epoch, true)

	_, err := p.Append(context.Background(), markerBatch(t, 4, 4002, batch.ControlAbort))
	var dup *DuplicateMarkerError
	if !errors.As(err, &dup) || !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("Append of the next marker: %v, want a *DuplicateMarkerError", err)
	}
	if dup.Marker != 3 || dup.Expected != 4 || dup.End != 6 || len(dup.Shifted) != 1 || dup.Shifted[0].BaseOffset != 5 || !dup.Shifted[0].Control {
		t.Fatalf("duplicate %+v, want marker 3, expected 4, the next marker at 5, end 6", dup)
	}
	if open := p.OpenTransactions(); len(open) != 0 {
		t.Fatalf("transactions still open after their markers: %+v", open)
	}
	if res, err := p.AppendAt(context.Background(), kvBatch(t, 5, -1, false, "Z", "10"), 6); err != nil || res.BaseOffset != 6 {
		t.Fatalf("AppendAt 6 after the shift: %+v, %v", res, err)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 6)), "0:A=1 1:B=2 6:Z=10"; got != want {
		t.Errorf("read_committed sees %q, want %q", got, want)
	}
}

// A pipeline with an append refused (a leader change) after a late marker
// copy: refused first, the appends are sent again one at a time and the
// first lands after the copy; refused third, the two before it landed after
// the copy. Either way the error lists those that landed, and the others go
// later, through AppendAt, with a producer whose sequence the writer
// re-establishes, each once.
func TestMarkerCopyWithAnAppendRefusedMidPipeline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		refused int32 // which ProduceRequest of the pipeline is refused
		shifted int   // the appends the error lists
	}{{1, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("request %d refused", tc.refused), func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, kfake.NumBrokers(1))
			rec := &recorder{}
			w := newWriter(t, c, RetryBackoff(time.Millisecond, 10*time.Millisecond))
			p := openPartition(t, w, testTopic, 0, rec)
			mustAppend(t, p, kvBatch(t, 0, -1, false, "k0", "v0"))
			pid, epoch := committedTxn(t, p, rec, 1)
			copyMarker(t, c, pid, epoch, true)
			peak := peakInflight(c, w)
			interruptNthProduce(c, tc.refused, func(req kmsg.Request) (kmsg.Response, error) {
				return produceAnswer(req, kerr.NotLeaderForPartition.Code), nil
			})

			bs := seqBatches(t, 4, 4, 2, -1, false) // source offsets 4–11
			n, err := p.AppendAll(context.Background(), bs, nil)
			var dup *DuplicateMarkerError
			end := int64(5 + 2*tc.shifted)
			if peak.Load() < 2 {
				t.Fatalf("at most %d appends in flight: the test needs a pipeline", peak.Load())
			}
			if !errors.As(err, &dup) || n != 0 || len(dup.Shifted) != tc.shifted || dup.Shifted[0].BaseOffset != 5 || dup.End != end {
				t.Fatalf("AppendAll: %d appended, %v (%+v); want %d batches from 5, end %d", n, err, dup, tc.shifted, end)
			}
			for i, b := range bs[tc.shifted:] {
				at := end + int64(2*i)
				if res, err := p.AppendAt(context.Background(), b, at); err != nil || res.BaseOffset != at {
					t.Fatalf("AppendAt %d: %+v, %v", at, res, err)
				}
			}
			var want []string
			for off := int64(4); off < 12; off++ {
				want = append(want, fmt.Sprintf("%d:k%d=v%d", off+1, off, off))
			}
			if got := keysAt(consume(t, c, testTopic, 0, false, 12)); got != "0:k0=v0 1:t1=x 2:t2=y "+strings.Join(want, " ") {
				t.Fatalf("destination %q, want each record once, one offset later", got)
			}
		})
	}
}
