// Package delivery is the contract between the fetcher and the consumer of
// one partition (its runner): what one delivery carries (Fetched), the Sink
// that receives it, the Queue a runner reads deliveries from, and the fatal
// errors a delivery may carry. It imports only core/batch, so a consumer
// needs nothing else of the fetcher to read what it delivers. core/fetcher
// names these types and errors too.
package delivery

import (
	"context"
	"sync"

	"github.com/kmirror/kmirror/core/batch"
)

// Fetched is one delivery for one partition: batches in offset order, or the
// partition's new watermarks with no batch, or a fatal error.
type Fetched struct {
	Topic     string
	Partition int32

	// FetchOffset is the offset this delivery was fetched from. The first
	// batch may start before it (it is the batch holding it); no batch ends
	// before it. Batches are whole, CRC-checked, and contiguous in the
	// source log (a compacted log may have gaps between them); the next
	// delivery starts from the last batch's NextOffset.
	//
	// Batches alias the fetch response's buffer; the receiver owns them
	// (it may Restamp them in place).
	FetchOffset int64
	Batches     []batch.Batch

	// The source's watermarks as of this fetch, -1 when unknown.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64

	// Err is a fatal error (see core/fetcher's sentinels); Batches is empty and
	// the fetcher has stopped fetching the partition.
	Err error
}

// Bytes is the size of the delivered batches: what the runner passes to
// the fetcher's Manager.Done once it has written them.
func (f Fetched) Bytes() int {
	n := 0
	for _, b := range f.Batches {
		n += len(b)
	}
	return n
}

// Sink receives a partition's deliveries. Deliver is called by the
// partition's session goroutine with the fetcher Manager's lock held, so
// deliveries of a partition never overlap and none arrives after Remove
// returns. It must return promptly (hand the data to another goroutine) and
// must not call the Manager.
type Sink interface {
	Deliver(Fetched)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Fetched)

// Deliver calls f.
func (f SinkFunc) Deliver(x Fetched) { f(x) }

// Queue is a Sink for one consumer goroutine (the partition runner). It grows
// without bound by itself; the fetcher Manager's per-partition buffer limit bounds
// it. Consecutive watermark-only deliveries (no batch, no error) are
// coalesced into the latest.
type Queue struct {
	mu    sync.Mutex
	items []Fetched
	ready chan struct{}
}

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return &Queue{ready: make(chan struct{}, 1)} }

// Deliver appends f; it never blocks.
func (q *Queue) Deliver(f Fetched) {
	q.mu.Lock()
	if n := len(q.items); n > 0 && watermarkOnly(q.items[n-1]) && watermarkOnly(f) {
		q.items[n-1] = f
	} else {
		q.items = append(q.items, f)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func watermarkOnly(f Fetched) bool { return len(f.Batches) == 0 && f.Err == nil }

// Next returns the oldest delivery, waiting for one until ctx is done.
func (q *Queue) Next(ctx context.Context) (Fetched, error) {
	for {
		if f, ok := q.TryNext(); ok {
			return f, nil
		}
		select {
		case <-ctx.Done():
			return Fetched{}, ctx.Err()
		case <-q.ready:
		}
	}
}

// TryNext returns the oldest delivery, if any, without waiting.
func (q *Queue) TryNext() (Fetched, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return Fetched{}, false
	}
	f := q.items[0]
	q.items[0] = Fetched{}
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil // let the backing array go
	}
	return f, true
}

// Ready is signalled after a delivery; a receiver that selects on several
// sources can wait on it and then call TryNext until it reports false.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Len is the number of deliveries waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
