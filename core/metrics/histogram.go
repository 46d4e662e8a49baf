package metrics

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// durationHistogram is a histogram of durations kept in atomics: an
// observation costs a search of the bounds and two atomic adds, where an
// OpenTelemetry histogram costs about ten times as much (its attribute set
// looked up, a float sum, minimum and maximum updated by compare-and-swap),
// which matters on a per-batch path. It is exported by a Prometheus
// collector on the Provider's registry (endToEndCollector) instead of an
// OpenTelemetry instrument: OpenTelemetry has no observable histogram.
type durationHistogram struct {
	bounds []time.Duration // upper bounds, ascending
	counts []atomic.Uint64 // per bucket, not cumulative; the last one is +Inf
	sum    atomic.Int64    // nanoseconds
}

func newDurationHistogram(boundsSeconds []float64) *durationHistogram {
	h := &durationHistogram{bounds: make([]time.Duration, len(boundsSeconds)), counts: make([]atomic.Uint64, len(boundsSeconds)+1)}
	for i, s := range boundsSeconds {
		h.bounds[i] = time.Duration(s * float64(time.Second))
	}
	return h
}

// observe adds d to the bucket whose upper bound is the first at or above
// it (Prometheus's le).
func (h *durationHistogram) observe(d time.Duration) {
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// snapshot returns the histogram in Prometheus's form: the count, the sum
// in seconds and the cumulative count at each bound (in seconds). The
// count is the buckets' total, so the two always agree; the sum may miss
// an observation made while it was read.
func (h *durationHistogram) snapshot(boundsSeconds []float64) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(boundsSeconds))
	for i, b := range boundsSeconds {
		count += h.counts[i].Load()
		buckets[b] = count
	}
	count += h.counts[len(boundsSeconds)].Load()
	return count, time.Duration(h.sum.Load()).Seconds(), buckets
}

// endToEndCollector exports every mirror's end-to-end latency histograms
// as kmirror_end_to_end_latency_seconds{mirror,timestamp}, from the
// Provider's latest Engine; a mirror's series appear with its first
// observation.
type endToEndCollector struct {
	p    *Provider
	desc *prometheus.Desc
}

// exportEndToEnd makes e the Engine whose end-to-end latency histograms
// /metrics shows, registering their collector at the first call. A later
// Engine on the same Provider (a test's second engine) replaces e.
func (p *Provider) exportEndToEnd(e *Engine) error {
	p.e2eOnce.Do(func() {
		if err := p.registry.Register(newEndToEndCollector(p)); err != nil {
			p.e2eErr = fmt.Errorf("metrics: the end-to-end latency histogram: %w", err)
		}
	})
	p.e2e.Store(e)
	return p.e2eErr
}

// timestampTypes name the end-to-end histograms of a mirror by index.
var timestampTypes = [2]string{"create_time", "log_append_time"}

func newEndToEndCollector(p *Provider) *endToEndCollector {
	return &endToEndCollector{p: p, desc: prometheus.NewDesc(Namespace+"_end_to_end_latency_seconds",
		"Time from a data batch's timestamp on the source to the destination's acknowledgement of its append, by mirror and timestamp "+
			"(log_append_time: the source broker's append time; create_time: the producer's timestamp of the batch's newest record).",
		[]string{"mirror", "timestamp"}, nil)}
}

func (c *endToEndCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *endToEndCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.p.e2e.Load()
	if e == nil {
		return
	}
	for _, a := range e.appendCounts() {
		for i, h := range a.endToEnd {
			count, sum, buckets := h.snapshot(endToEndBuckets)
			if count > 0 {
				ch <- prometheus.MustNewConstHistogram(c.desc, count, sum, buckets, a.mirror, timestampTypes[i])
			}
		}
	}
}
