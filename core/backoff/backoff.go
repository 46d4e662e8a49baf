// Package backoff owns how kmirror waits between attempts of something that
// failed: one Policy (a first wait that doubles up to a cap, optionally
// drawn with full jitter, optionally bounded by a number of retries or an
// overall timeout), the Retry that walks it for one operation, and Sleep,
// the context-aware wait every retry loop uses.
//
// A Policy is a plain comparable value whose zero fields mean "no limit" or
// "no jitter" (documented per field), because callers build it from
// configuration keys (replica.fetch.backoff.ms, mirror.failed.retry.*, the
// writer's RetryBackoff and RetryTimeout) rather than from options; it is
// validated once, by Validate, where the caller validates its own options.
//
// # Jitter
//
// With Jitter set, the wait before retry n is drawn uniformly from
// [0, Cap(n)] ("full jitter"). It spreads the retries of many partitions
// that failed together (a broker restart, a leader move) over the whole
// interval, so they do not come back as one burst; equal jitter
// ([Cap/2, Cap]) would keep a minimum wait but bunch the retries in the
// upper half. The growth of Cap is what keeps a persistent failure from
// being hammered. Without Jitter each wait is exactly Cap(n): a fixed pace
// (Fixed) or plain doubling.
//
// # Invariants
//
//   - Cap(n) = Initial * 2^(n-1), at most Max; it never overflows and never
//     decreases with n.
//   - Every wait Next returns is in [0, Cap(n)], and exactly Cap(n) without
//     Jitter.
//   - Next never grants a wait that would end after Start + Timeout, nor
//     more than MaxRetries waits: it reports the policy exhausted instead,
//     so the caller gives up with its last error rather than sleeping past
//     its deadline.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ErrExhausted is returned by Retry.Sleep when the policy grants no further
// wait (MaxRetries reached, or the next wait would end after the Timeout).
var ErrExhausted = errors.New("retries exhausted")

// Policy describes the waits between the attempts of one operation.
type Policy struct {
	// Initial is the first wait (before retry 1). Must be positive.
	Initial time.Duration
	// Max caps every wait; waits double from Initial up to Max. Zero means
	// Initial: a fixed pace. Must otherwise be at least Initial.
	Max time.Duration
	// Jitter draws each wait uniformly from [0, Cap(n)] (full jitter)
	// instead of waiting Cap(n) exactly. Zero (false): no jitter.
	Jitter bool
	// Timeout bounds the whole sequence: Next grants no wait that would end
	// more than Timeout after Start. Zero: no deadline.
	Timeout time.Duration
	// MaxRetries is how many waits Next grants. Zero: no limit.
	MaxRetries int
}

// Fixed is a policy that waits d between attempts, forever.
func Fixed(d time.Duration) Policy { return Policy{Initial: d, Max: d} }

// Exponential is a policy whose waits double from initial up to max, drawn
// with full jitter, forever. Set Timeout or MaxRetries on the result to
// bound it.
func Exponential(initial, max time.Duration) Policy {
	return Policy{Initial: initial, Max: max, Jitter: true}
}

// Validate reports the first field out of range.
func (p Policy) Validate() error {
	switch {
	case p.Initial <= 0:
		return fmt.Errorf("backoff: initial wait %v must be positive", p.Initial)
	case p.Max != 0 && p.Max < p.Initial:
		return fmt.Errorf("backoff: maximum wait %v must be at least the initial wait %v", p.Max, p.Initial)
	case p.Timeout < 0:
		return fmt.Errorf("backoff: timeout %v must be 0 (none) or positive", p.Timeout)
	case p.MaxRetries < 0:
		return fmt.Errorf("backoff: max retries %d must be 0 (no limit) or positive", p.MaxRetries)
	}
	return nil
}

// max is the effective cap: Max, or Initial when Max is zero.
func (p Policy) max() time.Duration {
	if p.Max == 0 {
		return p.Initial
	}
	return p.Max
}

// Cap is the longest wait before retry n (1 for the retry after the first
// failure): Initial * 2^(n-1), at most Max. Retry numbers below 1 count as 1.
func (p Policy) Cap(n int) time.Duration {
	limit := p.max()
	d := p.Initial
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			return limit // doubling would pass the cap (and might overflow)
		}
		d *= 2
	}
	return min(d, limit)
}

// Delay is the wait before retry n for callers that count retries
// themselves (a franz-go RetryBackoffFn, a persisted attempt count):
// Cap(n), drawn uniformly from [0, Cap(n)] when Jitter is set. It ignores
// Timeout and MaxRetries and is safe for concurrent use.
func (p Policy) Delay(n int) time.Duration { return p.delay(n, FullJitter) }

func (p Policy) delay(n int, draw func(time.Duration) time.Duration) time.Duration {
	d := p.Cap(n)
	if p.Jitter {
		d = min(max(draw(d), 0), d)
	}
	return d
}

// FullJitter draws a wait uniformly from [0, max]; zero for max <= 0.
func FullJitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return rand.N(max + 1)
}

// Start begins the waits of one operation now.
func (p Policy) Start() *Retry {
	r := &Retry{p: p, now: time.Now, draw: FullJitter}
	r.Reset()
	return r
}

// Retry walks a Policy for one operation: call Next (or Sleep) after each
// failed attempt. It is not safe for concurrent use.
type Retry struct {
	p        Policy
	now      func() time.Time
	draw     func(max time.Duration) time.Duration
	deadline time.Time // zero: none
	n        int
}

// Reset starts the sequence again, as if just returned by Start: the next
// wait is the first, and the Timeout counts from now. Call it when the
// operation succeeded and a later failure should start from Initial.
func (r *Retry) Reset() {
	r.n = 0
	r.deadline = time.Time{}
	if r.p.Timeout > 0 {
		r.deadline = r.now().Add(r.p.Timeout)
	}
}

// Retries is how many times Next was called since Start or Reset: the
// attempts that failed, including one Next refused.
func (r *Retry) Retries() int { return r.n }

// Next counts a failed attempt and returns the wait before the next one,
// or false when the policy is exhausted (MaxRetries waits granted already,
// or the wait would end after the Timeout).
func (r *Retry) Next() (time.Duration, bool) {
	r.n++
	if r.p.MaxRetries > 0 && r.n > r.p.MaxRetries {
		return 0, false
	}
	d := r.p.delay(r.n, r.draw)
	if !r.deadline.IsZero() && r.now().Add(d).After(r.deadline) {
		return 0, false
	}
	return d, true
}

// Sleep counts a failed attempt and waits before the next one. It returns
// ErrExhausted, without waiting, when Next grants no wait, and
// context.Cause(ctx) when ctx ends first.
func (r *Retry) Sleep(ctx context.Context) error {
	d, ok := r.Next()
	if !ok {
		return ErrExhausted
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx ends: then it returns context.Cause(ctx). A
// d of zero or less does not wait (but still reports an ended ctx).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
