package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// fixture is a source and a destination kfake cluster with clients.
type fixture struct {
	src, dst     *kfake.Cluster
	srcCl, dstCl *kgo.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	dst, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	f := &fixture{src: src, dst: dst}
	f.srcCl = f.client(t, src)
	f.dstCl = f.client(t, dst)
	return f
}

func (f *fixture) client(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (f *fixture) config(t *testing.T, include string, extra ...string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
mirror.metadata.refresh.interval.ms: 500
mirror.failed.retry.initial.backoff.ms: 100
mirror.failed.retry.max.backoff.ms: 500
destination:
  bootstrap.servers: %s
state:
  dir: /unused
mirrors:
  - name: test
    bootstrap.servers: %s
    mirror.topics.include: %q
%s`, strings.Join(f.dst.ListenAddrs(), ","), strings.Join(f.src.ListenAddrs(), ","), include, strings.Join(extra, "\n"))), "yaml", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startEngine(t *testing.T, cfg *config.Config, store statestore.Store) *Engine {
	t.Helper()
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	if testing.Verbose() {
		logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug})
	}
	e, err := New(Options{Store: store, Logger: logger, Metrics: mp})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopEngine(t, e) })
	return e
}

func stopEngine(t *testing.T, e *Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Errorf("stopping the engine: %v", err)
	}
}

func (f *fixture) createTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	if _, err := kadm.NewClient(f.srcCl).CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// produce writes n plain records and, every tenth, a transaction over the
// topic's partitions, aborting every third transaction.
func (f *fixture) produce(t *testing.T, topic string, n int, txid string) {
	t.Helper()
	ctx := context.Background()
	plain := f.client(t, f.src, kgo.DefaultProduceTopic(topic))
	txn := f.client(t, f.src, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txid))
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if i%7 == 0 {
			r.Value = nil
		}
		if err := plain.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 3; j++ {
				if err := txn.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "t%d-%d", i, j), Value: []byte("txn")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(i%30 != 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitMirrored waits until every partition of topic is MIRRORING and caught
// up with the source's end offset.
func (f *fixture) waitMirrored(t *testing.T, e *Engine, topic string, partitions int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := kadm.NewClient(f.srcCl).ListEndOffsets(context.Background(), topic)
		ok := err == nil
		var state []string
		for _, m := range e.Status().Mirrors {
			for _, p := range m.Partitions {
				if p.Topic != topic {
					continue
				}
				o, _ := ends.Lookup(topic, p.Partition)
				state = append(state, fmt.Sprintf("%d:%s %d/%d %s", p.Partition, p.State, p.LastMirroredOffset+1, o.Offset, p.LastError))
				if p.State != "MIRRORING" || p.LastMirroredOffset+1 != o.Offset {
					ok = false
				}
			}
		}
		if ok && len(state) == int(partitions) {
			return
		}
		if time.Now().After(deadline) {
			if testing.Verbose() {
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			}
			t.Fatalf("not mirrored within 30s: %v", state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) verify(t *testing.T, topic string, partitions int32) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		_, diff, err := verify.Partition(context.Background(), f.srcCl, f.dstCl, topic, p)
		if err != nil {
			t.Fatalf("verifying %s[%d]: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs: %s", topic, p, diff)
		}
	}
}

func TestEngineMirrorsPlainAndTransactionalTrafficWithOffsetsPreserved(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "orders", 3)
	f.produce(t, "orders", 200, "tx-a")
	e := startEngine(t, f.config(t, "orders"), memstore.New())
	f.waitMirrored(t, e, "orders", 3)
	f.produce(t, "orders", 100, "tx-b") // while running
	f.waitMirrored(t, e, "orders", 3)
	f.verify(t, "orders", 3)
	for _, p := range e.Status().Mirrors[0].Partitions {
		if p.Mode != "preserve" || p.Lag != 0 {
			t.Fatalf("partition %d: mode %q lag %d", p.Partition, p.Mode, p.Lag)
		}
	}
}

// The writer's ProduceRequests show on /metrics: their count, bytes,
// latency, and none left in flight once everything is mirrored.
func TestEngineRecordsProduceRequestMetrics(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "orders", 2)
	f.produce(t, "orders", 100, "tx-a")
	e := startEngine(t, f.config(t, "orders"), memstore.New())
	f.waitMirrored(t, e, "orders", 2)
	mp := e.opts.Metrics
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok, err := mp.Value(name, labels)
		if err != nil || !ok {
			t.Fatalf("%s%v: found %v, err %v", name, labels, ok, err)
		}
		return v
	}
	mirror := map[string]string{"mirror": "test"}
	requests := value("kmirror_produce_requests_total", map[string]string{"mirror": "test", "result": "ok"})
	if requests < 1 {
		t.Errorf("kmirror_produce_requests_total{result=ok} = %v, want at least 1", requests)
	}
	// Markers are replayed with EndTxn, not produced, and retries count
	// again: the bytes produced are not the bytes mirrored.
	if sent := value("kmirror_produce_bytes_total", mirror); sent <= 0 {
		t.Errorf("kmirror_produce_bytes_total = %v, want positive", sent)
	}
	if v := value("kmirror_produce_requests_in_flight", mirror); v != 0 {
		t.Errorf("kmirror_produce_requests_in_flight = %v once mirrored, want 0", v)
	}
	fams, err := mp.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var latencies uint64
	for _, fam := range fams {
		if fam.GetName() == "kmirror_produce_request_latency_seconds" {
			for _, m := range fam.GetMetric() {
				latencies += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if latencies < uint64(requests) {
		t.Errorf("kmirror_produce_request_latency_seconds holds %d samples, want one per answered request (at least %v)", latencies, requests)
	}
}

func TestEngineResumesFromTheDestinationAfterARestart(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "events", 2)
	store := memstore.New()
	cfg := f.config(t, "events")
	e := startEngine(t, cfg, store)
	f.produce(t, "events", 100, "tx-1")
	f.waitMirrored(t, e, "events", 2)
	stopEngine(t, e)
	f.produce(t, "events", 100, "tx-2") // while the mirror is down
	e2 := startEngine(t, cfg, store)
	f.waitMirrored(t, e2, "events", 2)
	f.verify(t, "events", 2)
}

func TestEngineFailsAPartitionWhoseDestinationHoldsForeignData(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "taken", 1)
	f.produce(t, "taken", 3, "tx-f")
	if _, err := kadm.NewClient(f.dstCl).CreateTopic(context.Background(), 1, 1, nil, "taken"); err != nil {
		t.Fatal(err)
	}
	if err := f.client(t, f.dst, kgo.DefaultProduceTopic("taken")).ProduceSync(context.Background(), &kgo.Record{Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, f.config(t, "taken"), memstore.New())
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := e.Status()
		if len(st.Mirrors) == 1 && len(st.Mirrors[0].Partitions) == 1 && st.Mirrors[0].Partitions[0].State == "FAILED" {
			p := st.Mirrors[0].Partitions[0]
			if !strings.Contains(p.LastError, "topic taken partition 0") || !strings.Contains(p.LastError, "did not write") || p.Retry != "NonRetryable" {
				t.Fatalf("failure = %q (retry %q)", p.LastError, p.Retry)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition did not fail: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEngineAlignsASourceLogThatStartsInsideABatch(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "trimmed", 1)
	cl := f.client(t, f.src, kgo.DefaultProduceTopic("trimmed"), kgo.ProducerLinger(50*time.Millisecond))
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d-%d", i, j)})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: 275})
	if _, err := kadm.NewClient(f.srcCl).DeleteRecords(context.Background(), os); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, f.config(t, "trimmed"), memstore.New())
	f.waitMirrored(t, e, "trimmed", 1)
	f.verify(t, "trimmed", 1) // compares log starts and every offset
	if p := e.Status().Mirrors[0].Partitions[0]; p.Mode != "preserve" {
		t.Fatalf("mode %q, want preserve (aligned with filler)", p.Mode)
	}
}

// waitState waits until topic/partition reaches state.
func waitState(t *testing.T, e *Engine, topic string, p int32, state string) admin.PartitionStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last admin.PartitionStatus
	for time.Now().Before(deadline) {
		for _, m := range e.Status().Mirrors {
			for _, ps := range m.Partitions {
				if ps.Topic == topic && ps.Partition == p {
					last = ps
					if ps.State == state {
						return ps
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s[%d] did not reach %s; last %+v", topic, p, state, last)
	return last
}

// TestStopAbortsTheOpenDestinationTransaction: a partition whose topic leaves
// the mirror's scope while a source transaction is open goes through
// STOPPING to STOPPED; its destination transaction is aborted, so the last
// stable offset equals the high watermark (read_committed consumers are not
// blocked), and the last mirrored offset is recorded.
func TestStopAbortsTheOpenDestinationTransaction(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "pending", 1)
	ctx := context.Background()
	plain := f.client(t, f.src, kgo.DefaultProduceTopic("pending"))
	txn := f.client(t, f.src, kgo.DefaultProduceTopic("pending"), kgo.TransactionalID("open-txn"))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	e := startEngine(t, f.config(t, "pending"), store)
	f.waitMirrored(t, e, "pending", 1)
	if lso := listOffset(t, f.dstCl, "pending", true); lso != 1 {
		t.Fatalf("destination last stable offset %d before the stop, want 1 (the open transaction starts at 1)", lso)
	}
	if err := e.Reload(ctx, f.config(t, "pending", "    mirror.topics.exclude: \"pend.*\"")); err != nil {
		t.Fatal(err)
	}
	ps := waitState(t, e, "pending", 0, "STOPPED")
	hw, lso := listOffset(t, f.dstCl, "pending", false), listOffset(t, f.dstCl, "pending", true)
	if hw != lso || hw != 3 {
		t.Fatalf("after STOPPED: high watermark %d, last stable offset %d; want both 3 (the abort marker at 2)", hw, lso)
	}
	if ps.LastMirroredOffset != 1 {
		t.Fatalf("last mirrored offset %d, want 1", ps.LastMirroredOffset)
	}
	_ = txn.EndTransaction(ctx, kgo.TryAbort)
}

// listOffset returns the latest offset of partition 0: the last stable
// offset with committed, else the high watermark.
func listOffset(t *testing.T, cl *kgo.Client, topic string, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestEngineSyncsConsumerGroupOffsets: a group that consumed part of a
// mirrored topic on the source and committed resumes on the destination at
// exactly the next record.
func TestEngineSyncsConsumerGroupOffsets(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "clicks", 1)
	f.produce(t, "clicks", 50, "tx-g")
	ctx := context.Background()
	// Consume 20 records with group app-1 on the source and commit.
	src := f.client(t, f.src, kgo.ConsumerGroup("app-1"), kgo.ConsumeTopics("clicks"), kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxPartitionBytes(1))
	var read []*kgo.Record
	for len(read) < 20 {
		fs := src.PollRecords(ctx, 20-len(read))
		read = append(read, fs.Records()...)
	}
	if err := src.CommitRecords(ctx, read...); err != nil {
		t.Fatal(err)
	}
	src.Close()
	want := read[len(read)-1].Offset + 1
	e := startEngine(t, f.config(t, "clicks"), memstore.New())
	f.waitMirrored(t, e, "clicks", 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		offs, err := kadm.NewClient(f.dstCl).FetchOffsets(ctx, "app-1")
		if err == nil {
			if o, ok := offs.Lookup("clicks", 0); ok && o.At == want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("destination group app-1 never got offset %d: %v %v", want, offs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dst := f.client(t, f.dst, kgo.ConsumerGroup("app-1"), kgo.ConsumeTopics("clicks"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	fs := dst.PollRecords(ctx, 1)
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != want {
		t.Fatalf("destination consumer started at %v, want offset %d", recs, want)
	}
	if gs := e.Status().Mirrors[0].Groups; len(gs) == 0 || gs[0].Group != "app-1" {
		t.Fatalf("describe shows groups %+v", gs)
	}
}

// readOnlyACLs returns the topics that carry kmirror's read-only ACL on cl.
func readOnlyACLs(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	res, err := kadm.NewClient(cl).DescribeACLs(context.Background(), kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, d := range r.Described {
			topics = append(topics, d.Name)
		}
	}
	return topics
}

// TestMirrorTopicsAreReadOnlyWhileMirroring: a DENY WRITE ACL for User:*
// protects a mirror topic while it is mirrored and is removed once its
// partitions are STOPPED.
func TestMirrorTopicsAreReadOnlyWhileMirroring(t *testing.T) {
	f := newFixture(t)
	f.createTopic(t, "guarded", 2)
	f.produce(t, "guarded", 20, "tx-ro")
	e := startEngine(t, f.config(t, "guarded"), memstore.New())
	f.waitMirrored(t, e, "guarded", 2)
	deadline := time.Now().Add(20 * time.Second)
	for fmt.Sprint(readOnlyACLs(t, f.dstCl)) != "[guarded]" {
		if time.Now().After(deadline) {
			t.Fatalf("read-only ACLs on the destination: %v, want [guarded]", readOnlyACLs(t, f.dstCl))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.Reload(context.Background(), f.config(t, "guarded", "    mirror.topics.exclude: guarded")); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "guarded", 0, "STOPPED")
	waitState(t, e, "guarded", 1, "STOPPED")
	for len(readOnlyACLs(t, f.dstCl)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("read-only ACLs left after STOPPED: %v", readOnlyACLs(t, f.dstCl))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
