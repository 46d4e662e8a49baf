package runner

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// markerWrittenTwice makes destination cluster c look as if its transaction
// coordinator had written the first marker twice (it failed over while
// writing it): after EndTxn, ListOffsets answers one offset more and a
// fetch from the marker shows it and a copy.
func markerWrittenTwice(t *testing.T, c *kfake.Cluster, marker int64) {
	t.Helper()
	var ended atomic.Bool
	var pid atomic.Int64
	var epoch atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		er := req.(*kmsg.EndTxnRequest)
		pid.Store(er.ProducerID)
		epoch.Store(int32(er.ProducerEpoch))
		ended.Store(true)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lr := req.(*kmsg.ListOffsetsRequest)
		if !ended.Load() || len(lr.Topics) != 1 || lr.Topics[0].Topic != "t" || lr.Topics[0].Partitions[0].Timestamp != -1 {
			return nil, nil, false
		}
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Offset = marker + 2
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if !ended.Load() || len(fr.Topics) != 1 || fr.Topics[0].Topic != "t" || fr.Topics[0].Partitions[0].FetchOffset != marker {
			return nil, nil, false
		}
		var recs []byte
		for off := marker; off < marker+2; off++ {
			b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: off, ProducerID: pid.Load(), ProducerEpoch: int16(epoch.Load())}, batch.ControlCommit, 1, 1)
			if err != nil {
				t.Errorf("EncodeControl: %v", err)
			}
			recs = append(recs, b...)
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset = marker+2, marker+2
		rp.RecordBatches = recs
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}

// sourceTxn is a committed source transaction of producer 4001: two
// records at 0 and 1, the COMMIT marker at 2.
func sourceTxn(t *testing.T) []batch.Batch {
	t.Helper()
	data, err := batch.Encode(batch.EncodeOptions{BaseOffset: 0, Transactional: true, ProducerID: 4001, ProducerEpoch: 0, BaseSequence: 0},
		[]batch.Record{{Offset: 0, Key: []byte("a")}, {Offset: 1, Key: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	marker, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 2, ProducerID: 4001, ProducerEpoch: 0}, batch.ControlCommit, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	return []batch.Batch{data, marker}
}

// A marker the destination wrote twice moves every later offset by one:
// with mirror.destination.mismatch.action map the partition says so (map
// mode, a note) and goes on after the copy, mapping the source offsets it
// kept.
func TestMarkerWrittenTwiceMovesThePartitionToMapMode(t *testing.T) {
	t.Parallel()
	dc := kfaketest.NewCluster(t)
	r := newTestRunnerOn(t, side{}, side{}, 0, dc)
	ctx := t.Context()
	if err := r.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	markerWrittenTwice(t, dc, 2)
	if err := r.forwardAll(ctx, sourceTxn(t)); err != nil {
		t.Fatalf("forwardAll: %v", err)
	}
	if err := r.flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if r.mode != partition.ModeMap || r.Next() != 3 || r.dstNext != 4 {
		t.Fatalf("mode %q, next %d, destination next %d; want map, 3, 4", r.mode, r.Next(), r.dstNext)
	}
	if rec := r.state.Record(); rec.Mode != partition.ModeMap {
		t.Fatalf("recorded mode %q, want map", rec.Mode)
	}
	for src := int64(0); src <= 2; src++ {
		if d, ok := r.omap.Lookup(src); !ok || d != src {
			t.Fatalf("offset map: source %d → %d (%v), want itself", src, d, ok)
		}
	}
	notes := strings.Join(r.Status().Notes, "; ")
	if !strings.Contains(notes, "map mode from source offset 3") || !strings.Contains(notes, "marker at offset 2 2 times") {
		t.Fatalf("notes %q do not say why the partition is in map mode", notes)
	}
}

// With mirror.destination.mismatch.action fail the partition stops,
// naming the marker and what to do.
func TestMarkerWrittenTwiceFailsThePartitionWhenTheActionIsFail(t *testing.T) {
	t.Parallel()
	dc := kfaketest.NewCluster(t)
	r := newTestRunnerOn(t, side{}, side{}, 0, dc)
	r.d.Settings.MismatchAction = "fail"
	ctx := t.Context()
	if err := r.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	markerWrittenTwice(t, dc, 2)
	err := r.forwardAll(ctx, sourceTxn(t))
	if err == nil {
		err = r.flush(ctx)
	}
	if err == nil || partition.IsRetryable(err) || !strings.Contains(err.Error(), "written 2 times") || !strings.Contains(err.Error(), "mirror.destination.mismatch.action is fail") {
		t.Fatalf("forwardAll: %v (retryable %v), want a non-retryable error naming the duplicated marker and the action", err, partition.IsRetryable(err))
	}
	if r.mode != partition.ModePreserve {
		t.Fatalf("mode %q, want preserve (nothing decided)", r.mode)
	}
}

// copyMarkerOn makes destination cluster c write a COMMIT marker of
// producer pid/epoch on t/0 as its transaction coordinator does
// (WriteTxnMarkers): a coordinator that failed over writes the marker
// again, here after the replayed marker was written and seen.
func copyMarkerOn(t *testing.T, c *kfake.Cluster, pid int64, epoch int16) {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "t", []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := kfaketest.NewClient(t, c).Broker(0).Request(t.Context(), req)
	if err != nil {
		t.Fatalf("WriteTxnMarkers: %v", err)
	}
	if code := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
}

// produceForeignOn writes a record to t/0 of cluster c with a client of its
// own: data kmirror did not write.
func produceForeignOn(t *testing.T, c *kfake.Cluster) {
	t.Helper()
	cl := kfaketest.NewClient(t, c, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatalf("produce a foreign record: %v", err)
	}
}

// countEvents counts the mismatches the runner reports, by action.
type countEvents struct {
	noEvents
	mu         sync.Mutex
	mismatches map[string]int
}

func (e *countEvents) Mismatch(_ string, _ int32, action string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mismatches == nil {
		e.mismatches = make(map[string]int)
	}
	e.mismatches[action]++
}

func (e *countEvents) count(action string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mismatches[action]
}

// srcLog builds source batches as a producer would: each batch holds recs
// records from offset base with distinct keys, values and a header; txn
// batches are of source producer 4001.
type srcLog struct {
	t    *testing.T
	next int64
	all  []batch.Batch
}

func (l *srcLog) data(recs int, txn bool) batch.Batch {
	l.t.Helper()
	if txn {
		return l.txnData(4001, recs)
	}
	return l.encode(recs, batch.EncodeOptions{BaseOffset: l.next, ProducerID: 5001, ProducerEpoch: 0, BaseSequence: int32(l.next)})
}

// txnData is a batch of recs records of a transaction of source producer pid.
func (l *srcLog) txnData(pid int64, recs int) batch.Batch {
	l.t.Helper()
	return l.encode(recs, batch.EncodeOptions{BaseOffset: l.next, Transactional: true, ProducerID: pid, ProducerEpoch: 0, BaseSequence: int32(l.next)})
}

func (l *srcLog) encode(recs int, opts batch.EncodeOptions) batch.Batch {
	l.t.Helper()
	var rs []batch.Record
	for i := range recs {
		off := l.next + int64(i)
		rs = append(rs, batch.Record{Offset: off, Timestamp: 1_700_000_000_000 + off, Key: fmt.Appendf(nil, "k%d", off), Value: fmt.Appendf(nil, "v%d", off),
			Headers: []batch.Header{{Key: "h", Value: fmt.Appendf(nil, "%d", off)}}})
	}
	b, err := batch.Encode(opts, rs)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.add(b)
}

// gapped is a batch of two records with one offset between them that
// compaction removed.
func (l *srcLog) gapped() batch.Batch {
	l.t.Helper()
	rs := []batch.Record{{Offset: l.next, Key: fmt.Appendf(nil, "k%d", l.next), Value: []byte("g")}, {Offset: l.next + 2, Key: fmt.Appendf(nil, "k%d", l.next+2), Value: []byte("g")}}
	b, err := batch.Encode(batch.EncodeOptions{BaseOffset: l.next, ProducerID: 5001, ProducerEpoch: 0, BaseSequence: 0}, rs)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.add(b)
}

func (l *srcLog) commit() batch.Batch {
	l.t.Helper()
	return l.marker(4001, batch.ControlCommit)
}

func (l *srcLog) marker(pid int64, ct batch.ControlType) batch.Batch {
	l.t.Helper()
	b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: l.next, ProducerID: pid, ProducerEpoch: 0}, ct, 3, 1_700_000_000_000+l.next)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.add(b)
}

func (l *srcLog) add(b batch.Batch) batch.Batch {
	l.all = append(l.all, b)
	l.next = b.NextOffset()
	return b
}

// compareThroughMap checks the destination record by record against the
// source's data records: each at the destination offset the runner's
// offset map gives (its own offset where the map has none: preserve mode),
// with the same key, value and headers, and no other data record there.
func compareThroughMap(t *testing.T, r *Runner, dc *kfake.Cluster, src []batch.Batch) {
	t.Helper()
	type rec struct{ key, value, headers string }
	var want []int64
	wantAt := make(map[int64]rec)
	m := r.OffsetMap()
	for _, b := range src {
		if b.IsControl() {
			continue
		}
		rs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range rs {
			dst := sr.Offset
			if m != nil {
				var ok bool
				if dst, ok = m.Lookup(sr.Offset); !ok {
					t.Fatalf("source offset %d is not in the offset map %+v", sr.Offset, m.Ranges())
				}
			}
			var hs []string
			for _, h := range sr.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			want = append(want, dst)
			wantAt[dst] = rec{string(sr.Key), string(sr.Value), strings.Join(hs, ",")}
		}
	}
	cl := kfaketest.NewClient(t, dc, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(50*time.Millisecond))
	got := make(map[int64]rec)
	last := want[len(want)-1]
	ctx := t.Context()
	for seen := int64(-1); seen < last; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the destination ends before offset %d", last)
		}
		fs.EachRecord(func(kr *kgo.Record) {
			var hs []string
			for _, h := range kr.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			got[kr.Offset] = rec{string(kr.Key), string(kr.Value), strings.Join(hs, ",")}
			seen = max(seen, kr.Offset)
		})
	}
	for _, dst := range want {
		if got[dst] != wantAt[dst] {
			t.Errorf("destination offset %d holds %+v, want %+v", dst, got[dst], wantAt[dst])
		}
	}
	if len(got) != len(want) {
		t.Errorf("the destination holds %d data records, the source %d: %v", len(got), len(want), got)
	}
}

// A copy of a marker that the destination writes after the marker was
// replayed and seen moves the batches after it: one append, or several
// pipelined. With mirror.destination.mismatch.action map the partition goes
// to map mode from the first of them (note, mismatch metric) and maps every
// source offset to where it landed — every record once, at the offset the
// map gives; with fail it stops, non-retryable, naming the marker. A
// partition already in map mode corrects the mapping it wrote ahead. When
// another producer's marker comes next, that marker is what moves.
func TestMarkerCopiedAfterItWasReplayed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		mapped    bool // the partition is in map mode before (a compaction gap)
		pipelined int  // 0: the batch after the marker goes alone; n: n batches pipelined
		action    string
		// nextMarker: another producer's transaction (its data before the
		// copied marker) ends right after it: its marker moves.
		nextMarker bool
	}{
		{name: "one append, map", action: "map"},
		{name: "one append, fail", action: "fail"},
		{name: "a pipeline, map", pipelined: 4, action: "map"},
		{name: "a pipeline, fail", pipelined: 4, action: "fail"},
		{name: "already in map mode, map", mapped: true, action: "map"},
		{name: "already in map mode, fail", mapped: true, action: "fail"},
		{name: "the next marker, map", nextMarker: true, action: "map"},
		{name: "the next marker, fail", nextMarker: true, action: "fail"},
		{name: "the next marker already in map mode, map", mapped: true, nextMarker: true, action: "map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dc := kfaketest.NewCluster(t)
			r := newTestRunnerOn(t, side{}, side{}, 0, dc)
			ev := &countEvents{}
			r.d.Events = ev
			r.d.Settings.MismatchAction = tc.action
			ctx := t.Context()
			if err := r.prepare(ctx); err != nil {
				t.Fatal(err)
			}
			src := &srcLog{t: t}
			if tc.mapped {
				src.gapped() // offsets 0–2, one record removed: map mode from 0
			}
			if tc.pipelined > 0 {
				src.data(1, false) // the idempotent producer is confirmed: the appends after the marker pipeline
			}
			if tc.nextMarker {
				src.txnData(4002, 1)
			}
			src.data(2, true)
			marker := src.commit()
			head := len(src.all)
			moved := src.next // the source offset of the first append the copy moves
			if tc.nextMarker {
				src.marker(4002, batch.ControlAbort)
			}
			if tc.pipelined == 0 {
				src.data(1, false)
			}
			for range tc.pipelined {
				src.data(2, false)
			}
			if err := r.forwardAll(ctx, src.all[:head]); err != nil {
				t.Fatalf("forwardAll up to the marker: %v", err)
			}
			if err := r.flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			wantMode := partition.ModePreserve
			if tc.mapped {
				wantMode = partition.ModeMap
			}
			if r.mode != wantMode {
				t.Fatalf("mode %q before the copy, want %q", r.mode, wantMode)
			}
			markerAt := r.dstNext - 1
			var tw partition.TxnWriter
			for _, w := range r.state.Record().TxnWriters {
				if w.SourceProducerID == marker.ProducerID() {
					tw = w
				}
			}
			copyMarkerOn(t, dc, tw.ProducerID, tw.Epoch)
			var peak atomic.Int64
			w := r.d.Path.(writerPath).w
			dc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				dc.KeepControl()
				peak.Store(max(peak.Load(), w.InflightAppends()))
				return nil, nil, false
			})

			err := r.forwardAll(ctx, src.all[head:])
			if err == nil {
				err = r.flush(ctx)
			}
			if tc.pipelined > 0 && peak.Load() < 2 {
				t.Fatalf("at most %d appends in flight: the case needs a pipeline", peak.Load())
			}
			if tc.action == "fail" {
				if err == nil || partition.IsRetryable(err) || !strings.Contains(err.Error(), fmt.Sprintf("marker at offset %d 1 more time", markerAt)) ||
					!strings.Contains(err.Error(), "mirror.destination.mismatch.action is fail") {
					t.Fatalf("forwardAll after the copy: %v (retryable %v), want a non-retryable error naming the marker and the action", err, partition.IsRetryable(err))
				}
				if r.mode != wantMode || ev.count("fail") != 1 {
					t.Fatalf("mode %q, %d fail mismatches counted; want %q, 1", r.mode, ev.count("fail"), wantMode)
				}
				if tc.mapped {
					// The mapping written ahead was corrected: it says
					// where the shifted batch is.
					compareThroughMap(t, r, dc, src.all)
				}
				return
			}
			if err != nil {
				t.Fatalf("forwardAll after the copy: %v", err)
			}
			// The partition goes on: one more batch, after the shifted ones.
			more := src.data(2, false)
			if err := r.forwardAll(ctx, []batch.Batch{more}); err != nil {
				t.Fatalf("forwardAll after the shift: %v", err)
			}
			if err := r.flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			srcEnd := src.next
			wantDst := srcEnd + 1
			if tc.mapped {
				wantDst = srcEnd // the gap took one offset less
			}
			if r.mode != partition.ModeMap || r.state.Record().Mode != partition.ModeMap || r.Next() != srcEnd || r.dstNext != wantDst {
				t.Fatalf("mode %q (recorded %q), next %d, destination next %d; want map, %d, %d", r.mode, r.state.Record().Mode, r.Next(), r.dstNext, srcEnd, wantDst)
			}
			if ev.count("map") != 1 {
				t.Fatalf("%d map mismatches counted, want 1", ev.count("map"))
			}
			notes := strings.Join(r.Status().Notes, "; ")
			wantNote := fmt.Sprintf("map mode from source offset %d", moved)
			if tc.mapped {
				wantNote = "later offsets move by 1 more"
			}
			if !strings.Contains(notes, wantNote) || !strings.Contains(notes, fmt.Sprintf("marker at offset %d again 1 time", markerAt)) {
				t.Fatalf("notes %q do not say why offsets moved", notes)
			}
			compareThroughMap(t, r, dc, src.all)
		})
	}
}

// Between the replayed marker and the next batch, a record kmirror did not
// write is foreign data: the partition stops with an offset mismatch, as
// before, whatever the action.
func TestForeignRecordAfterTheReplayedMarkerIsAMismatch(t *testing.T) {
	t.Parallel()
	for _, pipelined := range []int{0, 3} {
		t.Run(fmt.Sprintf("pipelined %d", pipelined), func(t *testing.T) {
			t.Parallel()
			dc := kfaketest.NewCluster(t)
			r := newTestRunnerOn(t, side{}, side{}, 0, dc)
			ctx := t.Context()
			if err := r.prepare(ctx); err != nil {
				t.Fatal(err)
			}
			src := &srcLog{t: t}
			if pipelined > 0 {
				src.data(1, false)
			}
			src.data(2, true)
			src.commit()
			head := len(src.all)
			for range max(pipelined, 1) {
				src.data(2, false)
			}
			if err := r.forwardAll(ctx, src.all[:head]); err != nil {
				t.Fatal(err)
			}
			if err := r.flush(ctx); err != nil {
				t.Fatal(err)
			}
			produceForeignOn(t, dc)
			err := r.forwardAll(ctx, src.all[head:])
			if err == nil {
				err = r.flush(ctx)
			}
			if !errors.Is(err, writer.ErrOffsetMismatch) || errors.Is(err, writer.ErrDuplicateMarker) || partition.IsRetryable(err) {
				t.Fatalf("forwardAll after a foreign record: %v, want a non-retryable offset mismatch", err)
			}
			if r.mode != partition.ModePreserve {
				t.Fatalf("mode %q, want preserve", r.mode)
			}
		})
	}
}
