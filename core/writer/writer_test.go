package writer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

func TestManyPartitionsShareProduceRequestsAndKeepOrder(t *testing.T) {
	t.Parallel()
	const (
		parts   = 8
		batches = 25
	)
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "wide"))
	var (
		mu        sync.Mutex
		requests  int
		maxParts  int
		dupInReq  string
		versions  = map[int16]int{}
		partsSeen int
	)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		requests++
		versions[pr.Version]++
		n := 0
		seen := map[string]bool{}
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				k := fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)
				if seen[k] {
					dupInReq = k
				}
				seen[k] = true
				n++
			}
		}
		partsSeen += n
		maxParts = max(maxParts, n)
		time.Sleep(2 * time.Millisecond) // a slow broker, so appends queue up: the condition under test, not a wait
		return nil, nil, false
	})

	w := newWriter(t, c, MaxInflightPerBroker(1))
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	for part := range int32(parts) {
		p := openPartition(t, w, "wide", part, &recorder{})
		wg.Go(func() {
			for i := range int64(batches) {
				b := kvBatch(t, i, -1, false, fmt.Sprintf("p%d", part), fmt.Sprintf("%d", i))
				res, err := p.Append(context.Background(), b)
				if err == nil && res.BaseOffset != i {
					err = fmt.Errorf("partition %d batch %d landed at %d", part, i, res.BaseOffset)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d appends in %d ProduceRequests, up to %d partitions per request", parts*batches, requests, maxParts)
	if partsSeen != parts*batches {
		t.Fatalf("brokers saw %d partition batches, want %d (a retry?)", partsSeen, parts*batches)
	}
	if requests >= parts*batches || maxParts < 2 {
		t.Fatalf("%d ProduceRequests for %d appends, at most %d partitions in one: appends were not batched", requests, parts*batches, maxParts)
	}
	if dupInReq != "" {
		t.Fatalf("a ProduceRequest carried two batches of %s", dupInReq)
	}
	if len(versions) != 1 || versions[produceVersion] == 0 {
		t.Fatalf("Produce versions sent: %v, want only v%d", versions, produceVersion)
	}
	for part := range int32(parts) {
		recs := consume(t, c, "wide", part, false, batches-1)
		for i, r := range recs {
			if r.Offset != int64(i) || string(r.Value) != fmt.Sprint(i) {
				t.Fatalf("partition %d offset %d holds %q, want %d", part, r.Offset, r.Value, i)
			}
		}
	}
}

func TestRequestVersionsArePinnedToTransactionProtocolV1(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "123000"}))
	obs := observe(c, int16(kmsg.Produce), int16(kmsg.InitProducerID), int16(kmsg.AddPartitionsToTxn), int16(kmsg.EndTxn))
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	mustAppend(t, p, kvBatch(t, 1, -1, false, "b", "1"))
	mustAppend(t, p, markerBatch(t, 2, 4001, batch.ControlCommit))
	mustAppend(t, p, kvBatch(t, 3, 4001, true, "c", "1")) // same epoch across transactions (v1)
	mustAppend(t, p, markerBatch(t, 4, 4001, batch.ControlAbort))

	for _, r := range obs.requests(int16(kmsg.Produce)) {
		if r.GetVersion() != produceVersion {
			t.Errorf("Produce v%d, want v%d", r.GetVersion(), produceVersion)
		}
		if acks := r.(*kmsg.ProduceRequest).Acks; acks != -1 {
			t.Errorf("Produce acks %d, want -1", acks)
		}
	}
	var txnInits int
	for _, r := range obs.requests(int16(kmsg.InitProducerID)) {
		ir := r.(*kmsg.InitProducerIDRequest)
		if ir.TransactionalID == nil {
			continue
		}
		txnInits++
		if ir.Version > initProducerIDVersion {
			t.Errorf("InitProducerId v%d, want at most v%d", ir.Version, initProducerIDVersion)
		}
		if ir.TransactionTimeoutMillis != 123000 {
			t.Errorf("transaction timeout %d ms, want the brokers' transaction.max.timeout.ms 123000", ir.TransactionTimeoutMillis)
		}
	}
	if txnInits != 1 {
		t.Errorf("%d transactional InitProducerId, want 1 for two transactions of one producer", txnInits)
	}
	adds := obs.requests(int16(kmsg.AddPartitionsToTxn))
	ends := obs.requests(int16(kmsg.EndTxn))
	if len(adds) != 2 || len(ends) != 2 {
		t.Fatalf("%d AddPartitionsToTxn and %d EndTxn, want 2 each", len(adds), len(ends))
	}
	for _, r := range adds {
		if r.GetVersion() != addPartitionsToTxnVersion {
			t.Errorf("AddPartitionsToTxn v%d, want v%d", r.GetVersion(), addPartitionsToTxnVersion)
		}
	}
	for _, r := range ends {
		if r.GetVersion() != endTxnVersion {
			t.Errorf("EndTxn v%d, want v%d", r.GetVersion(), endTxnVersion)
		}
	}
}

func TestTransactionTimeoutOption(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	obs := observe(c, int16(kmsg.InitProducerID))
	p := openPartition(t, newWriter(t, c, TransactionTimeout(42*time.Second)), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	for _, r := range obs.requests(int16(kmsg.InitProducerID)) {
		if ir := r.(*kmsg.InitProducerIDRequest); ir.TransactionalID != nil && ir.TransactionTimeoutMillis != 42000 {
			t.Fatalf("transaction timeout %d ms, want 42000", ir.TransactionTimeoutMillis)
		}
	}
}

// produceAnswer answers a ProduceRequest with errCode for every partition.
func produceAnswer(req kmsg.Request, errCode int16) kmsg.Response {
	pr := req.(*kmsg.ProduceRequest)
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range pr.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = errCode
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func TestRetriableProduceErrorsAreRetried(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	for _, code := range []int16{kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code} {
		c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			return produceAnswer(req, code), nil, true
		})
	}
	obs := observe(c)
	p := openPartition(t, newWriter(t, c, RetryBackoff(time.Millisecond, 10*time.Millisecond)), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, -1, false, "a", "1"))
	mustAppend(t, p, kvBatch(t, 1, -1, false, "b", "1"))
	if n := obs.count(int16(kmsg.Produce)); n != 2 {
		// the observer runs after the two one-shot failures were handled
		t.Fatalf("observer saw %d ProduceRequests after the failures, want 2", n)
	}
	if hw := listOffset(t, kfaketest.NewClient(t, c), testTopic, 0, false); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
}

func TestNonRetriableProduceErrorNamesMirrorPartitionAndKafkaError(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return produceAnswer(req, kerr.TopicAuthorizationFailed.Code), nil, true
	})
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	_, err := p.Append(context.Background(), kvBatch(t, 0, -1, false, "a", "1"))
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Append: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	for _, want := range []string{`mirror "test"`, testTopic + "/0", "TOPIC_AUTHORIZATION_FAILED"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	// The next append (after the runner re-read the end offset) works and
	// uses a fresh idempotent producer: the failed one's sequence is unknown.
	mustAppend(t, p, kvBatch(t, 0, -1, false, "a", "1"))
}

// expiring is a context whose deadline passes when expired is closed.
type expiring struct {
	context.Context
	expired chan struct{}
}

func (e expiring) Done() <-chan struct{} { return e.expired }

func (e expiring) Err() error {
	select {
	case <-e.expired:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// An append abandoned while its request is in flight leaves its outcome
// unknown; the next append must not reuse the sequence.
func TestAppendAfterAnAbandonedRequestUsesAFreshSequence(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	release := make(chan struct{})
	// The Append's deadline passes once its request is at the broker (a
	// fixed timeout could pass before the request is sent, on a loaded
	// machine).
	ctx := expiring{Context: context.Background(), expired: make(chan struct{})}
	var expire sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		expire.Do(func() { close(ctx.expired) })
		c.SleepControl(func() { <-release }) // the broker appends only later
		return nil, nil, false
	})
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	_, err := p.Append(ctx, kvBatch(t, 0, -1, false, "a", "1"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append with an expiring context: %v", err)
	}
	close(release)
	cl := kfaketest.NewClient(t, c)
	kfaketest.WaitFor(t, "the abandoned append to land", func() (bool, string) {
		hw := listOffset(t, cl, testTopic, 0, false)
		return hw == 1, fmt.Sprintf("high watermark %d, want 1", hw)
	})
	// The runner re-reads the resume point (1) and goes on.
	mustAppend(t, p, kvBatch(t, 1, -1, false, "b", "1"))
	mustAppend(t, p, kvBatch(t, 2, -1, false, "c", "1"))
	if got, want := keysAt(consume(t, c, testTopic, 0, false, 2)), "0:a=1 1:b=1 2:c=1"; got != want {
		t.Fatalf("destination %q, want %q", got, want)
	}
}

func TestOnTxnWriterErrorStopsTheAppend(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	obs := observe(c)
	rec := &recorder{fail: errors.New("state store unavailable")}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	_, err := p.Append(context.Background(), kvBatch(t, 0, 4001, true, "a", "1"))
	if err == nil || !strings.Contains(err.Error(), "state store unavailable") {
		t.Fatalf("Append with a failing hook: %v", err)
	}
	if n := obs.count(int16(kmsg.AddPartitionsToTxn)) + obs.count(int16(kmsg.Produce)); n != 0 {
		t.Fatalf("%d AddPartitionsToTxn/Produce requests sent before the writer was recorded", n)
	}
	rec.mu.Lock()
	rec.fail = nil
	rec.mu.Unlock()
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	if rec.calls() != 1 {
		t.Fatalf("recorded %d writers", rec.calls())
	}
}

func TestIdleTransactionalWritersAreForgottenAndComeBack(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c, IdleWriterTimeout(50*time.Millisecond)), testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	mustAppend(t, p, markerBatch(t, 1, 4001, batch.ControlCommit))
	mustAppend(t, p, kvBatch(t, 2, 4002, true, "open", "1")) // stays open: never forgotten
	first := rec.recorded()[0]
	// Lets IdleWriterTimeout pass: the timeout is what is tested, and the
	// sweep runs on the next append, so there is no state to wait for.
	time.Sleep(120 * time.Millisecond)
	mustAppend(t, p, kvBatch(t, 3, -1, false, "b", "1"))
	ws := p.TxnWriters()
	if len(ws) != 1 || ws[0].SourceProducerID != 4002 {
		t.Fatalf("writers kept %+v, want only 4002's (open)", ws)
	}
	mustAppend(t, p, kvBatch(t, 4, 4001, true, "c", "1"))
	mustAppend(t, p, markerBatch(t, 5, 4001, batch.ControlCommit))
	again := rec.recorded()[0]
	if again.ProducerID != first.ProducerID || again.Epoch != first.Epoch+1 {
		t.Fatalf("writer came back as %+v, want %+v with the next epoch", again, first)
	}
	mustAppend(t, p, markerBatch(t, 6, 4002, batch.ControlCommit))
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 4)), "0:a=1 2:open=1 3:b=1 4:c=1"; got != want {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
}

func TestWriterAndPartitionLifecycle(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cl := kfaketest.NewClient(t, c)
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	for _, opt := range []Option{MirrorName(""), MirrorName("a b"), MaxInflightPerBroker(0), RequestTimeout(0),
		RetryBackoff(time.Second, time.Millisecond), Logger(nil), TransactionTimeout(-1), IdleWriterTimeout(0), MaxRequestBytes(0)} {
		if _, err := New(cl, opt); err == nil {
			t.Errorf("New accepted an invalid option")
		}
	}
	noAck := kfaketest.NewClient(t, c, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	if _, err := New(noAck); err == nil {
		t.Error("New accepted an acks=0 client")
	}

	w, err := New(cl)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Partition(testTopic, 0, (&recorder{}).hook)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Partition(testTopic, 0, (&recorder{}).hook); err == nil {
		t.Error("a second Partition for the same destination partition")
	}
	if _, err := w.Partition(testTopic, 1, nil); err == nil {
		t.Error("Partition without OnTxnWriter hook")
	}
	if got := p.TransactionalID(4001); got != "kmirror-default:"+testTopic+":0:4001" {
		t.Errorf("TransactionalID %q", got)
	}
	mustAppend(t, p, kvBatch(t, 0, -1, false, "a", "1"))
	p.Close()
	if _, err := p.Append(context.Background(), kvBatch(t, 1, -1, false, "b", "1")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append on a closed Partition: %v", err)
	}
	// Reopened, the partition continues the idempotent sequence.
	p2, err := w.Partition(testTopic, 0, (&recorder{}).hook)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p2, kvBatch(t, 1, -1, false, "b", "1"))
	w.Close()
	if _, err := p2.Append(context.Background(), kvBatch(t, 2, -1, false, "c", "1")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Writer.Close: %v", err)
	}
	if _, err := w.Partition(testTopic, 3, (&recorder{}).hook); !errors.Is(err, ErrClosed) {
		t.Errorf("Partition after Writer.Close: %v", err)
	}
}

// OpenTransactions, TxnWriters and EndOffset may be called while appends
// run (a describe endpoint does); run with -race.
func TestIntrospectionDuringAppends(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	p := openPartition(t, newWriter(t, c), testTopic, 0, &recorder{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var polls int
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, o := range p.OpenTransactions() {
				if o.Writer.ProducerID < 0 {
					t.Errorf("open transaction of an uninitialised writer: %+v", o)
				}
			}
			_ = p.TxnWriters()
			if _, err := p.EndOffset(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("EndOffset: %v", err)
			}
			polls++
		}
	})
	var off int64
	for i := range int64(20) {
		mustAppend(t, p, kvBatch(t, off, 4000+i%3, true, "k", "v"))
		mustAppend(t, p, markerBatch(t, off+1, 4000+i%3, batch.ControlCommit))
		off += 2
	}
	cancel()
	wg.Wait()
	if polls == 0 {
		t.Fatal("the introspection goroutine never ran")
	}
}

// TestProduceRequestsCarryTheirOneTransactionalID: a real broker checks every
// transactional batch of a ProduceRequest against the request's one
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), so
// concurrent transactional appends of several partitions must never share a
// request, and each request must name its id.
func TestProduceRequestsCarryTheirOneTransactionalID(t *testing.T) {
	t.Parallel()
	const parts = 4
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "txns"))
	var (
		mu      sync.Mutex
		bad     string
		txnReqs int
	)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		txnal := 0
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				if b, err := batch.Parse(rp.Records); err == nil && b.IsTransactional() {
					txnal++
				}
			}
		}
		switch {
		case txnal > 1:
			bad = fmt.Sprintf("a request carried %d transactional batches", txnal)
		case txnal == 1 && pr.TransactionID == nil:
			bad = "a request with a transactional batch has no transactional id"
		}
		if txnal > 0 {
			txnReqs++
		}
		time.Sleep(2 * time.Millisecond) // a slow broker, so appends queue up together: the condition under test, not a wait
		return nil, nil, false
	})
	w := newWriter(t, c, MaxInflightPerBroker(1))
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	for part := range int32(parts) {
		p := openPartition(t, w, "txns", part, &recorder{})
		wg.Go(func() {
			for i := range int64(10) {
				if _, err := p.Append(context.Background(), kvBatch(t, i, 7000+int64(part), true, "k", "v")); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Fatal(bad)
	}
	if txnReqs != parts*10 {
		t.Fatalf("%d requests carried transactional batches, want %d (one each)", txnReqs, parts*10)
	}
}
