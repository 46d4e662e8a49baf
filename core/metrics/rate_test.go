package metrics

import (
	"math"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newClockedProvider returns a provider whose rate gauges read clock.
func newClockedProvider(t *testing.T) (*Provider, *fakeClock) {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	p.now = clock.Now
	return p, clock
}

// A rate is the count's growth over about the last minute: since the
// count began while younger, then since the newest collection a minute
// old, so that what happened before drops out.
func TestWindowRate(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	w := newWindowRate(t0)
	check := func(at time.Duration, n int64, want float64) {
		t.Helper()
		if got := w.rate(t0.Add(at), n); math.Abs(got-want) > 1e-9 {
			t.Errorf("rate at %s with count %d = %v, want %v", at, n, got, want)
		}
	}
	check(10*time.Second, 100, 10)          // since the start: (100-0)/10 s
	check(30*time.Second, 300, 10)          // since the start: (300-0)/30 s
	check(70*time.Second, 500, 400.0/60)    // since 10 s, the newest collection at least a minute old
	check(95*time.Second, 500, 200.0/65)    // since 30 s
	check(160*time.Second, 500, 0)          // since 95 s: nothing since
	check(400*time.Second, 1100, 600.0/240) // a long pause: since the last collection
}

// kmirror_replication_byte_rate is the bytes appended per second over the
// last minute, next to the configured throttle.
func TestReplicationByteRateIsMeasured(t *testing.T) {
	t.Parallel()
	p, clock := newClockedProvider(t)
	e, err := NewEngine(p, EngineSource{Mirrors: func() []MirrorSample { return nil },
		BudgetMax: func() int64 { return 0 }, BudgetReserved: func() int64 { return 0 }, ThrottleRate: func() int64 { return 5 << 20 }})
	if err != nil {
		t.Fatal(err)
	}
	a := e.AppendCountsOf("dc1")
	clock.Add(10 * time.Second)
	for range 10 {
		a.Appended(1<<20, 100)
	}
	dc1 := map[string]string{"mirror": "dc1"}
	if v := value(t, p, "kmirror_replication_byte_rate", dc1); v != 1<<20 {
		t.Errorf("kmirror_replication_byte_rate = %v after 10 MiB in 10 s, want %v", v, 1<<20)
	}
	if v := value(t, p, "kmirror_replication_throttle_byte_rate", nil); v != 5<<20 {
		t.Errorf("kmirror_replication_throttle_byte_rate = %v, want the configured %v", v, 5<<20)
	}
	clock.Add(2 * time.Minute) // nothing appended since
	value(t, p, "kmirror_replication_byte_rate", dc1)
	clock.Add(10 * time.Second)
	if v := value(t, p, "kmirror_replication_byte_rate", dc1); v != 0 {
		t.Errorf("kmirror_replication_byte_rate = %v after two idle minutes, want 0", v)
	}
}

// kmirror_min_fetch_rate is the fetch rate of the slowest source broker
// the mirror fetched from in the last minute; a broker it no longer
// fetches from drops out.
func TestMinFetchRateIsTheSlowestBrokers(t *testing.T) {
	t.Parallel()
	p, clock := newClockedProvider(t)
	d, err := p.NewDataPath("dc1")
	if err != nil {
		t.Fatal(err)
	}
	stop := d.Observe(func() DataPathStats { return DataPathStats{} })
	defer stop()
	dc1 := map[string]string{"mirror": "dc1"}
	if v := value(t, p, "kmirror_min_fetch_rate", dc1); v != 0 {
		t.Errorf("kmirror_min_fetch_rate = %v before any fetch, want 0", v)
	}
	for range 50 {
		d.FetchDone(1, time.Millisecond, 10, false, false)
	}
	for range 20 {
		d.FetchDone(2, time.Millisecond, 10, false, false)
	}
	d.FetchDone(2, time.Millisecond, 0, false, true) // a failed request is a request
	clock.Add(10 * time.Second)
	if v := value(t, p, "kmirror_min_fetch_rate", dc1); math.Abs(v-2.1) > 1e-9 {
		t.Errorf("kmirror_min_fetch_rate = %v, want broker 2's 21 requests in 10 s (2.1/s)", v)
	}
	// Broker 2 leads nothing any more: a minute later only broker 1
	// counts, its rate since the collection a minute before.
	clock.Add(61 * time.Second)
	for range 71 {
		d.FetchDone(1, time.Millisecond, 10, false, false)
	}
	if v := value(t, p, "kmirror_min_fetch_rate", dc1); math.Abs(v-71.0/61) > 1e-9 {
		t.Errorf("kmirror_min_fetch_rate = %v, want broker 1's %v (broker 2 fetched nothing for a minute)", v, 71.0/61)
	}
}
