package writer

import (
	"context"
	"errors"
	"fmt"
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

// initsFor counts the InitProducerId requests kfake saw for txid.
func initsFor(l *requestLog, txid string) int {
	var n int
	for _, r := range l.requests(int16(kmsg.InitProducerID)) {
		if id := r.(*kmsg.InitProducerIDRequest).TransactionalID; id != nil && *id == txid {
			n++
		}
	}
	return n
}

// A daemon killed in the middle of a transaction: the next one resumes the
// open destination transaction instead of aborting it.
func TestResumeContinuesAnOpenTransactionAfterACrash(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	obs := observe(c, int16(kmsg.InitProducerID))
	rec := &recorder{}

	// First daemon: half of producer 4001's transaction, then killed (its
	// client and Writer dropped without ending anything).
	cl1 := kfaketest.NewClient(t, c)
	w1, err := New(cl1, MirrorName("test"))
	if err != nil {
		t.Fatal(err)
	}
	p1, err := w1.Partition(testTopic, 0, rec.hook)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p1, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	mustAppend(t, p1, kvBatch(t, 2, -1, false, "plain", "1"))
	mustAppend(t, p1, kvBatch(t, 3, 4001, true, "C", "3"))
	w1.Close()
	cl1.Close()

	recorded := rec.recorded()
	if len(recorded) != 1 {
		t.Fatalf("recorded writers %+v, want one", recorded)
	}
	txid := recorded[0].TransactionalID
	initsBefore := initsFor(obs, txid)

	// Second daemon.
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	report, err := p.Resume(context.Background(), recorded)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if len(report.Resumed) != 1 || len(report.Idle)+len(report.Expired)+len(report.Lost)+len(report.Foreign) != 0 {
		t.Fatalf("report %+v, want one resumed writer", report)
	}
	r := report.Resumed[0]
	if r.Writer != recorded[0] || r.NextSequence != 3 || r.StartOffset != 0 {
		t.Fatalf("resumed %+v, want the recorded writer, next sequence 3, start offset 0", r)
	}
	if open := p.OpenTransactions(); len(open) != 1 || open[0].StartOffset != 0 {
		t.Fatalf("OpenTransactions after Resume: %+v", open)
	}
	end, err := p.EndOffset(context.Background())
	if err != nil || end != 4 {
		t.Fatalf("resume point %d, %v; want 4", end, err)
	}

	mustAppend(t, p, kvBatch(t, 4, 4001, true, "D", "4"))
	mustAppend(t, p, markerBatch(t, 5, 4001, batch.ControlCommit))
	mustAppend(t, p, kvBatch(t, 6, -1, false, "after", "1"))

	if n := initsFor(obs, txid) - initsBefore; n != 0 {
		t.Fatalf("the resumed writer sent InitProducerId %d times: that aborts the open transaction", n)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 6)), "0:A=1 1:B=2 2:plain=1 3:C=3 4:D=4 6:after=1"; got != want {
		t.Fatalf("read_committed sees %q, want %q", got, want)
	}
	if len(rec.recorded()) != 1 || rec.recorded()[0] != recorded[0] {
		t.Fatalf("resuming re-recorded the writer: %+v", rec.recorded())
	}
}

func TestResumeReportsIdleLostAndForeignWriters(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec := &recorder{}
	w1 := newWriter(t, c)
	p1 := openPartition(t, w1, testTopic, 0, rec)

	// 4001: a committed transaction (idle writer afterwards).
	mustAppend(t, p1, kvBatch(t, 0, 4001, true, "a", "1"))
	mustAppend(t, p1, markerBatch(t, 1, 4001, batch.ControlCommit))
	p1.Close()

	// 4002: a transaction the destination times out while the daemon is
	// down, through a writer with a short transaction timeout (long enough
	// for the foreign transaction below to start before it on a loaded
	// machine).
	w2 := newWriter(t, c, TransactionTimeout(time.Second))
	p2 := openPartition(t, w2, testTopic, 0, rec)
	mustAppend(t, p2, kvBatch(t, 2, 4002, true, "b", "1"))
	p2.Close()

	// Someone else's open transaction on the mirrored partition.
	other := kfaketest.NewClient(t, c, kgo.TransactionalID("not-kmirror"), kgo.DefaultProduceTopic(testTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(context.Background(), &kgo.Record{Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatalf("foreign transactional produce: %v", err)
	}

	// 4002's transaction (from offset 2) times out on the destination: the
	// broker aborts it and the last stable offset moves past 2.
	cl := kfaketest.NewClient(t, c)
	kfaketest.WaitFor(t, "4002's transaction to time out on the destination", func() (bool, string) {
		lso := listOffset(t, cl, testTopic, 0, true)
		return lso > 2, fmt.Sprintf("last stable offset %d, want past 2", lso)
	})
	recorded := rec.recorded()
	var rec4002 TxnWriterInfo
	for _, r := range recorded {
		if r.SourceProducerID == 4002 {
			rec4002 = r
		}
	}

	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	report, err := p.Resume(context.Background(), recorded)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if len(report.Resumed) != 0 || len(report.Expired) != 0 {
		t.Fatalf("report %+v: nothing should be resumed or expired", report)
	}
	if len(report.Idle) != 1 || report.Idle[0].SourceProducerID != 4001 {
		t.Fatalf("idle %+v, want 4001", report.Idle)
	}
	if len(report.Lost) != 1 || report.Lost[0].Writer != rec4002 || report.Lost[0].ProducerID != rec4002.ProducerID ||
		report.Lost[0].Epoch <= rec4002.Epoch {
		t.Fatalf("lost %+v, want 4002 with a newer epoch than recorded %+v", report.Lost, rec4002)
	}
	if len(report.Foreign) != 1 || report.Foreign[0].StartOffset != 3 {
		t.Fatalf("foreign %+v, want the other producer's transaction from offset 3", report.Foreign)
	}
	if err := other.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	// The idle writer is reused. kfake's DescribeProducers lists only
	// producers with an open transaction, so its next sequence is unknown
	// and its next transaction re-initialises it (a new epoch, recorded
	// again; a real broker lists it and the epoch is kept, see
	// TestClassifyRecordedWriters). Either way it lands in place.
	end, err := p.EndOffset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var before TxnWriterInfo
	for _, r := range rec.recorded() {
		if r.SourceProducerID == 4001 {
			before = r
		}
	}
	mustAppend(t, p, kvBatch(t, end, 4001, true, "again", "1"))
	mustAppend(t, p, markerBatch(t, end+1, 4001, batch.ControlCommit))
	var after TxnWriterInfo
	for _, r := range rec.recorded() {
		if r.SourceProducerID == 4001 {
			after = r
		}
	}
	if after.ProducerID != before.ProducerID || after.Epoch != before.Epoch+1 {
		t.Fatalf("reused writer recorded as %+v, want %+v with the next epoch", after, before)
	}
	// 4002's next transaction starts a fresh writer over the lost one.
	mustAppend(t, p, kvBatch(t, end+2, 4002, true, "fresh", "1"))
	mustAppend(t, p, markerBatch(t, end+3, 4002, batch.ControlCommit))
}

func TestResumeReportsExpiredTransactionalIDs(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.BrokerConfigs(map[string]string{"transactional.id.expiration.ms": "100"}))
	rec := &recorder{}
	p1 := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p1, kvBatch(t, 0, 4001, true, "a", "1"))
	mustAppend(t, p1, markerBatch(t, 1, 4001, batch.ControlAbort))
	p1.Close()

	// Wait until the coordinator has forgotten the id, then Resume must
	// report it expired.
	id := rec.recorded()[0].TransactionalID
	adm, ctx := kfaketest.NewAdmin(t, c), kfaketest.Context(t)
	kfaketest.WaitFor(t, "transactional id "+id+" to expire", func() (bool, string) {
		d, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		dt := d[id]
		return errors.Is(dt.Err, kerr.TransactionalIDNotFound), fmt.Sprintf("state %q, error %v", dt.State, dt.Err)
	})
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	report, err := p.Resume(context.Background(), rec.recorded())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if len(report.Expired) != 1 {
		t.Fatalf("the transactional id never expired: %+v", report)
	}
	mustAppend(t, p, kvBatch(t, 2, 4001, true, "b", "1")) // a new writer for the same source producer
	mustAppend(t, p, markerBatch(t, 3, 4001, batch.ControlCommit))
}

func TestResumeRefusesForeignRecordsAndMisuse(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	if _, err := p.Resume(context.Background(), []TxnWriterInfo{{SourceProducerID: 1, TransactionalID: "kmirror-other-mirrored-0-1"}}); err == nil {
		t.Fatal("Resume accepted a writer of another mirror")
	}
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	if _, err := p.Resume(context.Background(), rec.recorded()); err == nil {
		t.Fatal("Resume after Append succeeded")
	}
}

// Without Resume, a writer for a transactional id with an open transaction
// refuses to initialise it (that would abort the transaction).
func TestUnresumedOpenTransactionIsNotAborted(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cl := kfaketest.NewClient(t, c)
	rec := &recorder{}
	p1 := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p1, kvBatch(t, 0, 4001, true, "a", "1"))
	p1.Close()

	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	_, err := p.Append(context.Background(), kvBatch(t, 1, 4001, true, "b", "1"))
	if !errors.Is(err, ErrUnresumedTransaction) {
		t.Fatalf("Append without Resume: %v, want ErrUnresumedTransaction", err)
	}
	if lso, hw := listOffset(t, cl, testTopic, 0, true), listOffset(t, cl, testTopic, 0, false); lso != 0 || hw != 1 {
		t.Fatalf("LSO %d HW %d: the open transaction was touched", lso, hw)
	}
}

// failEndTxn makes the cluster answer EndTxn with a retriable error while
// *failing is set.
func failEndTxn(c *kfake.Cluster, failing *atomic.Bool) {
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !failing.Load() {
			return nil, nil, false
		}
		resp := req.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
}

// EndTxn keeps failing until the append gives up; the same partition
// retries the marker later: the writer re-reads its transaction's state and
// ends it, without re-initialising (which would abort it).
func TestMarkerRetriedAfterAFailedEndTxn(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var failing atomic.Bool
	failEndTxn(c, &failing)
	obs := observe(c, int16(kmsg.InitProducerID))
	p := openPartition(t, newWriter(t, c, RetryTimeout(300*time.Millisecond), RetryBackoff(10*time.Millisecond, 50*time.Millisecond)), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))

	failing.Store(true)
	if _, err := p.Append(context.Background(), markerBatch(t, 1, 4001, batch.ControlCommit)); !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("marker Append while EndTxn fails: %v", err)
	}
	failing.Store(false)
	inits := initsFor(obs, p.TransactionalID(4001))
	mustAppend(t, p, markerBatch(t, 1, 4001, batch.ControlCommit))
	if n := initsFor(obs, p.TransactionalID(4001)); n != inits {
		t.Fatalf("retrying the marker sent InitProducerId")
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 0)), "0:a=1"; got != want {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
}

// A daemon dies between AddPartitionsToTxn and EndTxn of a marker-only
// transaction. The next one resumes it (no data on the partition) and the
// marker lands where the source has it.
func TestResumeAfterACrashInsideAMarkerOnlyTransaction(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var failing atomic.Bool
	failEndTxn(c, &failing)
	rec := &recorder{}
	p1 := openPartition(t, newWriter(t, c, RetryTimeout(300*time.Millisecond), RetryBackoff(10*time.Millisecond, 50*time.Millisecond)), testTopic, 0, rec)
	mustAppend(t, p1, kvBatch(t, 0, -1, false, "a", "1"))
	failing.Store(true)
	if _, err := p1.Append(context.Background(), markerBatch(t, 1, 5000, batch.ControlAbort)); err == nil {
		t.Fatal("marker Append succeeded while EndTxn fails")
	}
	p1.Close() // the daemon dies
	failing.Store(false)

	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	report, err := p.Resume(context.Background(), rec.recorded())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if len(report.Resumed) != 1 || report.Resumed[0].Writer.SourceProducerID != 5000 || report.Resumed[0].StartOffset != -1 {
		t.Fatalf("report %+v, want 5000's marker-only transaction resumed without data", report)
	}
	if end, err := p.EndOffset(context.Background()); err != nil || end != 1 {
		t.Fatalf("resume point %d, %v; want 1", end, err)
	}
	mustAppend(t, p, markerBatch(t, 1, 5000, batch.ControlAbort))
	mustAppend(t, p, kvBatch(t, 2, -1, false, "b", "1"))
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 2)), "0:a=1 2:b=1"; got != want {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
	if hw := listOffset(t, kfaketest.NewClient(t, c), testTopic, 0, false); hw != 3 {
		t.Fatalf("high watermark %d, want 3 (one marker)", hw)
	}
}
