package metrics

import (
	"sync"
	"time"
)

// RateWindow is the span the rate gauges (kmirror_min_fetch_rate,
// kmirror_replication_byte_rate) average over, like the one-minute rate
// of Kafka's meters. The rate is taken when metrics are collected, from a
// count and its value at an earlier collection: the newest one at least
// RateWindow old, or the oldest kept (the count's creation at first), so
// a scrape interval longer than the window averages over that interval.
const RateWindow = time.Minute

// rateSample is a count's value at one collection.
type rateSample struct {
	at time.Time
	n  int64
}

// windowRate turns a monotonic count into a per-second rate over about the
// last RateWindow, sampled at collections: the hot path keeps only its
// atomic count, and the rate costs nothing between scrapes.
type windowRate struct {
	mu      sync.Mutex
	samples []rateSample // oldest first; never empty
}

// newWindowRate returns a rate of a count that was 0 at since.
func newWindowRate(since time.Time) *windowRate {
	return &windowRate{samples: []rateSample{{at: since}}}
}

// rate records that the count is n at now and returns its rate per second
// since the baseline sample; 0 when no time has passed.
func (w *windowRate) rate(now time.Time, n int64) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	base := 0
	for i := len(w.samples) - 1; i >= 0; i-- {
		if now.Sub(w.samples[i].at) >= RateWindow {
			base = i
			break
		}
	}
	w.samples = append(w.samples[base:], rateSample{at: now, n: n})
	b := w.samples[0]
	dt := now.Sub(b.at).Seconds()
	if dt <= 0 || n < b.n {
		return 0
	}
	return float64(n-b.n) / dt
}
