package fetcher

import (
	"math/bits"
	"slices"
	"sync"
)

// DefaultBudgetBytes is the default of mirror.buffer.max.bytes: 64 MiB,
// so that a daemon catching up on hundreds of partitions stays well under
// 256 MiB of resident memory (docs/design/datapath.md, "Memory").
const DefaultBudgetBytes = 64 << 20

// minPartitionFetchBytes is the floor of the per-partition fetch size when
// the budget is shared by many partitions (16 KiB, a Kafka producer's
// default batch.size). A larger first batch is still returned whole.
const minPartitionFetchBytes = 16 << 10

// Budget bounds the bytes buffered between fetch and append for every
// Manager that shares it (one per daemon; franz-go's MaxBufferedBytes is the
// model). Bytes count from the moment a fetch is sent (its response's
// possible size is reserved) and, once delivered, until the runner
// acknowledges them with Manager.Done.
//
// A session sends a fetch only when its reservation fits in what remains,
// capping the response's MaxBytes to it, so the bytes buffered never exceed
// the budget by more than one batch (Kafka returns the first batch of a
// response whole even when it is larger than MaxBytes). When nothing at all
// is buffered or reserved a fetch is always allowed, so a batch larger than
// the budget is still fetched.
//
// The budget also sets how much one partition fetches per request:
// min(replica.fetch.max.bytes, budget / partitions), rounded down to a power
// of two and at least 16 KiB, so that fetch sizes shrink as the number of
// mirrored partitions grows.
//
// All methods are safe for concurrent use.
type Budget struct {
	mu         sync.Mutex
	max        int64
	buffered   int64 // delivered and not yet acknowledged
	reserved   int64 // reserved by fetches in flight
	partitions int   // partitions added to the Managers that share it
	sessions   int   // fetch sessions running
	changed    chan struct{}
	// queue is the sessions waiting for room, served in order: a
	// session that just got its reservation back must not take the room
	// again before the ones already waiting (an idle long poll, returning
	// every replica.fetch.wait.max.ms, would starve them otherwise).
	queue []*session
}

// NewBudget returns a budget of max bytes (at least 1).
func NewBudget(max int64) *Budget {
	return &Budget{max: max, changed: make(chan struct{})}
}

// SetMax changes the budget (at least 1), e.g. on a configuration reload.
// A smaller budget takes effect as buffered bytes are acknowledged.
func (b *Budget) SetMax(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.max = max(n, 1)
	b.broadcast()
}

// Max is the budget in bytes.
func (b *Budget) Max() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max
}

// Buffered is how many bytes are delivered and not yet acknowledged, over
// every Manager that shares the budget.
func (b *Budget) Buffered() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffered
}

// Reserved is how many bytes fetches in flight may still bring.
func (b *Budget) Reserved() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserved
}

// broadcast wakes every session waiting for room. Called with b.mu held.
func (b *Budget) broadcast() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// reserve asks for want bytes (at least 1) for a fetch of session s. It
// grants min(want, what remains) when at least min(want, floor) remains, or
// when nothing is buffered or reserved at all, and no other session waits
// ahead of s; otherwise it grants 0, queues s, and returns a channel closed
// when s should ask again. A queued session must ask again or leave.
//
// One request never gets more than half the budget over the running
// sessions (but at least floor): a long poll of partitions that have no
// data holds its reservation until the broker's wait ends, and must not
// starve the sessions that have data.
func (b *Budget) reserve(s *session, want, floor int64) (int64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	want = min(want, max(floor, b.max/int64(2*max(b.sessions, 1))))
	left := b.max - b.buffered - b.reserved
	first := len(b.queue) == 0 || b.queue[0] == s
	if first && (left >= min(want, floor) || b.buffered+b.reserved <= 0) {
		g := max(1, min(want, left))
		b.reserved += g
		if len(b.queue) > 0 {
			b.queue = b.queue[1:]
			b.broadcast() // the next in line may fit too
		}
		return g, nil
	}
	if !slices.Contains(b.queue, s) {
		b.queue = append(b.queue, s)
	}
	return 0, b.changed
}

// leave takes s out of the queue: it no longer asks for room.
func (b *Budget) leave(s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, s)
	if i < 0 {
		return
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	if i == 0 {
		b.broadcast()
	}
}

// settle ends a fetch's reservation and counts the bytes it delivered.
func (b *Budget) settle(reserved, delivered int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved -= reserved
	b.buffered += delivered
	if reserved > delivered {
		b.broadcast()
	}
}

// release returns acknowledged (or dropped) delivered bytes.
func (b *Budget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buffered -= n
	b.broadcast()
}

func (b *Budget) addSessions(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sessions += n
}

func (b *Budget) addPartitions(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partitions += n
}

// partitionMax is the per-partition fetch size for a configured limit.
func (b *Budget) partitionMax(limit int32) int32 {
	b.mu.Lock()
	share := b.max / int64(max(b.partitions, 1))
	b.mu.Unlock()
	if share >= int64(limit) {
		return limit
	}
	// A power of two, so that the size (part of what an incremental
	// fetch session sends again when it changes) changes only a few
	// times while partitions are added one by one.
	p := int32(1) << (bits.Len64(uint64(max(share, 1))) - 1)
	return min(limit, max(p, minPartitionFetchBytes))
}
