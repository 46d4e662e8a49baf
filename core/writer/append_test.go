package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// kvBatch builds a source batch at base from key/value pairs.
func kvBatch(t *testing.T, base, srcPID int64, txn bool, kvs ...string) batch.Batch {
	t.Helper()
	var recs []batch.Record
	for i := 0; i < len(kvs); i += 2 {
		off := base + int64(i/2)
		recs = append(recs, batch.Record{Offset: off, Timestamp: 1_700_000_000_000 + off, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	opts := batch.EncodeOptions{BaseOffset: base, Transactional: txn, ProducerID: srcPID, ProducerEpoch: 0, BaseSequence: 0}
	if srcPID < 0 {
		opts.ProducerEpoch, opts.BaseSequence = -1, -1
	}
	b, err := batch.Encode(opts, recs)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

func TestAppendPreservesOffsetsAndRecordsWithEveryCodec(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})

	codecs := []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	var want []batch.Record
	var off int64
	for i, codec := range codecs {
		recs := []batch.Record{
			{Offset: off, Timestamp: 1_700_000_000_000 + off*1000, Key: []byte("key-" + codec.String()), Value: bytes.Repeat([]byte(codec.String()), 50)},
			{Offset: off + 1, Timestamp: 1_700_000_000_000 + off*1000 - 5, Key: nil, Value: []byte("no key")},
			{Offset: off + 2, Timestamp: 1_700_000_000_000 + off*1000 + 7, Key: []byte("tombstone"), Value: nil,
				Headers: []batch.Header{{Key: "h1", Value: []byte("x")}, {Key: "null-header", Value: nil}, {Key: "empty", Value: []byte{}}}},
		}
		opts := batch.EncodeOptions{BaseOffset: off, Compression: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		if i%2 == 1 { // a source batch of an idempotent producer: its producer fields are replaced
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 900+int64(i), 2, 42
		}
		b, err := batch.Encode(opts, recs)
		if err != nil {
			t.Fatalf("Encode %v: %v", codec, err)
		}
		res := mustAppend(t, p, b)
		if res.NextOffset != off+3 || res.Control || res.LogAppendTime != -1 {
			t.Fatalf("%v: result %+v, want next offset %d, CreateTime", codec, res, off+3)
		}
		if b.Compression() != codec {
			t.Fatalf("%v: Append changed the codec to %v", codec, b.Compression())
		}
		want = append(want, recs...)
		off += 3
	}

	for _, committed := range []bool{false, true} {
		got := consume(t, c, testTopic, 0, committed, off-1)
		if len(got) != len(want) {
			t.Fatalf("read_committed=%v: %d records, want %d", committed, len(got), len(want))
		}
		for i, r := range got {
			if d := diffRecord(want[i], r); d != "" {
				t.Errorf("read_committed=%v record %d: %s", committed, i, d)
			}
		}
	}
	if hw := listOffset(t, kfaketest.NewClient(t, c), testTopic, 0, false); hw != off {
		t.Fatalf("destination high watermark %d, want %d", hw, off)
	}
}

func diffRecord(w batch.Record, r *kgo.Record) string {
	switch {
	case r.Offset != w.Offset:
		return fmt.Sprintf("offset %d, want %d", r.Offset, w.Offset)
	case !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", r.Key, r.Key == nil, w.Key, w.Key == nil)
	case !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil):
		return fmt.Sprintf("value %q (nil %v), want %q (nil %v)", r.Value, r.Value == nil, w.Value, w.Value == nil)
	case r.Timestamp.UnixMilli() != w.Timestamp:
		return fmt.Sprintf("timestamp %d, want %d", r.Timestamp.UnixMilli(), w.Timestamp)
	case len(r.Headers) != len(w.Headers):
		return fmt.Sprintf("%d headers, want %d", len(r.Headers), len(w.Headers))
	}
	for i, h := range r.Headers {
		if h.Key != w.Headers[i].Key || !bytes.Equal(h.Value, w.Headers[i].Value) || (h.Value == nil) != (w.Headers[i].Value == nil) {
			return fmt.Sprintf("header %d %q=%q, want %q=%q", i, h.Key, h.Value, w.Headers[i].Key, w.Headers[i].Value)
		}
	}
	return ""
}

func keysAt(rs []*kgo.Record) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value))
	}
	return strings.Join(parts, " ")
}

// The KIP's example: two interleaved source transactions, one committed and
// one aborted, then a plain record.
func TestKIPExampleTransactionsAndMarkersKeepTheirOffsets(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)

	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	mustAppend(t, p, kvBatch(t, 2, 4002, true, "X", "9"))
	if res := mustAppend(t, p, markerBatch(t, 3, 4001, batch.ControlCommit)); !res.Control || res.NextOffset != 4 {
		t.Fatalf("COMMIT result %+v", res)
	}
	mustAppend(t, p, markerBatch(t, 4, 4002, batch.ControlAbort))
	mustAppend(t, p, kvBatch(t, 5, -1, false, "Z", "10"))

	if got, want := keysAt(consume(t, c, testTopic, 0, true, 5)), "0:A=1 1:B=2 5:Z=10"; got != want {
		t.Errorf("read_committed sees %q, want %q", got, want)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, false, 5)), "0:A=1 1:B=2 2:X=9 5:Z=10"; got != want {
		t.Errorf("read_uncommitted sees %q, want %q", got, want)
	}

	log, err := verify.ReadLog(context.Background(), kfaketest.NewClient(t, c), testTopic, 0)
	if err != nil {
		t.Fatalf("ReadLog: %v", err)
	}
	var layout []string
	for _, e := range log.Entries {
		if e.Control {
			layout = append(layout, fmt.Sprintf("%d:%v", e.Offset, e.Marker))
		} else {
			layout = append(layout, fmt.Sprintf("%d:%s(txn=%v,visible=%v)", e.Offset, e.Key, e.Txn, e.Visible))
		}
	}
	want := "0:A(txn=true,visible=true) 1:B(txn=true,visible=true) 2:X(txn=true,visible=false) 3:COMMIT 4:ABORT 5:Z(txn=false,visible=true)"
	if got := strings.Join(layout, " "); got != want {
		t.Errorf("destination log\n got %s\nwant %s", got, want)
	}

	recorded := rec.recorded()
	if len(recorded) != 2 {
		t.Fatalf("OnTxnWriter recorded %d writers, want 2: %+v", len(recorded), recorded)
	}
	for _, info := range recorded {
		if want := fmt.Sprintf("kmirror-test:%s:0:%d", testTopic, info.SourceProducerID); info.TransactionalID != want || info.ProducerID < 0 || info.Epoch < 0 {
			t.Errorf("recorded %+v, want transactional id %s and a producer id", info, want)
		}
	}
	if open := p.OpenTransactions(); len(open) != 0 {
		t.Errorf("open transactions after both markers: %+v", open)
	}
}

func TestMarkerWithoutDataLandsAtItsOffset(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})

	mustAppend(t, p, kvBatch(t, 0, -1, false, "a", "1", "b", "2", "c", "3"))
	// Markers of transactions whose data lies before the mirrored range.
	mustAppend(t, p, markerBatch(t, 3, 5000, batch.ControlCommit))
	mustAppend(t, p, markerBatch(t, 4, 5001, batch.ControlAbort))
	mustAppend(t, p, kvBatch(t, 5, -1, false, "d", "4"))

	log, err := verify.ReadLog(context.Background(), kfaketest.NewClient(t, c), testTopic, 0)
	if err != nil {
		t.Fatalf("ReadLog: %v", err)
	}
	var layout []string
	for _, e := range log.Entries {
		if e.Control {
			layout = append(layout, fmt.Sprintf("%d:%v", e.Offset, e.Marker))
		} else {
			layout = append(layout, fmt.Sprintf("%d:%s", e.Offset, e.Key))
		}
	}
	if got, want := strings.Join(layout, " "), "0:a 1:b 2:c 3:COMMIT 4:ABORT 5:d"; got != want {
		t.Fatalf("destination log %q, want %q", got, want)
	}
}

// Real brokers write markers after EndTxn returns. The writer must not
// append the next batch before the marker is in the log.
func TestMarkerAppendWaitsUntilTheMarkerIsVisible(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const delay = 400 * time.Millisecond
	// A side client that sends the real EndTxn late, at v4 like the writer.
	late := kversionPinned(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lateDone := make(chan error, 1)
	answered := make(chan time.Time, 1)
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		// Answer EndTxn now and write the marker later, as a broker
		// whose coordinator is slow to deliver markers would.
		end := *req.(*kmsg.EndTxnRequest)
		go func() { // owned by the test: waited on through lateDone
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				lateDone <- ctx.Err()
				return
			}
			resp, err := end.RequestWith(ctx, late)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			lateDone <- err
		}()
		answered <- time.Now()
		return req.(*kmsg.EndTxnRequest).ResponseKind(), nil, true
	})
	obs := observe(c)

	p := openPartition(t, newWriter(t, c, RetryBackoff(5*time.Millisecond, 50*time.Millisecond)), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1"))
	listsBefore := obs.count(int16(kmsg.ListOffsets))
	start := time.Now()
	mustAppend(t, p, markerBatch(t, 1, 4001, batch.ControlCommit))
	returned := time.Now()
	if err := <-lateDone; err != nil {
		t.Fatalf("late EndTxn: %v", err)
	}
	endTxnAnswered := <-answered
	if waited := returned.Sub(endTxnAnswered); waited < delay-50*time.Millisecond {
		t.Fatalf("marker Append returned %v after EndTxn was answered, before the marker was written (%v later)", waited, delay)
	}
	if polls := obs.count(int16(kmsg.ListOffsets)) - listsBefore; polls < 2 {
		t.Errorf("the writer polled the end offset %d times while waiting, want several", polls)
	}
	t.Logf("marker Append took %v", returned.Sub(start))

	if end := listOffset(t, kfaketest.NewClient(t, c), testTopic, 0, false); end != 2 {
		t.Fatalf("end offset after the marker Append returned: %d, want 2", end)
	}
	mustAppend(t, p, kvBatch(t, 2, -1, false, "B", "2"))
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 2)), "0:A=1 2:B=2"; got != want {
		t.Fatalf("read_committed sees %q, want %q", got, want)
	}
}

// kversionPinned returns a client that sends EndTxn at most at v4.
func kversionPinned(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), endTxnVersion)
	return kfaketest.NewClient(t, c, kgo.MaxVersions(v))
}

func TestOffsetMismatchWhenTheDestinationHoldsForeignRecords(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	foreign := kfaketest.NewClient(t, c, kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := foreign.ProduceSync(context.Background(), &kgo.Record{Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatalf("foreign produce: %v", err)
	}
	cl := kfaketest.NewClient(t, c)
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})

	_, err := p.Append(context.Background(), kvBatch(t, 0, -1, false, "a", "1"))
	var me *OffsetMismatchError
	if !errors.Is(err, ErrOffsetMismatch) || !errors.As(err, &me) {
		t.Fatalf("Append onto a foreign record: %v, want ErrOffsetMismatch", err)
	}
	if me.Expected != 0 || me.Got != 1 || me.Topic != testTopic || me.Partition != 0 || me.Mirror != "test" {
		t.Fatalf("mismatch %+v", me)
	}
	if !strings.Contains(err.Error(), "expected offset 0, got 1") {
		t.Errorf("error does not say where: %v", err)
	}
	if hw := listOffset(t, cl, testTopic, 0, false); hw != 1 {
		t.Fatalf("the writer wrote despite the known mismatch: high watermark %d, want 1", hw)
	}

	// A foreign write between two appends is caught after the append.
	p2 := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{}) // a second Writer: its own Partition
	mustAppend(t, p2, kvBatch(t, 1, -1, false, "ours", "1"))
	if err := foreign.ProduceSync(context.Background(), &kgo.Record{Value: []byte("intruder")}).FirstErr(); err != nil {
		t.Fatalf("foreign produce: %v", err)
	}
	res, err := p2.Append(context.Background(), kvBatch(t, 2, -1, false, "ours", "2"))
	if !errors.As(err, &me) || me.Expected != 2 || me.Got != 3 {
		t.Fatalf("Append after a foreign write: %v (%+v), want mismatch expected 2 got 3", err, me)
	}
	if res.BaseOffset != 3 || res.NextOffset != 4 {
		t.Fatalf("result of the mismatched append %+v, want where it landed", res)
	}
}

func TestGappedBatchIsRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	b, err := batch.Encode(batch.EncodeOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]batch.Record{{Offset: 0, Value: []byte("a")}, {Offset: 2, Value: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(context.Background(), b); !errors.Is(err, ErrNotDense) {
		t.Fatalf("Append of a compacted batch: %v, want ErrNotDense", err)
	}
	if hw := listOffset(t, kfaketest.NewClient(t, c), testTopic, 0, false); hw != 0 {
		t.Fatalf("high watermark %d after a refused batch", hw)
	}
}

func TestAbortAllEndsOpenTransactionsSoReadCommittedIsNotBlocked(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cl := kfaketest.NewClient(t, c)
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})

	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	mustAppend(t, p, kvBatch(t, 1, -1, false, "plain", "1"))
	mustAppend(t, p, kvBatch(t, 2, 4002, true, "b", "1", "c", "2"))
	open := p.OpenTransactions()
	if len(open) != 2 || open[0].Writer.SourceProducerID != 4001 || open[0].StartOffset != 0 || open[1].StartOffset != 2 {
		t.Fatalf("OpenTransactions %+v, want 4001 from 0 and 4002 from 2", open)
	}
	if lso, hw := listOffset(t, cl, testTopic, 0, true), listOffset(t, cl, testTopic, 0, false); lso != 0 || hw != 4 {
		t.Fatalf("before AbortAll: LSO %d HW %d, want 0 and 4", lso, hw)
	}

	if err := p.AbortAll(context.Background()); err != nil {
		t.Fatalf("AbortAll: %v", err)
	}
	if open := p.OpenTransactions(); len(open) != 0 {
		t.Fatalf("open after AbortAll: %+v", open)
	}
	lso, hw := listOffset(t, cl, testTopic, 0, true), listOffset(t, cl, testTopic, 0, false)
	if lso != hw || hw != 6 {
		t.Fatalf("after AbortAll: LSO %d HW %d, want both 6 (two ABORT markers at 4 and 5)", lso, hw)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 1)), "1:plain=1"; got != want {
		t.Fatalf("read_committed sees %q, want %q", got, want)
	}
	if end, err := p.EndOffset(context.Background()); err != nil || end != 6 {
		t.Fatalf("EndOffset %d, %v", end, err)
	}
}
