package fetcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher/internal/session"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// Many partitions over three brokers, fetched by one Manager: every batch
// arrives once, in order, byte-identical to the source, and each broker gets
// one request for all of its partitions rather than one per partition.
func TestManyPartitionsOverBrokersDeliveredOnceInOrder(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	topics := []string{"alpha", "beta"}
	c := kfaketest.NewCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(8, topics...))
	prod := newProducer(t, c)
	var keys []tp
	for _, topic := range topics {
		for p := range int32(8) {
			keys = append(keys, tp{topic, p})
		}
	}
	for range 3 {
		for _, k := range keys {
			produce(t, ctx, prod, k.topic, k.partition, 3, 40)
		}
	}

	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, topics...)
	m := newManager(t, src)
	col := newCollector(t, m)
	for _, k := range keys {
		col.add(PartitionSpec{Topic: k.topic, Partition: k.partition, LeaderEpoch: -1}, true)
	}
	runManager(t, m)

	// More data while fetching.
	for range 3 {
		for _, k := range keys {
			produce(t, ctx, prod, k.topic, k.partition, 2, 40)
		}
	}
	const end = 3*3 + 3*2
	for _, k := range keys {
		col.waitDelivered(fmt.Sprintf("%s delivered to %d", k, end), k, end)
	}
	for _, k := range keys {
		bs := col.batches(k)
		checkContiguous(t, k, bs, 0, end)
		checkSameAsSource(t, ctx, src, c, k, bs)
		if errs := col.errs(k); len(errs) > 0 {
			t.Errorf("%s: errors delivered: %v", k, errs)
		}
		st, ok := m.Status(k.topic, k.partition)
		if !ok || st.State != StateFetching || st.HighWatermark != end || st.Lag() != 0 || st.FetchOffset != end {
			t.Errorf("%s: status %+v, want fetching at %d with lag 0", k, st, end)
		}
	}

	// One session per broker, and its first (full) request carries every
	// partition that broker leads.
	leaders := make(map[int32][]tp)
	for _, k := range keys {
		l := c.LeaderFor(k.topic, k.partition)
		leaders[l] = append(leaders[l], k)
	}
	reqs := log.all()
	perBroker := make(map[int32][]seenFetch)
	for _, r := range reqs {
		perBroker[r.node] = append(perBroker[r.node], r)
	}
	if len(perBroker) != len(leaders) {
		t.Fatalf("fetched from %d brokers, partitions are led by %d", len(perBroker), len(leaders))
	}
	for node, rs := range perBroker {
		first := rs[0]
		if first.epoch != 0 || first.sessionID != 0 {
			t.Errorf("broker %d: first request has session %d epoch %d, want a full fetch (0, 0)", node, first.sessionID, first.epoch)
		}
		var got []tp
		for _, p := range first.parts {
			got = append(got, p.key)
		}
		if !sameSet(got, leaders[node]) {
			t.Errorf("broker %d: first request carries %v, want all partitions it leads %v", node, got, leaders[node])
		}
		full := 0
		for _, r := range rs {
			if r.epoch == 0 {
				full++
			}
		}
		if full != 1 {
			t.Errorf("broker %d: %d full fetches, want 1 (sessions never reset)", node, full)
		}
		t.Logf("broker %d: %d partitions, %d fetch requests", node, len(leaders[node]), len(rs))
	}
}

func sameSet(a, b []tp) bool {
	less := func(x, y tp) int {
		if x.topic != y.topic {
			if x.topic < y.topic {
				return -1
			}
			return 1
		}
		return int(x.partition - y.partition)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, less)
	slices.SortFunc(b, less)
	return slices.Equal(a, b)
}

// After the first full fetch, requests use the broker's session: a non-zero
// session id and only the partitions whose fetch position changed; a
// removed partition is sent as forgotten.
func TestIncrementalSessionSendsOnlyChangedPartitions(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(8, "inc"))
	prod := newProducer(t, c)
	for p := range int32(8) {
		produce(t, ctx, prod, "inc", p, 1, 10)
	}
	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, "inc")
	m := newManager(t, src)
	col := newCollector(t, m)
	for p := range int32(8) {
		col.add(PartitionSpec{Topic: "inc", Partition: p, LeaderEpoch: -1}, true)
	}
	runManager(t, m)
	for p := range int32(8) {
		col.waitDelivered("initial data", tp{"inc", p}, 1)
	}
	// Let the session settle: the request after the data carries the 8
	// new offsets; the ones after it carry nothing.
	kfaketest.WaitFor(t, "an empty incremental request", func() (bool, string) {
		rs := log.all()
		return len(rs) > 0 && rs[len(rs)-1].epoch > 0 && len(rs[len(rs)-1].parts) == 0, log.summary(0)
	})
	mark := log.len()

	k3 := tp{"inc", 3}
	produce(t, ctx, prod, "inc", 3, 2, 10) // one batch at offsets 1 and 2
	col.waitDelivered("partition 3 delivered", k3, 3)
	kfaketest.WaitFor(t, "partition 3's new offset sent", func() (bool, string) {
		for _, r := range log.all()[mark:] {
			if p, ok := r.has(k3); ok && p.offset == 3 {
				return true, ""
			}
		}
		return false, log.summary(mark)
	})
	rs := log.all()
	first := rs[0]
	if first.epoch != 0 || len(first.parts) != 8 {
		t.Fatalf("first request: epoch %d with %d partitions, want a full fetch of 8", first.epoch, len(first.parts))
	}
	if first.version < 13 {
		t.Errorf("fetch version %d, want topic ids (v13+) against a broker that supports them", first.version)
	}
	sessionID := rs[1].sessionID
	if sessionID == 0 {
		t.Fatalf("second request has session id 0: no session used")
	}
	for i, r := range rs[mark:] {
		if r.sessionID != sessionID || r.epoch <= 0 {
			t.Errorf("request %d: session %d epoch %d, want session %d with a positive epoch", mark+i, r.sessionID, r.epoch, sessionID)
		}
		for _, p := range r.parts {
			if p.key != k3 {
				t.Errorf("request %d carries unchanged partition %s", mark+i, p.key)
			}
		}
	}

	// Removing a partition forgets it in the session.
	mark = log.len()
	if !m.Remove("inc", 5) {
		t.Fatalf("Remove(inc, 5) reported the partition unknown")
	}
	kfaketest.WaitFor(t, "partition 5 forgotten", func() (bool, string) {
		for _, r := range log.all()[mark:] {
			if r.forgets(tp{"inc", 5}) {
				return r.sessionID == sessionID, fmt.Sprintf("forgotten in session %d, want %d", r.sessionID, sessionID)
			}
		}
		return false, log.summary(mark)
	})
	if _, ok := m.Status("inc", 5); ok {
		t.Errorf("removed partition still has a status")
	}
}

// A partition whose leader moves keeps being fetched from the new leader,
// with no gap and no duplicate, and with the new leader epoch.
func TestLeaderMoveContinuesWithoutGapOrDuplicate(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "mv"))
	prod := newProducer(t, c)
	k := tp{"mv", 0}
	for range 5 {
		produce(t, ctx, prod, k.topic, k.partition, 2, 20)
	}
	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, "mv")
	m := newManager(t, src)
	col := newCollector(t, m)
	col.add(PartitionSpec{Topic: "mv", Partition: 0, LeaderEpoch: -1}, true)
	col.add(PartitionSpec{Topic: "mv", Partition: 1, LeaderEpoch: -1}, true)
	runManager(t, m)
	col.waitDelivered("first 10 records", k, 10)

	oldLeader := c.LeaderFor(k.topic, k.partition)
	newLeader := (oldLeader + 1) % 3
	if err := c.MoveTopicPartition(k.topic, k.partition, newLeader); err != nil {
		t.Fatalf("moving %s: %v", k, err)
	}
	for range 5 {
		produce(t, ctx, prod, k.topic, k.partition, 2, 20)
	}
	col.waitDelivered("all 20 records", k, 20)
	bs := col.batches(k)
	checkContiguous(t, k, bs, 0, 20)
	checkSameAsSource(t, ctx, src, c, k, bs)

	st, _ := m.Status(k.topic, k.partition)
	if st.Leader != newLeader || st.State != StateFetching {
		t.Errorf("status %+v, want fetching from broker %d", st, newLeader)
	}
	var sawNew bool
	for _, r := range log.all() {
		if p, ok := r.has(k); ok && r.node == newLeader {
			sawNew = true
			if p.currentEpoch != 1 {
				t.Errorf("request to the new leader carries CurrentLeaderEpoch %d, want 1", p.currentEpoch)
			}
		}
	}
	if !sawNew {
		t.Errorf("no fetch of %s reached the new leader %d", k, newLeader)
	}
	if errs := col.errs(k); len(errs) > 0 {
		t.Errorf("errors delivered for a leader move: %v", errs)
	}
}

// A fetch that dies with the connection moves the session's partitions
// through fresh metadata back to fetching, with no gap and no duplicate.
func TestConnectionLossResumesWithoutGap(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "cut"))
	prod := newProducer(t, c)
	src := kfaketest.NewClient(t, c)
	m := newManager(t, src)
	col := newCollector(t, m)
	for p := range int32(2) {
		col.add(PartitionSpec{Topic: "cut", Partition: p, LeaderEpoch: -1}, true)
	}
	runManager(t, m)
	for p := range int32(2) {
		produce(t, ctx, prod, "cut", p, 1, 10)
	}
	col.waitDelivered("first records of partition 0", tp{"cut", 0}, 1)
	col.waitDelivered("first records of partition 1", tp{"cut", 1}, 1)

	var cut atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if kr.(*kmsg.FetchRequest).MaxWaitMillis != int32(testMaxWait.Milliseconds()) || cut.Add(1) > 2 {
			return nil, nil, false
		}
		c.KeepControl()
		return nil, errors.New("test: drop the connection"), true
	})
	for p := range int32(2) {
		produce(t, ctx, prod, "cut", p, 1, 10)
		produce(t, ctx, prod, "cut", p, 1, 10)
	}
	for p := range int32(2) {
		k := tp{"cut", p}
		col.waitDelivered(fmt.Sprintf("%s after the connection loss", k), k, 3)
		checkContiguous(t, k, col.batches(k), 0, 3)
		if errs := col.errs(k); len(errs) > 0 {
			t.Errorf("%s: errors delivered for a connection loss: %v", k, errs)
		}
	}
	if cut.Load() < 2 {
		t.Fatalf("the connection was cut %d times, want at least 2", cut.Load())
	}
}

// Out of range, below the log start (DeleteRecords) or beyond the end,
// fails only that partition, with the source's bounds; the others go on.
func TestOffsetOutOfRangeIsDeliveredAndOthersContinue(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "oor"))
	prod := newProducer(t, c)
	for p := range int32(3) {
		for range 5 {
			produce(t, ctx, prod, "oor", p, 1, 10)
		}
	}
	src := kfaketest.NewClient(t, c)
	adm := kadm.NewClient(src)
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "oor", Partition: 1, At: 3})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}

	m := newManager(t, src)
	col := newCollector(t, m)
	col.add(PartitionSpec{Topic: "oor", Partition: 0, LeaderEpoch: -1}, true)
	col.add(PartitionSpec{Topic: "oor", Partition: 1, FetchOffset: 0, LeaderEpoch: -1}, true)
	col.add(PartitionSpec{Topic: "oor", Partition: 2, FetchOffset: 100, LeaderEpoch: -1}, true)
	runManager(t, m)

	for _, tc := range []struct {
		p            int32
		start, end   int64
		belowOrAbove string
	}{{1, 3, 5, "below the log start"}, {2, 0, 5, "beyond the log end"}} {
		k := tp{"oor", tc.p}
		col.waitError(fmt.Sprintf("%s: out of range error", k), k)
		errs := col.errs(k)
		var oe *OffsetOutOfRangeError
		if len(errs) != 1 || !errors.Is(errs[0], ErrOffsetOutOfRange) || !errors.As(errs[0], &oe) {
			t.Fatalf("%s (%s): errors %v, want one *OffsetOutOfRangeError", k, tc.belowOrAbove, errs)
		}
		if oe.LogStartOffset != tc.start || oe.LogEndOffset != tc.end {
			t.Errorf("%s: log start %d end %d, want %d and %d", k, oe.LogStartOffset, oe.LogEndOffset, tc.start, tc.end)
		}
		if st, _ := m.Status(k.topic, k.partition); st.State != StateFailed || !errors.Is(st.Err, ErrOffsetOutOfRange) {
			t.Errorf("%s: status %+v, want failed with the error", k, st)
		}
		if len(col.batches(k)) != 0 {
			t.Errorf("%s: batches delivered for an out of range offset", k)
		}
	}

	k0 := tp{"oor", 0}
	produce(t, ctx, prod, "oor", 0, 1, 10)
	col.waitDelivered("partition 0 keeps going", k0, 6)
	checkContiguous(t, k0, col.batches(k0), 0, 6)

	// A failed partition is fetched again only once re-added.
	if err := m.Add(PartitionSpec{Topic: "oor", Partition: 1, FetchOffset: 3, LeaderEpoch: -1}, NewQueue()); !errors.Is(err, ErrAlreadyAdded) {
		t.Errorf("Add of a failed partition: %v, want ErrAlreadyAdded", err)
	}
	m.Remove("oor", 1)
	col.add(PartitionSpec{Topic: "oor", Partition: 1, FetchOffset: 3, LeaderEpoch: -1}, true)
	col.waitDelivered("partition 1 re-added at the log start", tp{"oor", 1}, 5)
}

// Remove stops deliveries at once; a later Add at an offset inside a batch
// starts with the batch holding it.
func TestRemoveDuringFetchingThenAddAtOffset(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "ra"))
	prod := newProducer(t, c)
	src := kfaketest.NewClient(t, c)
	m := newManager(t, src)
	runManager(t, m)

	var removed atomic.Bool
	var late atomic.Int32
	var mu sync.Mutex
	var first []batch.Batch
	sink := SinkFunc(func(f Fetched) {
		if removed.Load() {
			late.Add(1)
		}
		mu.Lock()
		first = append(first, f.Batches...)
		mu.Unlock()
		// No Done: this sink never blocks and the data is small.
	})
	if err := m.Add(PartitionSpec{Topic: "ra", LeaderEpoch: -1}, sink); err != nil {
		t.Fatal(err)
	}

	// Produce continuously while removing.
	pctx, stopProducing := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for pctx.Err() == nil {
			recs := []*kgo.Record{{Topic: "ra", Value: []byte("a")}, {Topic: "ra", Value: []byte("b")}}
			if err := prod.ProduceSync(pctx, recs...).FirstErr(); err != nil && pctx.Err() == nil {
				t.Errorf("producing: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond) // paces the producer; not a wait
		}
	}()
	kfaketest.WaitFor(t, "some data", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(first) >= 5, fmt.Sprintf("%d batches delivered, want 5", len(first))
	})
	if !m.Remove("ra", 0) {
		t.Fatal("Remove reported the partition unknown")
	}
	removed.Store(true)
	// Gives a fetch in flight at Remove (answered within MaxWait) the time
	// to be delivered, which must not happen: nothing happening has no
	// event to wait for.
	time.Sleep(3 * testMaxWait)
	stopProducing()
	pwg.Wait()
	if n := late.Load(); n != 0 {
		t.Fatalf("%d deliveries after Remove returned", n)
	}
	if m.Remove("ra", 0) {
		t.Errorf("second Remove reported the partition known")
	}

	// Records come in pairs, so offset 2k+1 is inside the batch [2k, 2k+1].
	end, err := kadm.NewClient(src).ListEndOffsets(ctx, "ra")
	if err != nil {
		t.Fatal(err)
	}
	hw := end["ra"][0].Offset
	from := int64(7)
	col := newCollector(t, m)
	col.add(PartitionSpec{Topic: "ra", FetchOffset: from, LeaderEpoch: -1}, true)
	k := tp{"ra", 0}
	col.waitDelivered("re-added partition caught up", k, hw)
	ds := col.deliveries(k)
	if ds[0].FetchOffset != from {
		t.Errorf("first delivery fetched from %d, want %d", ds[0].FetchOffset, from)
	}
	// Records were produced in pairs, but a loaded producer may put two
	// pairs in one batch: the source says which batch holds from.
	holding, err := kafkalog.FirstBatchAt(ctx, src, "ra", 0, from, hw)
	if err != nil {
		t.Fatal(err)
	}
	bs := col.batches(k)
	if bs[0].BaseOffset() != holding || holding > from {
		t.Errorf("first batch starts at %d, want %d (the batch holding %d)", bs[0].BaseOffset(), holding, from)
	}
	checkContiguous(t, k, bs, from, hw)
}

// A partition whose sink does not acknowledge is paused (forgotten in the
// session) without stalling another partition of the same session, and
// resumes once acknowledged.
func TestBackpressurePausesOnlyTheSlowPartition(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "bp"))
	prod := newProducer(t, c, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for range 40 {
		produce(t, ctx, prod, "bp", 0, 1, 500)
		produce(t, ctx, prod, "bp", 1, 1, 500)
	}
	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, "bp")
	const partMax, maxBuf = 2048, 4096
	m := newManager(t, src, WithPartitionMaxBytes(partMax), WithMaxBufferedBytes(maxBuf))
	col := newCollector(t, m)
	slow, fast := tp{"bp", 0}, tp{"bp", 1}
	col.add(PartitionSpec{Topic: "bp", Partition: 0, LeaderEpoch: -1}, false)
	col.add(PartitionSpec{Topic: "bp", Partition: 1, LeaderEpoch: -1}, true)
	runManager(t, m)

	col.waitDelivered("the fast partition complete", fast, 40)
	checkContiguous(t, fast, col.batches(fast), 0, 40)
	st, _ := m.Status(slow.topic, slow.partition)
	if st.State != StatePaused {
		t.Fatalf("slow partition status %+v, want paused", st)
	}
	buffered := 0
	for _, b := range col.batches(slow) {
		buffered += len(b)
	}
	if int64(buffered) != st.BufferedBytes || buffered < maxBuf || buffered > maxBuf+partMax+600 {
		t.Errorf("slow partition holds %d bytes (status %d), want between %d and the limit plus one fetch", buffered, st.BufferedBytes, maxBuf)
	}
	if col.nextOffset(slow) >= 40 {
		for _, f := range col.deliveries(slow) {
			t.Logf("delivery from %d: %d batches %d bytes", f.FetchOffset, len(f.Batches), f.Bytes())
		}
		t.Fatalf("slow partition got everything without acknowledging")
	}
	var forgotten bool
	for _, r := range log.all() {
		forgotten = forgotten || r.forgets(slow)
	}
	if !forgotten {
		t.Errorf("the paused partition was never forgotten in the session")
	}

	col.setAck(slow, true)
	m.Done(slow.topic, slow.partition, buffered)
	col.waitDelivered("the slow partition complete once acknowledged", slow, 40)
	checkContiguous(t, slow, col.batches(slow), 0, 40)
}

// The source reports divergence from LastFetchedEpoch: delivered as
// ErrDiverged, never as a silent reset.
func TestDivergingEpochIsDelivered(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "dv"))
	prod := newProducer(t, c)
	for range 3 {
		produce(t, ctx, prod, "dv", 0, 1, 10)
	}
	src := kfaketest.NewClient(t, c)
	id := topicID(t, ctx, src, "dv")
	log := observeFetches(t, ctx, c, src, "dv")
	m := newManager(t, src)
	col := newCollector(t, m)
	k := tp{"dv", 0}
	col.add(PartitionSpec{Topic: "dv", LeaderEpoch: -1}, true)
	runManager(t, m)
	col.waitDelivered("first data", k, 3)
	lastEpoch := col.batches(k)[2].PartitionLeaderEpoch()

	kfaketest.WaitFor(t, "fetch at 3 with the last epoch", func() (bool, string) {
		for _, r := range log.all() {
			if p, ok := r.has(k); ok && p.offset == 3 {
				return p.lastFetchedEpoch == lastEpoch, fmt.Sprintf("fetch at 3 with last fetched epoch %d, want %d", p.lastFetchedEpoch, lastEpoch)
			}
		}
		return false, log.summary(0)
	})
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if req.MaxWaitMillis != int32(testMaxWait.Milliseconds()) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "dv", id
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 3, 3, 0
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = lastEpoch, 1
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	col.waitError("divergence delivered", k)
	var de *DivergedError
	if err := col.errs(k)[0]; !errors.Is(err, ErrDiverged) || !errors.As(err, &de) {
		t.Fatalf("error %v, want *DivergedError", err)
	}
	if de.FetchOffset != 3 || de.LastFetchedEpoch != lastEpoch || de.DivergingEndOffset != 1 {
		t.Errorf("divergence %+v, want fetch offset 3, last epoch %d, end offset 1", de, lastEpoch)
	}
	if st, _ := m.Status("dv", 0); st.State != StateFailed || st.FetchOffset != 3 {
		t.Errorf("status %+v, want failed at 3 (no reset)", st)
	}
}

// TOPIC_AUTHORIZATION_FAILED fails the partitions of that topic only.
func TestTopicAuthorizationFailsOnlyThatTopic(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "open", "secret"))
	prod := newProducer(t, c)
	for p := range int32(2) {
		produce(t, ctx, prod, "open", p, 1, 10)
		produce(t, ctx, prod, "secret", p, 1, 10)
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "secret", Err: kerr.TopicAuthorizationFailed, Count: -1})
	src := kfaketest.NewClient(t, c)
	m := newManager(t, src)
	col := newCollector(t, m)
	for _, topic := range []string{"open", "secret"} {
		for p := range int32(2) {
			col.add(PartitionSpec{Topic: topic, Partition: p, LeaderEpoch: -1}, true)
		}
	}
	runManager(t, m)
	for p := range int32(2) {
		k := tp{"secret", p}
		col.waitError(fmt.Sprintf("%s: authorization error", k), k)
		if err := col.errs(k)[0]; !errors.Is(err, ErrAuthorization) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s: %v, want ErrAuthorization wrapping TOPIC_AUTHORIZATION_FAILED", k, err)
		}
	}
	for p := range int32(2) {
		produce(t, ctx, prod, "open", p, 1, 10)
	}
	for p := range int32(2) {
		k := tp{"open", p}
		col.waitDelivered(fmt.Sprintf("%s keeps going", k), k, 2)
		if errs := col.errs(k); len(errs) > 0 {
			t.Errorf("%s: %v", k, errs)
		}
	}
}

// Credentials rejected by a broker (SASL) fail every partition of its
// session; the Manager keeps running and stops cleanly. The fetch connection
// drops and its replacement is refused (kfake answers a wrong password by
// closing the connection, so the refusal here is the broker's
// UNSUPPORTED_SASL_MECHANISM for a mechanism the credentials now name).
func TestSASLFailureFailsTheSessionsPartitions(t *testing.T) {
	// Not parallel: it counts the process's fetcher goroutines.
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "auth"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.User("SCRAM-SHA-256", "mirror", "password"))
	prod := newProducer(t, c, kgo.SASL(scram.Auth{User: "admin", Pass: "admin"}.AsSha256Mechanism()))
	for p := range int32(2) {
		produce(t, ctx, prod, "auth", p, 1, 10)
	}
	mech := &switchableMechanism{Mechanism: scram.Auth{User: "mirror", Pass: "password"}.AsSha256Mechanism()}
	src := kfaketest.NewClient(t, c, kgo.SASL(mech))
	m := newManager(t, src)
	col := newCollector(t, m)
	for p := range int32(2) {
		col.add(PartitionSpec{Topic: "auth", Partition: p, LeaderEpoch: -1}, true)
	}
	stop := runManager(t, m)
	for p := range int32(2) {
		col.waitDelivered("data before the credentials change", tp{"auth", p}, 1)
	}

	mech.broken.Store(true)
	var dropped atomic.Bool
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if kr.(*kmsg.FetchRequest).MaxWaitMillis != int32(testMaxWait.Milliseconds()) {
			return nil, nil, false
		}
		dropped.Store(true)
		return nil, errors.New("test: drop the connection"), true
	})
	for p := range int32(2) {
		k := tp{"auth", p}
		col.waitError(fmt.Sprintf("%s: authentication error", k), k)
		if err := col.errs(k)[0]; !errors.Is(err, ErrAuthentication) || !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Errorf("%s: %v, want ErrAuthentication wrapping the broker's SASL error", k, err)
		}
		if st, _ := m.Status(k.topic, k.partition); st.State != StateFailed {
			t.Errorf("%s: status %v, want failed", k, st.State)
		}
	}
	if !dropped.Load() {
		t.Fatal("the fetch connection was never dropped")
	}
	stop()
	if gs := fetcherGoroutines(); len(gs) > 0 {
		t.Errorf("fetcher goroutines left after Run returned:\n%s", gs)
	}
}

// switchableMechanism is a SASL mechanism that, once broken, names a
// mechanism no broker supports.
type switchableMechanism struct {
	sasl.Mechanism
	broken atomic.Bool
}

func (m *switchableMechanism) Name() string {
	if m.broken.Load() {
		return "KMIRROR-TEST-REVOKED"
	}
	return m.Mechanism.Name()
}

// A source topic deleted and recreated under its name is a different log:
// ErrTopicIDChanged, not a retry and not a reset.
func TestRecreatedTopicFailsWithTopicIDChanged(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "re"))
	prod := newProducer(t, c)
	produce(t, ctx, prod, "re", 0, 1, 10)
	src := kfaketest.NewClient(t, c)
	oldID := topicID(t, ctx, src, "re")
	m := newManager(t, src)
	col := newCollector(t, m)
	k := tp{"re", 0}
	col.add(PartitionSpec{Topic: "re", TopicID: oldID, LeaderEpoch: -1}, true)
	runManager(t, m)
	col.waitDelivered("data from the first incarnation", k, 1)

	adm := kadm.NewClient(src)
	if _, err := adm.DeleteTopics(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "re"); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, newProducer(t, c), "re", 0, 1, 10) // a producer that never saw the old id
	col.waitError("topic id change delivered", k)
	if err := col.errs(k)[0]; !errors.Is(err, ErrTopicIDChanged) {
		t.Fatalf("error %v, want ErrTopicIDChanged", err)
	}
	if got := col.nextOffset(k); got != 1 {
		t.Errorf("delivered up to %d after the recreation, want nothing from the new topic", got)
	}
}

// A batch that fails its CRC check is refetched; data arrives once, intact.
// A batch that stays corrupt fails the partition.
func TestCorruptBatchIsRefetchedThenFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		corrupt int // responses to corrupt
		wantErr bool
	}{{"transient", 1, false}, {"persistent", session.MaxCorruptRefetches + 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := kfaketest.Context(t)
			c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "crc"))
			prod := newProducer(t, c)
			for range 3 {
				produce(t, ctx, prod, "crc", 0, 2, 30)
			}
			src := kfaketest.NewClient(t, c)
			k := tp{"crc", 0}
			good := rawLog(t, ctx, src, c, k, 0)
			id := topicID(t, ctx, src, "crc")
			var served atomic.Int32
			c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				req := kr.(*kmsg.FetchRequest)
				if req.MaxWaitMillis != int32(testMaxWait.Milliseconds()) || len(req.Topics) == 0 || served.Load() >= int32(tc.corrupt) {
					return nil, nil, false
				}
				c.KeepControl()
				served.Add(1)
				bad := append([]byte(nil), good...)
				bad[len(bad)-1] ^= 0xff // last record byte of the last batch
				resp := req.ResponseKind().(*kmsg.FetchResponse)
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = "crc", id
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 6, 6, 0
				rp.RecordBatches = bad
				rt.Partitions = append(rt.Partitions, rp)
				resp.Topics = append(resp.Topics, rt)
				return resp, nil, true
			})
			m := newManager(t, src)
			col := newCollector(t, m)
			col.add(PartitionSpec{Topic: "crc", LeaderEpoch: -1}, true)
			runManager(t, m)
			if tc.wantErr {
				col.waitError("corrupt batch error", k)
				if err := col.errs(k)[0]; !errors.Is(err, batch.ErrCorruptBatch) {
					t.Fatalf("error %v, want batch.ErrCorruptBatch", err)
				}
				// The two intact batches before the bad one were delivered once.
				checkContiguous(t, k, col.batches(k), 0, 4)
				return
			}
			col.waitDelivered("all data after the refetch", k, 6)
			bs := col.batches(k)
			checkContiguous(t, k, bs, 0, 6)
			checkSameAsSource(t, ctx, src, c, k, bs)
			if errs := col.errs(k); len(errs) > 0 {
				t.Errorf("errors delivered for a transient corruption: %v", errs)
			}
		})
	}
}

// A response holding only part of a batch larger than the partition limit
// makes the next fetch ask for the whole batch.
func TestOversizedPartialBatchIsFetchedWhole(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
	prod := newProducer(t, c, kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce(t, ctx, prod, "big", 0, 1, 3000)
	src := kfaketest.NewClient(t, c)
	k := tp{"big", 0}
	whole := rawLog(t, ctx, src, c, k, 0)
	id := topicID(t, ctx, src, "big")
	const partMax = 512
	var partialServed atomic.Bool
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if req.MaxWaitMillis != int32(testMaxWait.Milliseconds()) || len(req.Topics) == 0 {
			return nil, nil, false
		}
		partialServed.Store(true)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "big", id
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 1, 1, 0
		rp.RecordBatches = whole[:partMax] // what a broker cut at the limit returns
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	log := observeFetches(t, ctx, c, src, "big")
	m := newManager(t, src, WithPartitionMaxBytes(partMax))
	col := newCollector(t, m)
	col.add(PartitionSpec{Topic: "big", LeaderEpoch: -1}, true)
	runManager(t, m)
	col.waitDelivered("the big batch", k, 1)
	if !partialServed.Load() {
		t.Fatal("the partial response was never served")
	}
	var asked bool
	for _, r := range log.all() {
		if p, ok := r.has(k); ok && p.offset == 0 && p.maxBytes == int32(len(whole)) {
			asked = true
		}
	}
	if !asked {
		t.Errorf("no fetch asked for the whole %d-byte batch", len(whole))
	}
	if bs := col.batches(k); len(bs) != 1 || len(bs[0]) != len(whole) {
		t.Errorf("delivered %d batches, want the whole batch once", len(bs))
	}
	// The next fetch asks for as much as the batch just delivered (so
	// that a broker does not cut another large batch); once a small
	// batch is delivered, fetches are back to the configured limit.
	produce(t, ctx, prod, "big", 0, 1, 10)
	col.waitDelivered("next record", k, 2)
	produce(t, ctx, prod, "big", 0, 1, 10)
	col.waitDelivered("the record after", k, 3)
	for _, r := range log.all() {
		if p, ok := r.has(k); ok && p.offset == 1 && p.maxBytes != int32(len(whole)) {
			t.Errorf("fetch at 1 asks for %d bytes, want the last batch's %d", p.maxBytes, len(whole))
		}
		if p, ok := r.has(k); ok && p.offset == 2 && p.maxBytes != partMax {
			t.Errorf("fetch at 2 asks for %d bytes, want the configured %d", p.maxBytes, partMax)
		}
	}
}

// The throttle hook sees every response's bytes before they are delivered.
func TestThrottleRunsBeforeDelivery(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "thr"))
	prod := newProducer(t, c)
	produce(t, ctx, prod, "thr", 0, 4, 100)
	src := kfaketest.NewClient(t, c)
	release := make(chan struct{})
	var throttled atomic.Int64
	m := newManager(t, src, WithThrottle(func(ctx context.Context, n int) error {
		throttled.Add(int64(n))
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	col := newCollector(t, m)
	k := tp{"thr", 0}
	col.add(PartitionSpec{Topic: "thr", LeaderEpoch: -1}, true)
	runManager(t, m)
	kfaketest.WaitFor(t, "throttle called", func() (bool, string) { return throttled.Load() > 0, "" })
	// Gives a delivery that wrongly skips the held throttle the time to
	// happen: nothing happening has no event to wait for.
	time.Sleep(2 * testMaxWait)
	if n := len(col.batches(k)); n != 0 {
		t.Fatalf("%d batches delivered while the throttle held the response", n)
	}
	close(release)
	col.waitDelivered("delivery after the throttle", k, 4)
	if got, want := throttled.Load(), int64(len(col.batches(k)[0])); got < want {
		t.Errorf("throttle saw %d bytes, delivered %d", got, want)
	}
}

// Watermarks arrive without data: an empty partition's high watermark and
// log start are delivered and visible in the status.
func TestWatermarksWithoutData(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "wm"))
	prod := newProducer(t, c)
	for range 4 {
		produce(t, ctx, prod, "wm", 0, 1, 10)
	}
	src := kfaketest.NewClient(t, c)
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "wm", Partition: 0, At: 2})
	if _, err := kadm.NewClient(src).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, src)
	col := newCollector(t, m)
	k := tp{"wm", 0}
	col.add(PartitionSpec{Topic: "wm", FetchOffset: 4, LeaderEpoch: 0}, true)
	runManager(t, m)
	kfaketest.WaitFor(t, "watermarks", func() (bool, string) { return len(col.deliveries(k)) > 0, "no delivery" })
	f := col.deliveries(k)[0]
	if len(f.Batches) != 0 || f.Err != nil || f.HighWatermark != 4 || f.LogStartOffset != 2 || f.LastStableOffset != 4 {
		t.Errorf("delivery %+v, want no batch with high watermark 4, log start 2", f)
	}
	st, _ := m.Status("wm", 0)
	if st.HighWatermark != 4 || st.LogStartOffset != 2 || st.Lag() != 0 {
		t.Errorf("status %+v, want watermarks 4 and 2, lag 0", st)
	}
	snap := m.Snapshot()
	if len(snap) != 1 || snap[0].Topic != "wm" {
		t.Errorf("snapshot %+v", snap)
	}
}

// Several fetchers per broker: partitions split by Kafka's hash into
// separate sessions (separate connections); Run leaves no goroutine and
// closes the clients it opened.
func TestFetchersPerBrokerAndCleanStop(t *testing.T) {
	// Not parallel: it counts the process's fetcher goroutines.
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(8, "fan"))
	prod := newProducer(t, c)
	for p := range int32(8) {
		produce(t, ctx, prod, "fan", p, 1, 10)
	}
	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, "fan")
	m := newManager(t, src, WithFetchersPerBroker(2))
	col := newCollector(t, m)
	for p := range int32(8) {
		col.add(PartitionSpec{Topic: "fan", Partition: p, LeaderEpoch: -1}, true)
	}
	stop := runManager(t, m)
	for p := range int32(8) {
		col.waitDelivered("data", tp{"fan", p}, 1)
	}
	if gs := fetcherGoroutines(); len(gs) == 0 {
		t.Fatal("no session goroutine found while running: the leak check below would prove nothing")
	}

	// Sessions: one per (broker, fetcher id) that has partitions.
	want := make(map[session.Key][]tp)
	for p := range int32(8) {
		k := tp{"fan", p}
		key := session.Key{Broker: c.LeaderFor(k.topic, p), Fetcher: wire.FetcherID(k.topic, p, 2)}
		want[key] = append(want[key], k)
	}
	var fulls []seenFetch
	for _, r := range log.all() {
		if r.epoch == 0 {
			fulls = append(fulls, r)
		}
	}
	if len(fulls) != len(want) {
		t.Fatalf("%d full fetches, want one per session: %d", len(fulls), len(want))
	}
	for _, r := range fulls {
		var got []tp
		for _, p := range r.parts {
			got = append(got, p.key)
		}
		found := false
		for key, parts := range want {
			if key.Broker == r.node && sameSet(got, parts) {
				found = true
			}
		}
		if !found {
			t.Errorf("full fetch to broker %d carries %v, which is no (broker, fetcher id) group %v", r.node, got, want)
		}
	}

	m.sh.Mu.Lock()
	clients := slices.Clone(m.clients)
	m.sh.Mu.Unlock()
	stop()
	if gs := fetcherGoroutines(); len(gs) > 0 {
		t.Fatalf("fetcher goroutines left after Run returned:\n%s", gs)
	}
	if len(clients) != 2 {
		t.Fatalf("%d fetcher clients, want 2", len(clients))
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, clients[1]); !errors.Is(err, kgo.ErrClientClosed) {
		t.Errorf("the extra fetcher client answers %v after Run returned, want ErrClientClosed", err)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, src); err != nil {
		t.Errorf("the mirror's own client was closed by Run: %v", err)
	}
	if err := m.Add(PartitionSpec{Topic: "fan", Partition: 0, LeaderEpoch: -1}, NewQueue()); !errors.Is(err, ErrStopped) {
		t.Errorf("Add after Run: %v, want ErrStopped", err)
	}
	if err := m.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
}

// FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH start a new
// session with a full fetch; no data is lost or repeated.
func TestSessionErrorsStartANewSession(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "se"))
	prod := newProducer(t, c)
	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, "se")
	m := newManager(t, src)
	col := newCollector(t, m)
	for p := range int32(2) {
		col.add(PartitionSpec{Topic: "se", Partition: p, LeaderEpoch: -1}, true)
	}
	runManager(t, m)
	incremental := func(kr kmsg.Request) bool {
		req := kr.(*kmsg.FetchRequest)
		return req.MaxWaitMillis == int32(testMaxWait.Milliseconds()) && req.SessionEpoch > 0
	}
	next := int64(0)
	for i, code := range []*kerr.Error{kerr.FetchSessionIDNotFound, kerr.InvalidFetchSessionEpoch} {
		produce(t, ctx, prod, "se", 0, 1, 10)
		next++
		col.waitDelivered("data", tp{"se", 0}, next)
		kfaketest.WaitFor(t, "an incremental fetch", func() (bool, string) {
			rs := log.all()
			return len(rs) > 0 && rs[len(rs)-1].epoch > 0, log.summary(0)
		})
		// The mark is taken before the fault: the full fetch that follows
		// it can be logged before h.Wait returns.
		mark := log.len()
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, TopLevel: true, Err: code, When: incremental})
		if err := h.Wait(ctx, 1); err != nil {
			t.Fatalf("%v never injected: %v", code, err)
		}
		kfaketest.WaitFor(t, "a full fetch after "+code.Message, func() (bool, string) {
			for _, r := range log.all()[mark:] {
				if r.epoch == 0 {
					return len(r.parts) == 2, fmt.Sprintf("a full fetch of %d partitions, want 2", len(r.parts))
				}
			}
			return false, log.summary(mark)
		})
		for _, r := range log.all()[mark:] {
			if r.epoch == 0 {
				if code == kerr.FetchSessionIDNotFound && r.sessionID != 0 {
					t.Errorf("after %v the full fetch names session %d, want 0 (a new session)", code, r.sessionID)
				}
				if code == kerr.InvalidFetchSessionEpoch && r.sessionID == 0 {
					t.Errorf("after %v the full fetch does not name the old session to close it", code)
				}
				break
			}
		}
		produce(t, ctx, prod, "se", 0, 1, 10)
		next++
		col.waitDelivered(fmt.Sprintf("data after error %d", i), tp{"se", 0}, next)
	}
	checkContiguous(t, tp{"se", 0}, col.batches(tp{"se", 0}), 0, next)
	if errs := col.errs(tp{"se", 0}); len(errs) > 0 {
		t.Errorf("session errors reached the sink: %v", errs)
	}
}

// Older brokers: without topic ids (Kafka 2.7: Fetch v12, Metadata v9) the
// fetcher addresses topics by name; without fetch sessions (Kafka 1.0:
// Fetch v6) every request is a full fetch.
func TestOlderBrokers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		versions   *kversion.Versions
		maxFetch   int16
		noSessions bool
	}{
		{"kafka-2.7-names", kversion.V2_7_0(), 12, false},
		{"kafka-1.0-no-sessions", kversion.V1_0_0(), 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := kfaketest.Context(t)
			c := kfaketest.NewCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(4, "old"), kfake.MaxVersions(tc.versions))
			prod := newProducer(t, c, kgo.MaxVersions(tc.versions))
			for p := range int32(4) {
				produce(t, ctx, prod, "old", p, 2, 10)
			}
			src := kfaketest.NewClient(t, c, kgo.MaxVersions(tc.versions))
			log := &fetchLog{ids: map[[16]byte]string{}}
			c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				req := kr.(*kmsg.FetchRequest)
				if req.MaxWaitMillis == int32(testMaxWait.Milliseconds()) {
					log.mu.Lock()
					log.reqs = append(log.reqs, seenFetch{version: req.Version, sessionID: req.SessionID, epoch: req.SessionEpoch})
					log.mu.Unlock()
				}
				return nil, nil, false
			})
			m := newManager(t, src)
			col := newCollector(t, m)
			for p := range int32(4) {
				col.add(PartitionSpec{Topic: "old", Partition: p, LeaderEpoch: -1}, true)
			}
			runManager(t, m)
			// The first (full) fetch delivers the first two records; the
			// third, produced after it, comes through a later fetch, which
			// is incremental where the broker has sessions.
			for p := range int32(4) {
				col.waitDelivered(fmt.Sprintf("%s's first records delivered", tp{"old", p}), tp{"old", p}, 2)
			}
			for p := range int32(4) {
				produce(t, ctx, prod, "old", p, 1, 10)
			}
			for p := range int32(4) {
				k := tp{"old", p}
				col.waitDelivered(fmt.Sprintf("%s delivered", k), k, 3)
				checkContiguous(t, k, col.batches(k), 0, 3)
				if errs := col.errs(k); len(errs) > 0 {
					t.Errorf("%s: %v", k, errs)
				}
			}
			incremental := 0
			for _, r := range log.all() {
				if r.version > tc.maxFetch {
					t.Fatalf("fetch v%d sent to a broker that supports up to v%d", r.version, tc.maxFetch)
				}
				if r.epoch > 0 {
					incremental++
				}
			}
			if tc.noSessions && incremental > 0 {
				t.Errorf("%d incremental fetches to a broker without sessions", incremental)
			}
			if !tc.noSessions && incremental == 0 {
				t.Errorf("no incremental fetch to a broker with sessions")
			}
		})
	}
}

// A response may start before the fetch offset (brokers return whole
// batches): batches that end before it are dropped, the one holding it is
// delivered first.
func TestBatchesEndingBeforeTheFetchOffsetAreDropped(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "early"))
	prod := newProducer(t, c)
	for range 3 {
		produce(t, ctx, prod, "early", 0, 2, 10) // batches 0-1, 2-3, 4-5
	}
	src := kfaketest.NewClient(t, c)
	k := tp{"early", 0}
	whole := rawLog(t, ctx, src, c, k, 0)
	id := topicID(t, ctx, src, "early")
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if req.MaxWaitMillis != int32(testMaxWait.Milliseconds()) || len(req.Topics) == 0 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "early", id
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 6, 6, 0
		rp.RecordBatches = whole // from offset 0, whatever was asked
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	m := newManager(t, src)
	col := newCollector(t, m)
	col.add(PartitionSpec{Topic: "early", FetchOffset: 3, LeaderEpoch: -1}, true)
	runManager(t, m)
	col.waitDelivered("delivery", k, 6)
	bs := col.batches(k)
	if len(bs) != 2 || bs[0].BaseOffset() != 2 {
		t.Fatalf("delivered %d batches from %d, want the batches at 2 and 4", len(bs), bs[0].BaseOffset())
	}
	checkContiguous(t, k, bs, 3, 6)
	if st, _ := m.Status("early", 0); st.BufferedBytes != 0 {
		t.Errorf("buffered %d bytes after every delivery was acknowledged", st.BufferedBytes)
	}
}
