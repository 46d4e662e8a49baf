// Package budget is the mechanism behind fetcher.Budget: the bound on the
// bytes buffered between fetch and append, shared by every fetcher Manager
// of the daemon, and the per-partition fetch size it implies. The fetcher's
// sessions reserve room before they send a fetch, settle the reservation
// when the response is handled, and release delivered bytes as the runner
// acknowledges them.
package budget

import (
	"math/bits"
	"slices"
	"sync"
)

// minPartitionFetchBytes is the floor of the per-partition fetch size when
// the budget is shared by many partitions (16 KiB, a Kafka producer's
// default batch.size). A larger first batch is still returned whole.
const minPartitionFetchBytes = 16 << 10

// Waiter is one asker of room (a fetch session); its address identifies it
// in the queue of those waiting.
type Waiter struct{ _ byte } // not zero-sized, so addresses differ

// Budget counts the bytes buffered and reserved for every Manager that
// shares it. Bytes count from the moment a fetch is sent (its response's
// possible size is reserved) and, once delivered, until they are released.
//
// A session sends a fetch only when its reservation fits in what remains,
// capping the response's MaxBytes to it, so the bytes buffered never exceed
// the budget by more than one batch (Kafka returns the first batch of a
// response whole even when it is larger than MaxBytes). When nothing at all
// is buffered or reserved a fetch is always allowed, so a batch larger than
// the budget is still fetched.
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
	queue []*Waiter
}

// New returns a budget of max bytes (at least 1).
func New(max int64) *Budget {
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

// Figures returns Max, Buffered and Reserved as of one moment.
func (b *Budget) Figures() (maxBytes, buffered, reserved int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max, b.buffered, b.reserved
}

// broadcast wakes every session waiting for room. Called with b.mu held.
func (b *Budget) broadcast() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Reserve asks for want bytes (at least 1) for a fetch of session w. It
// grants min(want, what remains) when at least min(want, floor) remains, or
// when nothing is buffered or reserved at all, and no other session waits
// ahead of w; otherwise it grants 0, queues w, and returns a channel closed
// when w should ask again. A queued session must ask again or Leave.
//
// One request never gets more than half the budget over the running
// sessions (but at least floor): a long poll of partitions that have no
// data holds its reservation until the broker's wait ends, and must not
// starve the sessions that have data.
func (b *Budget) Reserve(w *Waiter, want, floor int64) (int64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	want = min(want, max(floor, b.max/int64(2*max(b.sessions, 1))))
	left := b.max - b.buffered - b.reserved
	first := len(b.queue) == 0 || b.queue[0] == w
	if first && (left >= min(want, floor) || b.buffered+b.reserved <= 0) {
		g := max(1, min(want, left))
		b.reserved += g
		if len(b.queue) > 0 {
			b.queue = b.queue[1:]
			b.broadcast() // the next in line may fit too
		}
		return g, nil
	}
	if !slices.Contains(b.queue, w) {
		b.queue = append(b.queue, w)
	}
	return 0, b.changed
}

// Leave takes w out of the queue: it no longer asks for room.
func (b *Budget) Leave(w *Waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, w)
	if i < 0 {
		return
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	if i == 0 {
		b.broadcast()
	}
}

// Settle ends a fetch's reservation and counts the bytes it delivered.
func (b *Budget) Settle(reserved, delivered int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved -= reserved
	b.buffered += delivered
	if reserved > delivered {
		b.broadcast()
	}
}

// Release returns acknowledged (or dropped) delivered bytes.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buffered -= n
	b.broadcast()
}

// AddSessions counts n more (or, negative, fewer) fetch sessions running.
func (b *Budget) AddSessions(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sessions += n
}

// AddPartitions counts n more (or, negative, fewer) partitions added.
func (b *Budget) AddPartitions(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partitions += n
}

// PartitionMax is the per-partition fetch size for a configured limit:
// min(limit, budget / partitions), rounded down to a power of two and at
// least 16 KiB, so that fetch sizes shrink as the number of mirrored
// partitions grows.
func (b *Budget) PartitionMax(limit int32) int32 {
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
