package destfaults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/plugins/statestore/file"
)

// testContext returns a context that ends with the test or after d.
func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

var unsafeTopicChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// topicName returns a topic name unique to this test and run.
func topicName(t testing.TB) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return strings.ToLower(unsafeTopicChars.ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), "-")) + "-" + hex.EncodeToString(r[:])
}

// newClient returns a client of c's PLAINTEXT listener, closed when the
// test ends.
func newClient(t testing.TB, c *kafkatest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(kafkatest.Identity{}, opts...)
	if err != nil {
		t.Fatalf("client of cluster %s: %v", c.Name(), err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// adminOf returns an admin client of c as the harness's super user.
func adminOf(t testing.TB, c *kafkatest.Cluster) *kadm.Client {
	t.Helper()
	adm, err := c.Admin()
	if err != nil {
		t.Fatalf("admin client of cluster %s: %v", c.Name(), err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// createTopic creates a topic on c with the cluster's default replication
// factor.
func createTopic(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, partitions int32) {
	t.Helper()
	resp, err := adminOf(t, c).CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s on %s: %v", topic, c.Name(), err)
	}
}

// endOffsets returns the end offset of each partition of topic on c.
func endOffsets(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, partitions int32) []int64 {
	t.Helper()
	ends, err := adminOf(t, c).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, partitions)
	for p := range partitions {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %s[%d] on %s: %v", topic, p, c.Name(), o.Err)
		}
		out[p] = o.Offset
	}
	return out
}

// ones is n partitions' progress target of one record each.
func ones(n int32) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// traffic is two transactional producers (a third of their transactions
// aborted, each spanning several partitions) and a plain producer writing
// to a source topic until stop.
type traffic struct {
	t        testing.TB
	halt     chan struct{}
	wg       sync.WaitGroup
	errs     chan error
	txns     atomic.Int64
	records  atomic.Int64
	stopOnce sync.Once
}

// startTraffic starts writing to topic; the test's cleanup stops it.
func startTraffic(t testing.TB, ctx context.Context, topic string, partitions int32) *traffic {
	t.Helper()
	tr := &traffic{t: t, halt: make(chan struct{}), errs: make(chan error, 3)}
	fail := func(err error) {
		select {
		case tr.errs <- err:
		default:
		}
	}
	for i := range 2 {
		cl := newClient(t, source, kgo.TransactionalID(fmt.Sprintf("%s-tx%d", topic, i)),
			kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		tr.wg.Go(func() { // owned by tr: stop waits for it
			r := mrand.New(mrand.NewPCG(uint64(i), 17))
			// ~7 transactions/s each: what kmirror replays on a loaded
			// two-core machine with room to spare (each destination
			// transaction waits for its markers on three replicas).
			tick := time.NewTicker(150 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-tr.halt:
					return
				case <-tick.C:
				}
				if err := cl.BeginTransaction(); err != nil {
					fail(err)
					return
				}
				var recs []*kgo.Record
				for k := range 2 + r.IntN(4) {
					recs = append(recs, &kgo.Record{Partition: r.Int32N(partitions), Key: fmt.Appendf(nil, "tx%d-%d-%d", i, n, k),
						Value: fmt.Appendf(nil, "txn %d/%d/%d", i, n, k), Headers: []kgo.RecordHeader{{Key: "txn", Value: fmt.Appendf(nil, "%d", n)}}})
				}
				err := cl.ProduceSync(ctx, recs...).FirstErr()
				if err == nil {
					err = cl.EndTransaction(ctx, kgo.TransactionEndTry(r.IntN(3) != 0))
				}
				if err != nil {
					fail(fmt.Errorf("transaction %d of producer %d: %w", n, i, err))
					return
				}
				tr.txns.Add(1)
				tr.records.Add(int64(len(recs)))
			}
		})
	}
	plain := newClient(t, source, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	tr.wg.Go(func() { // owned by tr: stop waits for it
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-tr.halt:
				return
			case <-tick.C:
			}
			rec := &kgo.Record{Key: fmt.Appendf(nil, "plain-%d", n), Value: fmt.Appendf(nil, "plain %d", n),
				Timestamp: time.Now().Add(-time.Minute).Truncate(time.Millisecond)}
			if err := plain.ProduceSync(ctx, rec).FirstErr(); err != nil {
				fail(fmt.Errorf("plain record %d: %w", n, err))
				return
			}
			tr.records.Add(1)
		}
	})
	t.Cleanup(tr.stop)
	return tr
}

// stop ends the traffic after each producer's current transaction and fails
// the test if a producer failed.
func (tr *traffic) stop() {
	tr.stopOnce.Do(func() {
		close(tr.halt)
		tr.wg.Wait()
		close(tr.errs)
		for err := range tr.errs {
			tr.t.Errorf("producing to the source: %v", err)
		}
		tr.t.Logf("traffic: %d transactions, %d records", tr.txns.Load(), tr.records.Load())
	})
}

// waitOpenTransaction waits until the destination has an ongoing
// transaction (one kmirror replays: no other test writes transactions there
// meanwhile).
func waitOpenTransaction(t testing.TB, ctx context.Context) {
	t.Helper()
	adm := adminOf(t, destination)
	for {
		txns, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
		if err == nil && len(txns) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no ongoing transaction on the destination (last error %v)", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// verifyCopy compares every partition of topic on both clusters offset by
// offset (records, markers, transactional visibility), and reads both with
// read_committed and read_uncommitted consumers, which must see the same
// records. A partition in map mode because the destination wrote a
// transaction marker twice (its coordinator failed over while writing it:
// docs/design/datapath.md, "A marker the destination writes twice") is
// compared through its offset map, read from the stopped daemon's state,
// when remap allows it (a scenario that moves a coordinator); otherwise it
// fails the test.
// It returns the counts of records (aborted ones included), aborted
// records and markers compared.
func verifyCopy(t testing.TB, ctx context.Context, d *daemon, topic string, partitions int32, remap bool) (records, aborted, markers int) {
	t.Helper()
	var remapped []int32
	for p := range partitions {
		ps, _ := d.partitionStatus(topic, p)
		if ps.Mode != "map" {
			continue
		}
		if !remap {
			t.Fatalf("%s[%d] runs in map mode (%s); this scenario must keep offsets identical", topic, p, strings.Join(ps.Notes, "; "))
		}
		if notes := strings.Join(ps.Notes, "; "); !strings.Contains(notes, "wrote the transaction marker") {
			t.Fatalf("%s[%d] runs in map mode for another reason than a marker written twice: %q", topic, p, notes)
		}
		t.Logf("%s[%d]: the destination wrote a transaction marker twice; comparing through the offset map (%s)", topic, p, strings.Join(ps.Notes, "; "))
		remapped = append(remapped, p)
	}
	d.stop() // the file store is locked while the daemon runs
	src, dst := newClient(t, source), newClient(t, destination)
	for p := range partitions {
		sl, err := verify.ReadLog(ctx, src, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		dl, err := verify.ReadLog(ctx, dst, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		diff := verify.Diff(sl, dl)
		if slices.Contains(remapped, p) {
			diff = verify.DiffMapped(sl, dl, storedPartitionMap(t, ctx, d, topic, p).Lookup)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs between source and destination: %s", topic, p, diff)
		}
		for _, e := range sl.Entries {
			switch {
			case e.Control:
				markers++
			case !e.Visible:
				aborted++
				records++
			default:
				records++
			}
		}
	}
	for _, committed := range []bool{false, true} {
		want := records - aborted
		if !committed {
			want = records
		}
		sc, dc := consumeExactly(t, ctx, source, topic, committed, want), consumeExactly(t, ctx, destination, topic, committed, want)
		if i := firstDifference(sc, dc); i < len(sc) {
			t.Fatalf("consumed with read_committed=%v: record %d is %q on the source, %q on the destination", committed, i, sc[i], dc[i])
		}
		t.Logf("read_committed=%v: the same %d records consumed from both clusters", committed, want)
	}
	return records, aborted, markers
}

// storedPartitionMap reads the offset map of topic/partition from the
// stopped daemon's file state store.
func storedPartitionMap(t testing.TB, ctx context.Context, d *daemon, topic string, partition int32) *offsetmap.Map {
	t.Helper()
	store, err := file.Open(d.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := offsetmap.Load(ctx, store, d.mirror, topic, partition)
	if err != nil {
		t.Fatalf("reading the offset map of %s[%d]: %v", topic, partition, err)
	}
	return m
}

// consumeExactly reads topic on c from the start as a consumer does
// (read_committed or read_uncommitted) until want records arrived, then
// polls one more second to make sure no other record comes. It returns
// "partition/offset-free key/value" per record, by partition, in log order.
func consumeExactly(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, committed bool, want int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := newClient(t, c, opts...)
	var recs []*kgo.Record
	for len(recs) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s on %s (read_committed=%v): %d of %d records: %v", topic, c.Name(), committed, len(recs), want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	if len(recs) != want {
		t.Fatalf("consuming %s on %s (read_committed=%v): %d records, want %d", topic, c.Name(), committed, len(recs), want)
	}
	slices.SortStableFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d/%s/%s", r.Partition, r.Key, r.Value)
	}
	return out
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
