package supervisor

import (
	"testing"

	"github.com/kmirror/kmirror/core/metrics"
)

// newEngineMetrics returns the engine's instruments on mp, with gauges
// that read nothing.
func newEngineMetrics(mp *metrics.Provider) (*metrics.Engine, error) {
	zero := func() int64 { return 0 }
	return metrics.NewEngine(mp, metrics.EngineSource{Mirrors: func() []metrics.MirrorSample { return nil }, BudgetMax: zero, BudgetReserved: zero, ThrottleRate: zero})
}

// Appended batches are counted per mirror on /metrics, summed over the
// mirror's runners, and a runner created again (a restart) adds to the same
// counts.
func TestAppendedCountsPerMirror(t *testing.T) {
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngineMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	a, b := &Mirror{d: Deps{Instruments: e}, name: "a"}, &Mirror{d: Deps{Instruments: e}, name: "b"}
	newMirrorEvents(a).Appended(100, 10)
	newMirrorEvents(a).Appended(50, 1)
	newMirrorEvents(b).Appended(7, 3)
	newMirrorEvents(a).Appended(1, 1) // a runner built again
	for _, c := range []struct {
		name, mirror string
		want         float64
	}{
		{"kmirror_mirrored_bytes_total", "a", 151},
		{"kmirror_mirrored_batches_total", "a", 3},
		{"kmirror_mirrored_offsets_total", "a", 12},
		{"kmirror_mirrored_bytes_total", "b", 7},
		{"kmirror_mirrored_batches_total", "b", 1},
		{"kmirror_mirrored_offsets_total", "b", 3},
	} {
		v, ok, err := mp.Value(c.name, map[string]string{"mirror": c.mirror})
		if err != nil || !ok || v != c.want {
			t.Errorf("%s{mirror=%q} = %v (found %v, err %v), want %v", c.name, c.mirror, v, ok, err, c.want)
		}
	}
}

// BenchmarkEventsAppended measures what the engine does for every batch a
// runner appends (runner.Events.Appended): the mirror's byte, batch and
// offset counters. It runs on every batch of every partition, so it must
// not allocate.
func BenchmarkEventsAppended(b *testing.B) {
	mp, err := metrics.New()
	if err != nil {
		b.Fatal(err)
	}
	e, err := newEngineMetrics(mp)
	if err != nil {
		b.Fatal(err)
	}
	ev := newMirrorEvents(&Mirror{d: Deps{Instruments: e}, name: "bench"})
	b.ReportAllocs()
	for b.Loop() {
		ev.Appended(16<<10, 16)
	}
}

// BenchmarkEventsAppendedParallel is BenchmarkEventsAppended with runners
// of one mirror appending on every core at once (the counts are shared).
func BenchmarkEventsAppendedParallel(b *testing.B) {
	mp, err := metrics.New()
	if err != nil {
		b.Fatal(err)
	}
	e, err := newEngineMetrics(mp)
	if err != nil {
		b.Fatal(err)
	}
	m := &Mirror{d: Deps{Instruments: e}, name: "bench"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ev := newMirrorEvents(m) // one runner per goroutine
		for pb.Next() {
			ev.Appended(16<<10, 16)
		}
	})
}
