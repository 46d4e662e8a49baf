package fetcher

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// heldSink tracks, across every partition of a test, the bytes delivered
// and not yet acknowledged, and the most ever held at once. Deliver runs
// with the Manager's lock held; the count is updated there, before the
// consumer can acknowledge.
type heldSink struct {
	mu       sync.Mutex
	held     int64
	maxHeld  int64
	maxBatch int
	ack      bool       // acknowledge deliveries as they come
	pending  []heldItem // unacknowledged while ack was false
}

type heldItem struct {
	m   *Manager
	key tp
	n   int
}

// delivered counts f and reports whether to acknowledge it now.
func (h *heldSink) delivered(m *Manager, f Fetched) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held += int64(f.Bytes())
	h.maxHeld = max(h.maxHeld, h.held)
	for _, b := range f.Batches {
		h.maxBatch = max(h.maxBatch, len(b))
	}
	if !h.ack {
		h.pending = append(h.pending, heldItem{m, tp{f.Topic, f.Partition}, f.Bytes()})
	}
	return h.ack
}

// ackAll acknowledges every delivery held, and every later one as it comes.
func (h *heldSink) ackAll() {
	h.mu.Lock()
	h.ack = true
	items := h.pending
	h.pending = nil
	h.mu.Unlock()
	for _, it := range items {
		h.acked(it.n)
		it.m.Done(it.key.topic, it.key.partition, it.n)
	}
}

func (h *heldSink) acked(n int) {
	h.mu.Lock()
	h.held -= int64(n)
	h.mu.Unlock()
}

func (h *heldSink) figures() (held, maxHeld int64, maxBatch int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.maxHeld, h.maxBatch
}

// Two Managers (two mirrors) share one small budget over many partitions:
// while nothing is acknowledged, the bytes buffered stop at the budget
// (plus at most one batch); once acknowledged, everything arrives once, in
// order.
func TestSharedBudgetBoundsBufferedBytesAcrossManagers(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	const parts, batches = 16, 20
	c := kfaketest.NewCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(parts, "one", "two"))
	prod := newProducer(t, c, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for range batches {
		for _, topic := range []string{"one", "two"} {
			for p := range int32(parts) {
				produce(t, ctx, prod, topic, p, 1, 300)
			}
		}
	}
	const budget = 16 << 10
	shared := NewBudget(budget)
	held := &heldSink{}
	type mgr struct {
		m     *Manager
		col   *collector
		topic string
	}
	var ms []mgr
	for _, topic := range []string{"one", "two"} {
		src := kfaketest.NewClient(t, c)
		m := newManager(t, src, WithBudget(shared), WithPartitionMaxBytes(2048))
		col := newCollector(t, m)
		for p := range int32(parts) {
			col.addSink(PartitionSpec{Topic: topic, Partition: p, LeaderEpoch: -1}, held)
		}
		runManager(t, m)
		ms = append(ms, mgr{m, col, topic})
	}

	// Nothing acknowledged: fetching stops once the budget has no room
	// for one more partition's fetch, with no fetch in flight.
	kfaketest.WaitFor(t, "the budget filled and every fetch settled", func() (bool, string) {
		st0, st1 := ms[0].m.Stats(), ms[1].m.Stats()
		full := st0.BudgetBufferedBytes > budget-int64(st0.PartitionMaxBytes)
		idle := st0.FetchesInFlight == 0 && st1.FetchesInFlight == 0 && st0.BudgetReservedBytes == 0
		return full && idle, fmt.Sprintf("stats %+v and %+v", st0, st1)
	})
	h, maxHeld, maxBatch := held.figures()
	st0, st1 := ms[0].m.Stats(), ms[1].m.Stats()
	if maxHeld > budget+int64(maxBatch) {
		t.Errorf("buffered up to %d bytes, want at most the budget %d plus one batch (%d)", maxHeld, budget, maxBatch)
	}
	if st0.BudgetBufferedBytes != h || st0.BufferedBytes+st1.BufferedBytes != h || st0.BudgetMaxBytes != budget {
		t.Errorf("stats %+v and %+v, want the budget and the Managers to count the %d bytes held", st0, st1, h)
	}

	// Acknowledge what is held and from now on: everything arrives.
	held.ackAll()
	for _, x := range ms {
		for p := range int32(parts) {
			k := tp{x.topic, p}
			x.col.waitDelivered("everything once acknowledged", k, batches)
			checkContiguous(t, k, x.col.batches(k), 0, batches)
		}
	}
	if _, maxHeld, maxBatch = held.figures(); maxHeld > budget+int64(maxBatch) {
		t.Errorf("buffered up to %d bytes, want at most the budget %d plus one batch (%d)", maxHeld, budget, maxBatch)
	}
}

// addSink adds a partition whose deliveries are counted in held, and
// acknowledged once held says so.
func (c *collector) addSink(spec PartitionSpec, held *heldSink) {
	c.t.Helper()
	key := tp{spec.Topic, spec.Partition}
	sink := SinkFunc(func(f Fetched) {
		c.mu.Lock()
		c.got[key] = append(c.got[key], f)
		c.mu.Unlock()
		if held.delivered(c.m, f) {
			// Deliver runs under the Manager's lock: acknowledge from
			// another goroutine, as a runner does.
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				held.acked(f.Bytes())
				c.m.Done(key.topic, key.partition, f.Bytes())
			}()
		}
	})
	if err := c.m.Add(spec, sink); err != nil {
		c.t.Fatalf("Add(%v): %v", spec, err)
	}
}

// The per-partition fetch size shrinks as partitions are added to a
// Manager: min(replica.fetch.max.bytes, budget / partitions).
func TestFetchSizeShrinksAsPartitionsGrow(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(64, "grow"))
	src := kfaketest.NewClient(t, c)
	log := observeFetches(t, ctx, c, src, "grow")
	m := newManager(t, src, WithBudget(NewBudget(1<<20)), WithPartitionMaxBytes(1<<20))
	col := newCollector(t, m)
	runManager(t, m)

	sizes := func(want int32, n int) func() (bool, string) {
		return func() (bool, string) {
			rs := log.all()
			if len(rs) == 0 {
				return false, "no fetch yet"
			}
			last := rs[len(rs)-1]
			count := 0
			for _, p := range last.parts {
				if p.maxBytes == want {
					count++
				}
			}
			return count >= n, fmt.Sprintf("last fetch %+v, want %d partitions at %d bytes", last, n, want)
		}
	}
	for p := range int32(4) {
		col.add(PartitionSpec{Topic: "grow", Partition: p, LeaderEpoch: -1}, true)
	}
	kfaketest.WaitFor(t, "4 partitions fetched at 256 KiB each", sizes(256<<10, 4))
	for p := int32(4); p < 64; p++ {
		col.add(PartitionSpec{Topic: "grow", Partition: p, LeaderEpoch: -1}, true)
	}
	kfaketest.WaitFor(t, "64 partitions fetched at 16 KiB each", sizes(16<<10, 64))
	if st := m.Stats(); st.PartitionMaxBytes != 16<<10 {
		t.Errorf("stats %+v, want a 16 KiB partition fetch size", st)
	}
	m.Remove("grow", 63)
	for p := int32(4); p < 63; p++ {
		m.Remove("grow", p)
	}
	kfaketest.WaitFor(t, "4 partitions fetched at 256 KiB again", sizes(256<<10, 4))
}

// longPolls counts the fetch requests that wait wait (the Manager's long
// polls) as kfake receives them.
func longPolls(c *kfake.Cluster, wait time.Duration) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if kr.(*kmsg.FetchRequest).MaxWaitMillis == int32(wait.Milliseconds()) {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// With an hour-long poll in flight for a partition that has no data, a
// partition added, and one resumed after Done, still get their data: a
// release fetch takes them at once instead of the long poll's return.
func TestReleasedPartitionIsFetchedWithoutWaitingForTheLongPoll(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "rel"))
	prod := newProducer(t, c, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for range 10 {
		produce(t, ctx, prod, "rel", 1, 1, 500)
	}
	src := kfaketest.NewClient(t, c)
	const hour = time.Hour
	polls := longPolls(c, hour)
	m := newManager(t, src, WithMaxWait(hour), WithPartitionMaxBytes(1024), WithMaxBufferedBytes(1024))
	col := newCollector(t, m)
	idle, added := tp{"rel", 0}, tp{"rel", 1}
	col.add(PartitionSpec{Topic: "rel", Partition: 0, LeaderEpoch: -1}, true)
	runManager(t, m)
	kfaketest.WaitFor(t, "the idle partition's long poll sent", func() (bool, string) {
		return polls.Load() == 1, fmt.Sprintf("%d long polls", polls.Load())
	})

	// Added while the long poll is out; not acknowledged, so it pauses
	// after its first delivery (1 KiB buffered at most).
	col.add(PartitionSpec{Topic: "rel", Partition: 1, LeaderEpoch: -1}, false)
	// The collector reads the delivery in its own goroutine: wait for it
	// as well as for the pause.
	kfaketest.WaitFor(t, "the added partition paused and its delivery collected", func() (bool, string) {
		st, _ := m.Status(added.topic, added.partition)
		return st.State == StatePaused && col.nextOffset(added) > 0, fmt.Sprintf("status %+v, collected up to %d", st, col.nextOffset(added))
	})
	got := col.nextOffset(added)
	if got <= 0 || got >= 10 {
		t.Fatalf("added partition delivered up to %d, want some of its 10 records", got)
	}

	// Resumed while the long poll is still out.
	col.setAck(added, true)
	held := 0
	for _, b := range col.batches(added) {
		held += len(b)
	}
	m.Done(added.topic, added.partition, held)
	col.waitDelivered("the resumed partition's records", added, 10)
	checkContiguous(t, added, col.batches(added), 0, 10)
	if n := polls.Load(); n != 1 {
		t.Errorf("%d long polls sent, want the first one still in flight", n)
	}
	if len(col.batches(idle)) != 0 {
		t.Errorf("the idle partition got data")
	}
}
