package throttle

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when the limiter sleeps, so the tests measure the
// limiter's arithmetic, not the machine's speed.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return nil
}

func newFake(rate int64) (*Limiter, *fakeClock) {
	c := &fakeClock{now: time.Unix(1000, 0)}
	l := New(rate)
	l.now, l.sleep = c.Now, c.Sleep
	l.last = time.Time{}
	return l, c
}

func TestRateHeldOverManyFetches(t *testing.T) {
	t.Parallel()
	const rate = 1 << 20 // 1 MiB/s
	l, c := newFake(rate)
	start := c.Now()
	var total int
	for i := 0; i < 200; i++ {
		n := 64 << 10
		if err := l.Wait(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	elapsed := c.Now().Sub(start).Seconds()
	got := float64(total) / elapsed
	if got < rate*0.95 || got > rate*1.05 {
		t.Fatalf("achieved %.0f B/s over %.2fs, want %d ±5%%", got, elapsed, rate)
	}
}

func TestUnlimitedNeverWaits(t *testing.T) {
	t.Parallel()
	l, c := newFake(Unlimited)
	start := c.Now()
	for i := 0; i < 100; i++ {
		_ = l.Wait(context.Background(), 1<<30)
	}
	if c.Now() != start {
		t.Fatalf("unlimited limiter slept %s", c.Now().Sub(start))
	}
	if New(0).Rate() != Unlimited || New(-1).Rate() != Unlimited {
		t.Fatal("a rate <= 0 must mean unlimited")
	}
}

func TestSetRateTakesEffectForTheNextWait(t *testing.T) {
	t.Parallel()
	l, c := newFake(1000)
	_ = l.Wait(context.Background(), 1000) // first call: empty bucket, 1s debt
	l.SetRate(10000)
	before := c.Now()
	_ = l.Wait(context.Background(), 10000)
	if d := c.Now().Sub(before); d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Fatalf("after SetRate(10000), 10000 bytes waited %s, want ~1s", d)
	}
}

func TestWaitReturnsWhenContextIsDone(t *testing.T) {
	t.Parallel()
	l := New(1) // 1 B/s: a 1 MiB fetch would wait 12 days
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx, 1<<20); err == nil {
		t.Fatal("Wait returned nil although its context expired")
	}
}
