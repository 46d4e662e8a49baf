package writer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// seqBatches builds n source batches of recs records each from offset base
// (producer srcPID, transactional or not), with distinct keys and values.
func seqBatches(t *testing.T, base int64, n, recs int, srcPID int64, txn bool) []batch.Batch {
	t.Helper()
	out := make([]batch.Batch, n)
	for i := range out {
		var kvs []string
		for j := range recs {
			off := base + int64(i*recs+j)
			kvs = append(kvs, fmt.Sprintf("k%d", off), fmt.Sprintf("v%d", off))
		}
		out[i] = kvBatch(t, base+int64(i*recs), srcPID, txn, kvs...)
	}
	return out
}

// wantKeys is the destination keysAt should show for records base..end-1
// written by seqBatches.
func wantKeys(base, end int64) string {
	var parts []string
	for off := base; off < end; off++ {
		parts = append(parts, fmt.Sprintf("%d:k%d=v%d", off, off, off))
	}
	return strings.Join(parts, " ")
}

// appendAll runs AppendAll and checks that done reported every batch in
// order at its own offsets and that the batches got their offsets back.
func appendAll(t *testing.T, p *Partition, bs []batch.Batch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seen []int
	n, err := p.AppendAll(ctx, bs, func(i int, res Result) {
		seen = append(seen, i)
		if res.BaseOffset != bs[i].BaseOffset() || res.NextOffset != bs[i].NextOffset() {
			t.Errorf("batch %d landed at %d–%d, want %d–%d", i, res.BaseOffset, res.NextOffset, bs[i].BaseOffset(), bs[i].NextOffset())
		}
	})
	if err != nil {
		t.Fatalf("AppendAll: %d of %d appended: %v", n, len(bs), err)
	}
	if n != len(bs) || len(seen) != len(bs) {
		t.Fatalf("AppendAll: n %d, done called %d times, want %d", n, len(seen), len(bs))
	}
	for i, j := range seen {
		if i != j {
			t.Fatalf("done called out of order: %v", seen)
		}
	}
	for i, b := range bs {
		if b.BaseOffset() != b.NextOffset()-int64(b.LastOffsetDelta())-1 || b.BaseOffset() < 0 {
			t.Fatalf("batch %d: base offset not restored: %d", i, b.BaseOffset())
		}
	}
}

// peakInflight records the most appends w had in flight when cluster c
// received a ProduceRequest.
func peakInflight(c *kfake.Cluster, w *Writer) *atomic.Int64 {
	var peak atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n := w.InflightAppends(); n > peak.Load() {
			peak.Store(n)
		}
		return nil, nil, false
	})
	return &peak
}

// confirmedPartition opens testTopic/0 on a one-broker cluster and appends
// offset 0 alone, so the idempotent producer is confirmed and the next
// appends pipeline.
func confirmedPartition(t *testing.T) (*kfake.Cluster, *Writer, *Partition) {
	t.Helper()
	c := newCluster(t, kfake.NumBrokers(1))
	w := newWriter(t, c)
	p := openPartition(t, w, testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, -1, false, "k0", "v0"))
	return c, w, p
}

// holdNextProduce makes cluster c hold the next ProduceRequest until the
// returned channel is closed (the requests behind it on the connection wait
// too, the broker answering in order).
func holdNextProduce(c *kfake.Cluster) chan struct{} {
	release := make(chan struct{})
	var held atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if held.CompareAndSwap(false, true) {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return release
}

// Several appends of one partition are in flight at once: the broker holds
// the first answer while the writer sends the next four.
func TestAppendAllKeepsSeveralAppendsInFlight(t *testing.T) {
	t.Parallel()
	c, w, p := confirmedPartition(t)

	release := holdNextProduce(c)
	bs := seqBatches(t, 1, 20, 3, -1, false)
	errc := make(chan error, 1)
	go func() {
		_, err := p.AppendAll(context.Background(), bs, nil)
		errc <- err
	}()
	kfaketest.WaitFor(t, "five appends in flight while the first is held", func() (bool, string) {
		n := w.InflightAppends()
		return n == DefaultMaxInflightPerPartition, fmt.Sprintf("%d in flight", n)
	})
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("AppendAll: %v", err)
	}
	if n := w.InflightAppends(); n != 0 {
		t.Fatalf("%d appends still counted in flight", n)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, false, 60)), wantKeys(0, 61); got != want {
		t.Fatalf("destination:\n%s\nwant:\n%s", got, want)
	}
}

// With MaxInflightPerPartition(1) every append waits for the previous one.
func TestAppendAllWithOneInFlightSendsOneAtATime(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	w := newWriter(t, c, MaxInflightPerPartition(1))
	p := openPartition(t, w, testTopic, 0, &recorder{})
	peak := peakInflight(c, w)
	appendAll(t, p, seqBatches(t, 0, 12, 2, -1, false))
	if n := peak.Load(); n != 0 {
		t.Fatalf("%d appends were pipelined, want none", n)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, false, 23)), wantKeys(0, 24); got != want {
		t.Fatalf("destination:\n%s\nwant:\n%s", got, want)
	}
}

func TestMaxInflightPerPartitionIsValidated(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	for _, n := range []int{0, 6} {
		_, err := New(kfaketest.NewClient(t, c), MaxInflightPerPartition(n))
		if err == nil || !strings.Contains(err.Error(), "MaxInflightPerPartition") {
			t.Fatalf("MaxInflightPerPartition(%d): %v, want an error naming the option", n, err)
		}
	}
}

// interruptNthProduce makes cluster c answer its nth ProduceRequest with
// answer (nil response and an error: the connection is dropped) and handle
// the others normally.
func interruptNthProduce(c *kfake.Cluster, n int32, answer func(kmsg.Request) (kmsg.Response, error)) {
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) != n {
			return nil, nil, false
		}
		c.DropControl()
		resp, err := answer(req)
		return resp, err, true
	})
}

// mirrorThroughInterruption appends offset 0 alone (confirming the
// producer), then batches of recs records up to offset end-1 pipelined, and
// checks that the destination holds each record once at its offset.
func mirrorThroughInterruption(t *testing.T, c *kfake.Cluster, recs int, end int64) {
	t.Helper()
	p := openPartition(t, newWriter(t, c, RetryBackoff(time.Millisecond, 10*time.Millisecond)), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, -1, false, "k0", "v0"))
	appendAll(t, p, seqBatches(t, 1, int(end-1)/recs, recs, -1, false))
	if got, want := keysAt(consume(t, c, testTopic, 0, false, end-1)), wantKeys(0, end); got != want {
		t.Fatalf("destination:\n%s\nwant:\n%s", got, want)
	}
}

// A leader change in the middle of a pipeline (NOT_LEADER_OR_FOLLOWER on
// one request, the appends behind it refused as out of order or failed the
// same way) is retried: every batch lands once, at its own offsets.
func TestAppendAllRetriesALeaderChangeMidPipeline(t *testing.T) {
	t.Parallel()
	for _, code := range []int16{kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code, kerr.OutOfOrderSequenceNumber.Code} {
		t.Run(kerr.ErrorForCode(code).Error(), func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			// The 4th request: the third append of the pipeline.
			interruptNthProduce(c, 4, func(req kmsg.Request) (kmsg.Response, error) { return produceAnswer(req, code), nil })
			mirrorThroughInterruption(t, c, 2, 61)
		})
	}
}

// A connection lost with appends in flight: the writer sends them again
// with their sequences and each lands once.
func TestAppendAllResendsAfterALostConnection(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	interruptNthProduce(c, 5, func(kmsg.Request) (kmsg.Response, error) { return nil, errors.New("connection dropped by the test") })
	mirrorThroughInterruption(t, c, 1, 41)
}

// Transactional batches of one source producer are pipelined inside the
// transaction; markers and the first batch of each transaction go alone.
// Offsets and read_committed visibility match the source.
func TestAppendAllPipelinesTransactions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	w := newWriter(t, c)
	p := openPartition(t, w, testTopic, 0, &recorder{})
	peak := peakInflight(c, w)
	const pid = 4001
	var bs []batch.Batch
	bs = append(bs, seqBatches(t, 0, 10, 2, pid, true)...)        // 0–19
	bs = append(bs, markerBatch(t, 20, pid, batch.ControlCommit)) // 20
	bs = append(bs, seqBatches(t, 21, 5, 2, -1, false)...)        // 21–30
	bs = append(bs, seqBatches(t, 31, 6, 1, pid, true)...)        // 31–36
	bs = append(bs, markerBatch(t, 37, pid, batch.ControlAbort))  // 37
	bs = append(bs, seqBatches(t, 38, 3, 1, -1, false)...)        // 38–40
	appendAll(t, p, bs)
	if n := peak.Load(); n < 2 {
		t.Fatalf("at most %d appends in flight at a ProduceRequest: transactional batches were not pipelined", n)
	}
	if len(p.OpenTransactions()) != 0 {
		t.Fatalf("open transactions left: %+v", p.OpenTransactions())
	}
	all := consume(t, c, testTopic, 0, false, 40)
	want := wantKeys(0, 20) + " " + wantKeys(21, 37) + " " + wantKeys(38, 41)
	if got := keysAt(all); got != want {
		t.Fatalf("read_uncommitted:\n%s\nwant:\n%s", got, want)
	}
	committed := consume(t, c, testTopic, 0, true, 40)
	want = wantKeys(0, 20) + " " + wantKeys(21, 31) + " " + wantKeys(38, 41)
	if got := keysAt(committed); got != want {
		t.Fatalf("read_committed:\n%s\nwant:\n%s", got, want)
	}
	if hw := listOffset(t, kfaketest.NewClient(t, c), testTopic, 0, false); hw != 41 {
		t.Fatalf("high watermark %d, want 41", hw)
	}
}

// An append answered at another offset than expected (as when a foreign
// producer wrote in between) stops AppendAll with an offset mismatch that
// names both offsets; it reports how many batches are where they belong.
func TestAppendAllReportsAMismatchMidPipeline(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	interruptNthProduce(c, 4, func(req kmsg.Request) (kmsg.Response, error) { // batch 2 of the pipeline
		resp := produceAnswer(req, 0).(*kmsg.ProduceResponse)
		resp.Topics[0].Partitions[0].BaseOffset = 7
		return resp, nil
	})
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, -1, false, "k0", "v0"))
	bs := seqBatches(t, 1, 10, 1, -1, false)
	var landed []int
	n, err := p.AppendAll(context.Background(), bs, func(i int, _ Result) { landed = append(landed, i) })
	var me *OffsetMismatchError
	if !errors.As(err, &me) || !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("AppendAll: %v, want an offset mismatch", err)
	}
	if n != 2 || len(landed) != 2 || me.Expected != 3 || me.Got != 7 {
		t.Fatalf("n %d, landed %v, mismatch %+v; want 2 batches landed and batch 2 expected at 3, got 7", n, landed, me)
	}
	for i, b := range bs {
		if b.BaseOffset() != int64(1+i) {
			t.Fatalf("batch %d: base offset %d not restored", i, b.BaseOffset())
		}
	}
}

// Send leaves the last appends in flight so the next Send continues the
// pipeline; Flush waits for them. done reports every batch once, in order,
// whichever call it lands in; other operations wait for a Flush.
func TestSendKeepsThePipelineAcrossCallsUntilFlush(t *testing.T) {
	t.Parallel()
	c, _, p := confirmedPartition(t)

	release := holdNextProduce(c)
	ctx := kfaketest.Context(t)
	var got []int64
	done := func(b batch.Batch, res Result) {
		if res.BaseOffset != b.BaseOffset() {
			t.Errorf("batch at %d landed at %d", b.BaseOffset(), res.BaseOffset)
		}
		got = append(got, b.BaseOffset())
	}
	first := seqBatches(t, 1, 3, 2, -1, false) // 1–6
	if err := p.Send(ctx, first, done); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := p.Inflight(); n != 3 || len(got) != 0 {
		t.Fatalf("after the first Send: %d in flight, %d landed; want 3 in flight (the first answer is held)", n, len(got))
	}
	if _, err := p.AppendAt(ctx, kvBatch(t, 7, -1, false, "x", "y"), 7); !errors.Is(err, ErrNotFlushed) {
		t.Fatalf("AppendAt with appends in flight: %v, want ErrNotFlushed", err)
	}
	if err := p.AbortAll(ctx); !errors.Is(err, ErrNotFlushed) {
		t.Fatalf("AbortAll with appends in flight: %v, want ErrNotFlushed", err)
	}
	close(release)
	second := seqBatches(t, 7, 10, 2, -1, false) // 7–26
	if err := p.Send(ctx, second, done); err != nil {
		t.Fatalf("second Send: %v", err)
	}
	if err := p.Flush(ctx, done); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	var want []int64
	for _, b := range append(first, second...) {
		want = append(want, b.BaseOffset())
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("done reported %v, want %v", got, want)
	}
	if n := p.Inflight(); n != 0 {
		t.Fatalf("%d in flight after Flush", n)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, false, 26)), wantKeys(0, 27); got != want {
		t.Fatalf("destination:\n%s\nwant:\n%s", got, want)
	}
}

// Once the pipeline is flushed, nothing in the writer holds a batch: each
// holds the whole fetch response it came in alive, so a slot left filled
// keeps megabytes per partition (the pipeline's array did, before popPipe
// cleared the slots it moves past).
func TestAFlushedPipelineHoldsNoBatch(t *testing.T) {
	t.Parallel()
	_, _, p := confirmedPartition(t)
	bs := seqBatches(t, 1, 20, 3, -1, false)
	held := make([]weak.Pointer[byte], len(bs))
	for i, b := range bs {
		held[i] = weak.Make(&b[0])
	}
	appendAll(t, p, bs)
	clear(bs)
	bs = nil
	runtime.GC()
	runtime.GC()
	for i, w := range held {
		if w.Value() != nil {
			t.Fatalf("batch %d of 20 is still reachable after the pipeline was flushed", i)
		}
	}
	runtime.KeepAlive(p)
}
