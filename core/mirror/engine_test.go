package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func TestEngineMirrorsPlainAndTransactionalTrafficWithOffsetsPreserved(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "taken", 1)
	f.produce(t, "taken", 3, "tx-f")
	if _, err := kadm.NewClient(f.dstCl).CreateTopic(context.Background(), 1, 1, nil, "taken"); err != nil {
		t.Fatal(err)
	}
	if err := kfaketest.NewClient(t, f.dst, kgo.DefaultProduceTopic("taken")).ProduceSync(context.Background(), &kgo.Record{Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, f.config(t, "taken"), memstore.New())
	p := waitState(t, e, "taken", 0, "FAILED")
	if !strings.Contains(p.LastError, "topic taken partition 0") || !strings.Contains(p.LastError, "did not write") || p.Retry != "NonRetryable" {
		t.Fatalf("failure = %q (retry %q)", p.LastError, p.Retry)
	}
}

func TestEngineAlignsASourceLogThatStartsInsideABatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimmedTopic(t, "trimmed", nil, 275)
	e := startEngine(t, f.config(t, "trimmed"), memstore.New())
	f.waitMirrored(t, e, "trimmed", 1)
	f.verify(t, "trimmed", 1) // compares log starts and every offset
	if p := e.Status().Mirrors[0].Partitions[0]; p.Mode != "preserve" {
		t.Fatalf("mode %q, want preserve (aligned with filler)", p.Mode)
	}
}

// TestStopAbortsTheOpenDestinationTransaction: a partition whose topic leaves
// the mirror's scope while a source transaction is open goes through
// STOPPING to STOPPED; its destination transaction is aborted, so the last
// stable offset equals the high watermark (read_committed consumers are not
// blocked), and the last mirrored offset is recorded.
func TestStopAbortsTheOpenDestinationTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "pending", 1)
	ctx := context.Background()
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("pending"))
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("pending"), kgo.TransactionalID("open-txn"))
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

// TestEngineSyncsConsumerGroupOffsets: a group that consumed part of a
// mirrored topic on the source and committed resumes on the destination at
// exactly the next record.
func TestEngineSyncsConsumerGroupOffsets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "clicks", 1)
	f.produce(t, "clicks", 50, "tx-g")
	ctx := context.Background()
	// Consume 20 records with group app-1 on the source and commit.
	src := kfaketest.NewClient(t, f.src, kgo.ConsumerGroup("app-1"), kgo.ConsumeTopics("clicks"), kgo.DisableAutoCommit(),
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
	kfaketest.WaitFor(t, fmt.Sprintf("destination group app-1 at offset %d", want), func() (bool, string) {
		offs, err := kadm.NewClient(f.dstCl).FetchOffsets(ctx, "app-1")
		if err != nil {
			return false, err.Error()
		}
		o, ok := offs.Lookup("clicks", 0)
		return ok && o.At == want, fmt.Sprintf("%+v", offs)
	})
	dst := kfaketest.NewClient(t, f.dst, kgo.ConsumerGroup("app-1"), kgo.ConsumeTopics("clicks"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
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
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "guarded", 2)
	f.produce(t, "guarded", 20, "tx-ro")
	e := startEngine(t, f.config(t, "guarded"), memstore.New())
	f.waitMirrored(t, e, "guarded", 2)
	kfaketest.WaitFor(t, "the read-only ACL of guarded on the destination", func() (bool, string) {
		got := fmt.Sprint(readOnlyACLs(t, f.dstCl))
		return got == "[guarded]", "read-only ACLs on the destination: " + got
	})
	if err := e.Reload(context.Background(), f.config(t, "guarded", "    mirror.topics.exclude: guarded")); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "guarded", 0, "STOPPED")
	waitState(t, e, "guarded", 1, "STOPPED")
	kfaketest.WaitFor(t, "no read-only ACL left after STOPPED", func() (bool, string) {
		acls := readOnlyACLs(t, f.dstCl)
		return len(acls) == 0, fmt.Sprintf("read-only ACLs left: %v", acls)
	})
}
