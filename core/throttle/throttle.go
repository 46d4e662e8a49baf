// Package throttle owns kmirror's daemon-wide replication throttle: a token
// bucket in bytes per second shared by every fetcher of every mirror
// (mirror.replication.throttled.rate). The rate can change at run time
// (configuration reload) without losing the bucket's state.
package throttle

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/kmirror/kmirror/core/backoff"
)

// Unlimited is the rate that disables throttling (Kafka's Long.MAX_VALUE default).
const Unlimited = math.MaxInt64

// Limiter is a token bucket. Callers Wait for the bytes they have just fetched
// (a debt model, as Kafka's quota manager throttles after the fact): a fetch of
// n bytes is never split, and the next one waits until the debt is repaid. The
// bucket holds at most one second of tokens, so bursts stay within one second's
// worth of the rate.
type Limiter struct {
	mu     sync.Mutex
	rate   int64 // bytes per second; Unlimited disables
	tokens float64
	last   time.Time
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
}

// New returns a Limiter at rate bytes/s (<= 0 or Unlimited: no limit).
func New(rate int64) *Limiter {
	l := &Limiter{now: time.Now, sleep: backoff.Sleep}
	l.SetRate(rate)
	return l
}

// SetRate changes the rate; tokens already accrued are kept (capped at one
// second of the new rate).
func (l *Limiter) SetRate(rate int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rate <= 0 {
		rate = Unlimited
	}
	l.refill()
	l.rate = rate
	if rate != Unlimited && l.tokens > float64(rate) {
		l.tokens = float64(rate)
	}
}

// Rate returns the current rate in bytes/s.
func (l *Limiter) Rate() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// refill adds the tokens earned since the last call. l.mu must be held.
func (l *Limiter) refill() {
	now := l.now()
	if !l.last.IsZero() && l.rate != Unlimited {
		l.tokens += now.Sub(l.last).Seconds() * float64(l.rate)
		if l.tokens > float64(l.rate) {
			l.tokens = float64(l.rate)
		}
	}
	l.last = now
}

// Wait charges n bytes and blocks until the bucket is no longer in debt, or
// ctx is done.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	l.mu.Lock()
	if l.rate == Unlimited {
		l.mu.Unlock()
		return nil
	}
	l.refill()
	l.tokens -= float64(n)
	var d time.Duration
	if l.tokens < 0 {
		d = time.Duration(-l.tokens / float64(l.rate) * float64(time.Second))
	}
	l.mu.Unlock()
	if d <= 0 {
		return nil
	}
	return l.sleep(ctx, d)
}
