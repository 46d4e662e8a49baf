package metrics

import (
	"testing"
	"time"
)

// A duration lands in the first bucket whose bound is at or above it
// (Prometheus's le); the snapshot is cumulative, its count the
// observations', its sum theirs in seconds.
func TestDurationHistogram(t *testing.T) {
	t.Parallel()
	bounds := []float64{0.001, 0.01, 1}
	h := newDurationHistogram(bounds)
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond, time.Second, time.Hour} {
		h.observe(d)
	}
	count, sum, buckets := h.snapshot(bounds)
	if count != 6 {
		t.Errorf("count = %d, want 6", count)
	}
	if want := (time.Hour + time.Second + 13*time.Millisecond).Seconds(); sum != want {
		t.Errorf("sum = %v, want %v", sum, want)
	}
	for b, want := range map[float64]uint64{0.001: 2, 0.01: 4, 1: 5} {
		if buckets[b] != want {
			t.Errorf("bucket le=%v = %d, want %d", b, buckets[b], want)
		}
	}
}

// The end-to-end latency is exported with its mirror and timestamp type,
// from the batch's timestamp to now; a timestamp in the future counts as
// 0 and a missing one (-1) not at all.
func TestEndToEndLatencyIsExported(t *testing.T) {
	t.Parallel()
	p, clock := newClockedProvider(t)
	e, err := NewEngine(p, EngineSource{Mirrors: func() []MirrorSample { return nil },
		BudgetMax: func() int64 { return 0 }, BudgetReserved: func() int64 { return 0 }, ThrottleRate: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	a := e.AppendCountsOf("dc1")
	now := clock.Now().UnixMilli()
	a.Landed(now-250, true)  // 0.25 s
	a.Landed(now-2000, true) // 2 s
	a.Landed(now+5000, false)
	a.Landed(-1, false)
	n, sum := histogram(t, p, "kmirror_end_to_end_latency_seconds", map[string]string{"mirror": "dc1", "timestamp": "log_append_time"})
	if n != 2 || sum != 2.25 {
		t.Errorf("log_append_time: %d samples summing to %v, want 2 summing to 2.25", n, sum)
	}
	n, sum = histogram(t, p, "kmirror_end_to_end_latency_seconds", map[string]string{"mirror": "dc1", "timestamp": "create_time"})
	if n != 1 || sum != 0 {
		t.Errorf("create_time: %d samples summing to %v, want 1 (the future timestamp) summing to 0", n, sum)
	}
	// A second engine on the same provider (a test's restarted engine)
	// takes over the histogram's series.
	if _, err := NewEngine(p, EngineSource{Mirrors: func() []MirrorSample { return nil },
		BudgetMax: func() int64 { return 0 }, BudgetReserved: func() int64 { return 0 }, ThrottleRate: func() int64 { return 0 }}); err != nil {
		t.Fatalf("a second engine on the provider: %v", err)
	}
	if _, err := p.Gather(); err != nil {
		t.Fatal(err)
	}
}
