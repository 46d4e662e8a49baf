// Package coalesce gathers concurrent requests for items of one group (the
// partitions of one topic) into one call that answers them all: many
// partitions preparing at once ask a cluster once per topic (and per
// broker, as the client shards the request) instead of once each.
//
// Answers are never older than the request they answer: a request joins
// only a batch that has not been sent yet, so every answer comes from a
// call made after the request arrived. There is no cache. One batch per
// group is in flight at a time; requests arriving meanwhile gather into the
// next one, which is sent when the one in flight ends (and, at the
// earliest, a short gathering window after its first request).
package coalesce

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Func answers a batch: the values of items (distinct) of group key. An
// item missing from the answer gets ErrNoAnswer; an error fails every item
// of the batch. ctx is cancelled when every request of the batch has given
// up.
type Func[K comparable, I comparable, V any] func(ctx context.Context, key K, items []I) (map[I]Result[V], error)

// Result is one item's answer.
type Result[V any] struct {
	Value V
	Err   error
}

// ErrNoAnswer is an item's error when the batch answered without it.
var ErrNoAnswer = errors.New("the batched request has no answer for it")

// Group coalesces requests per key. The zero value is not usable: use New.
type Group[K comparable, I comparable, V any] struct {
	do     Func[K, I, V]
	window time.Duration

	mu   sync.Mutex
	keys map[K]*keyState[I, V]

	calls int64 // batches sent
}

type keyState[I comparable, V any] struct {
	pending  *batch[I, V]  // gathering; nil: none
	inflight chan struct{} // closed when the batch in flight ends; nil: none
}

type batch[I comparable, V any] struct {
	items   []I
	seen    map[I]bool
	waiters int // requests still waiting for the answer
	cancel  context.CancelFunc
	done    chan struct{}
	results map[I]Result[V]
	err     error
}

// New returns a Group that answers batches with do, gathering each for at
// least window after its first request (0: no wait beyond the batch in
// flight).
func New[K comparable, I comparable, V any](window time.Duration, do Func[K, I, V]) *Group[K, I, V] {
	return &Group[K, I, V]{do: do, window: window, keys: map[K]*keyState[I, V]{}}
}

// Calls returns how many batches were sent.
func (g *Group[K, I, V]) Calls() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// Get returns item's value, from a batch sent after the call. The first
// request of a batch starts its sender, which sends it on behalf of every
// request in it (even when the first request's ctx ends first: the call is
// cancelled only once all its requests gave up); every request waits for
// the answer or for its own ctx.
func (g *Group[K, I, V]) Get(ctx context.Context, key K, item I) (V, error) {
	var zero V
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	g.mu.Lock()
	st := g.keys[key]
	if st == nil {
		st = &keyState[I, V]{}
		g.keys[key] = st
	}
	b := st.pending
	lead := b == nil
	if lead {
		b = &batch[I, V]{seen: map[I]bool{}, done: make(chan struct{})}
		st.pending = b
	}
	if !b.seen[item] {
		b.seen[item] = true
		b.items = append(b.items, item)
	}
	b.waiters++
	prev := st.inflight
	g.mu.Unlock()

	if lead {
		// The batch's sender: it ends when the call does, and the call's
		// context ends once every request of the batch gave up.
		go g.send(ctx, key, st, b, prev)
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		g.mu.Lock()
		b.waiters--
		if b.waiters == 0 && b.cancel != nil {
			b.cancel() // nobody waits for the answer any more
		}
		g.mu.Unlock()
		return zero, ctx.Err()
	}
	if b.err != nil {
		return zero, b.err
	}
	r, ok := b.results[item]
	if !ok {
		return zero, ErrNoAnswer
	}
	return r.Value, r.Err
}

// send gathers b for the window and until the batch in flight (prev) ends,
// then sends it. The call's context keeps the values of the first
// request's ctx but not its end: it ends when every request of b gave up.
func (g *Group[K, I, V]) send(ctx context.Context, key K, st *keyState[I, V], b *batch[I, V], prev chan struct{}) {
	if g.window > 0 {
		t := time.NewTimer(g.window)
		<-t.C
	}
	if prev != nil {
		<-prev // bounded: the batch in flight ends when its call does
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	g.mu.Lock()
	st.pending = nil // from now on, requests gather into the next batch
	st.inflight = b.done
	g.calls++
	if b.waiters == 0 {
		cancel()
	}
	b.cancel = cancel
	items := b.items
	g.mu.Unlock()

	if sctx.Err() != nil {
		b.err = context.Canceled
	} else {
		b.results, b.err = g.do(sctx, key, items)
	}

	g.mu.Lock()
	if st.inflight == b.done {
		st.inflight = nil
	}
	if st.pending == nil && st.inflight == nil {
		delete(g.keys, key)
	}
	g.mu.Unlock()
	close(b.done)
}
