package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

// clock is a fake time source that moves only when told.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// start is Policy.Start on a fake clock and, when draw is not nil, a fixed
// jitter draw.
func start(p Policy, c *clock, draw func(time.Duration) time.Duration) *Retry {
	r := &Retry{p: p, now: c.now, draw: FullJitter}
	if draw != nil {
		r.draw = draw
	}
	r.Reset()
	return r
}

func TestCapDoublesUpToMax(t *testing.T) {
	t.Parallel()
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 100, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		n := i - 1 // retry numbers -1, 0 and 1 all give Initial
		if got := p.Cap(n); got != w*time.Millisecond {
			t.Errorf("Cap(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
}

func TestCapWithoutMaxIsFixed(t *testing.T) {
	t.Parallel()
	p := Fixed(time.Second)
	for n := 1; n <= 5; n++ {
		if got := p.Cap(n); got != time.Second {
			t.Errorf("Fixed(1s).Cap(%d) = %v, want 1s", n, got)
		}
	}
	if got := (Policy{Initial: time.Second}).Cap(4); got != time.Second {
		t.Errorf("Policy with zero Max: Cap(4) = %v, want Initial (1s)", got)
	}
}

func TestCapDoesNotOverflow(t *testing.T) {
	t.Parallel()
	huge := Policy{Initial: time.Nanosecond, Max: time.Duration(1<<63 - 1)}
	prev := time.Duration(0)
	for _, n := range []int{1, 2, 30, 62, 63, 64, 65, 100000} {
		got := huge.Cap(n)
		if got <= 0 || got < prev {
			t.Fatalf("Cap(%d) = %v after %v: overflowed or decreased", n, got, prev)
		}
		prev = got
	}
	if prev != huge.Max {
		t.Errorf("Cap(100000) = %v, want the maximum %v", prev, huge.Max)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, good := range []Policy{
		Fixed(time.Millisecond), Exponential(10*time.Millisecond, time.Second),
		{Initial: time.Second}, {Initial: time.Second, Max: time.Second, Timeout: time.Minute, MaxRetries: 3},
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", good, err)
		}
	}
	for _, bad := range []Policy{
		{}, Fixed(0), Fixed(-time.Second), {Initial: time.Second, Max: time.Millisecond},
		{Initial: time.Second, Timeout: -1}, {Initial: time.Second, MaxRetries: -1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
}

func TestNextWithoutJitterWaitsTheCap(t *testing.T) {
	t.Parallel()
	r := start(Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}, &clock{}, func(time.Duration) time.Duration {
		t.Fatal("a policy without Jitter drew a random wait")
		return 0
	})
	for i, want := range []time.Duration{10, 20, 40, 50, 50} {
		d, ok := r.Next()
		if !ok || d != want*time.Millisecond {
			t.Fatalf("wait %d = %v, %v; want %v, true", i+1, d, ok, want*time.Millisecond)
		}
	}
	if r.Retries() != 5 {
		t.Errorf("Retries() = %d after five Next, want 5", r.Retries())
	}
}

func TestJitteredWaitsStayWithinTheCap(t *testing.T) {
	t.Parallel()
	p := Exponential(time.Millisecond, time.Second)
	r := p.Start()
	below := 0
	for n := 1; n <= 2000; n++ {
		d, ok := r.Next()
		limit := p.Cap(n)
		if !ok || d < 0 || d > limit {
			t.Fatalf("wait %d = %v, %v; want within [0, %v]", n, d, ok, limit)
		}
		if d < limit {
			below++
		}
	}
	// Full jitter draws from the whole interval: 2000 draws that all hit
	// the cap would mean there is no jitter (the odds are nil otherwise).
	if below == 0 {
		t.Error("every jittered wait equalled its cap: no jitter was applied")
	}
}

func TestJitterDrawIsClampedToTheCap(t *testing.T) {
	t.Parallel()
	p := Exponential(100*time.Millisecond, time.Second)
	for _, tc := range []struct {
		draw time.Duration
		want time.Duration
	}{{-time.Second, 0}, {0, 0}, {40 * time.Millisecond, 40 * time.Millisecond}, {time.Hour, 100 * time.Millisecond}} {
		r := start(p, &clock{}, func(max time.Duration) time.Duration {
			if max != 100*time.Millisecond {
				t.Errorf("first draw is from [0, %v], want [0, 100ms]", max)
			}
			return tc.draw
		})
		if d, ok := r.Next(); !ok || d != tc.want {
			t.Errorf("draw %v: Next() = %v, %v; want %v, true", tc.draw, d, ok, tc.want)
		}
	}
}

func TestFullJitterRange(t *testing.T) {
	t.Parallel()
	for _, max := range []time.Duration{-1, 0} {
		if got := FullJitter(max); got != 0 {
			t.Errorf("FullJitter(%v) = %v, want 0", max, got)
		}
	}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := FullJitter(3)
		if d < 0 || d > 3 {
			t.Fatalf("FullJitter(3) = %v, want within [0, 3]", d)
		}
		seen[d] = true
	}
	if len(seen) != 4 {
		t.Errorf("1000 draws of FullJitter(3) gave %d of the 4 values 0..3", len(seen))
	}
}

func TestMaxRetries(t *testing.T) {
	t.Parallel()
	r := start(Policy{Initial: time.Millisecond, MaxRetries: 3}, &clock{}, nil)
	for i := 1; i <= 3; i++ {
		if _, ok := r.Next(); !ok {
			t.Fatalf("Next %d refused, want 3 waits granted", i)
		}
	}
	if d, ok := r.Next(); ok {
		t.Fatalf("Next 4 granted %v, want the policy exhausted after MaxRetries 3", d)
	}
	if r.Retries() != 4 {
		t.Errorf("Retries() = %d, want 4 (the refused one counts)", r.Retries())
	}
}

func TestTimeoutRefusesAWaitPastTheDeadline(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	r := start(Policy{Initial: 300 * time.Millisecond, Max: time.Second, Timeout: time.Second}, c, nil)
	// 300ms (ends at +300ms), 600ms (ends at +900ms): both within 1s.
	for _, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		d, ok := r.Next()
		if !ok || d != want {
			t.Fatalf("Next() = %v, %v; want %v, true", d, ok, want)
		}
		c.advance(d)
	}
	// At +900ms the next wait (1s) would end at +1.9s: refused.
	if d, ok := r.Next(); ok {
		t.Fatalf("Next() at +900ms granted %v past the 1s timeout", d)
	}

	// A wait that ends exactly at the deadline is granted.
	c2 := &clock{t: time.Unix(1000, 0)}
	r2 := start(Policy{Initial: time.Second, Timeout: time.Second}, c2, nil)
	if d, ok := r2.Next(); !ok || d != time.Second {
		t.Fatalf("Next() = %v, %v; want the 1s wait that ends at the deadline", d, ok)
	}
}

func TestJitteredWaitIsCheckedAgainstTheDeadline(t *testing.T) {
	t.Parallel()
	c := &clock{}
	p := Policy{Initial: time.Second, Jitter: true, Timeout: 500 * time.Millisecond}
	// The cap (1s) would pass the deadline, the drawn wait does not.
	r := start(p, c, func(time.Duration) time.Duration { return 400 * time.Millisecond })
	if d, ok := r.Next(); !ok || d != 400*time.Millisecond {
		t.Fatalf("Next() = %v, %v; want the drawn 400ms within the 500ms timeout", d, ok)
	}
	r = start(p, c, func(time.Duration) time.Duration { return 600 * time.Millisecond })
	if d, ok := r.Next(); ok {
		t.Fatalf("Next() granted %v past the 500ms timeout", d)
	}
}

func TestResetStartsAgain(t *testing.T) {
	t.Parallel()
	c := &clock{}
	r := start(Policy{Initial: 100 * time.Millisecond, Max: time.Second, Timeout: time.Second, MaxRetries: 2}, c, nil)
	r.Next()
	r.Next()
	c.advance(time.Hour)
	r.Reset()
	if r.Retries() != 0 {
		t.Errorf("Retries() = %d after Reset, want 0", r.Retries())
	}
	if d, ok := r.Next(); !ok || d != 100*time.Millisecond {
		t.Errorf("Next() after Reset = %v, %v; want the initial 100ms (retries and deadline start again)", d, ok)
	}
}

func TestSleepReturnsTheCauseWhenCanceled(t *testing.T) {
	t.Parallel()
	cause := errors.New("mirror stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	// An hour-long wait returns at once: the test would time out otherwise.
	if err := Sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Errorf("Sleep on a canceled context = %v, want its cause", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, cause) {
		t.Errorf("Sleep(0) on a canceled context = %v, want its cause", err)
	}
	if err := Fixed(time.Hour).Start().Sleep(ctx); !errors.Is(err, cause) {
		t.Errorf("Retry.Sleep on a canceled context = %v, want its cause", err)
	}
}

func TestSleepCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep canceled while waiting = %v, want context.Canceled", err)
	}
}

func TestSleepWaits(t *testing.T) {
	t.Parallel()
	if err := Sleep(t.Context(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v, want nil", err)
	}
}

func TestRetrySleepExhausted(t *testing.T) {
	t.Parallel()
	r := Policy{Initial: time.Millisecond, MaxRetries: 1}.Start()
	if err := r.Sleep(t.Context()); err != nil {
		t.Fatalf("first Sleep = %v, want nil", err)
	}
	if err := r.Sleep(t.Context()); !errors.Is(err, ErrExhausted) {
		t.Errorf("second Sleep with MaxRetries 1 = %v, want ErrExhausted", err)
	}
	// Exhausted: returns at once even with an hour-long wait configured.
	r = Policy{Initial: time.Hour, Timeout: time.Minute}.Start()
	if err := r.Sleep(t.Context()); !errors.Is(err, ErrExhausted) {
		t.Errorf("Sleep past the timeout = %v, want ErrExhausted", err)
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	fixed := Policy{Initial: 50 * time.Millisecond, Max: 10 * time.Second}
	for n, want := range map[int]time.Duration{1: 50 * time.Millisecond, 3: 200 * time.Millisecond, 20: 10 * time.Second} {
		if got := fixed.Delay(n); got != want {
			t.Errorf("Delay(%d) without jitter = %v, want %v", n, got, want)
		}
	}
	jittered := Exponential(50*time.Millisecond, 10*time.Second)
	jittered.MaxRetries, jittered.Timeout = 1, time.Nanosecond // ignored by Delay
	for n := 1; n <= 20; n++ {
		if d := jittered.Delay(n); d < 0 || d > jittered.Cap(n) {
			t.Fatalf("jittered Delay(%d) = %v, want within [0, %v]", n, d, jittered.Cap(n))
		}
	}
}
