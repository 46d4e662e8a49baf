package supervisor

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/metrics"
)

// testBatch encodes a batch of records records at offset 0 with timestamp
// ts (ms); logAppend makes it a LogAppendTime batch.
func testBatch(tb testing.TB, records int, ts int64, logAppend bool) batch.Batch {
	tb.Helper()
	recs := make([]batch.Record, records)
	for i := range recs {
		recs[i] = batch.Record{Offset: int64(i), Timestamp: ts, Value: []byte("v")}
	}
	opts := batch.EncodeOptions{}
	if logAppend {
		opts.LogAppendTime = ts
	}
	b, err := batch.Encode(opts, recs)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

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
	now := time.Now().UnixMilli()
	b1, b2, b3, b4 := testBatch(t, 10, now, false), testBatch(t, 1, now, false), testBatch(t, 3, now, true), testBatch(t, 1, now, true)
	newMirrorEvents(a).Appended(b1, 10)
	newMirrorEvents(a).Appended(b2, 1)
	newMirrorEvents(b).Appended(b3, 3)
	newMirrorEvents(a).Appended(b4, 1) // a runner built again
	for _, c := range []struct {
		name, mirror string
		want         float64
	}{
		{"kmirror_mirrored_bytes_total", "a", float64(len(b1) + len(b2) + len(b4))},
		{"kmirror_mirrored_batches_total", "a", 3},
		{"kmirror_mirrored_offsets_total", "a", 12},
		{"kmirror_mirrored_bytes_total", "b", float64(len(b3))},
		{"kmirror_mirrored_batches_total", "b", 1},
		{"kmirror_mirrored_offsets_total", "b", 3},
	} {
		v, ok, err := mp.Value(c.name, map[string]string{"mirror": c.mirror})
		if err != nil || !ok || v != c.want {
			t.Errorf("%s{mirror=%q} = %v (found %v, err %v), want %v", c.name, c.mirror, v, ok, err, c.want)
		}
	}
	// Each data batch's end-to-end latency is recorded once, under the
	// type of its timestamp.
	for _, c := range []struct {
		mirror, ts string
		want       uint64
	}{{"a", "create_time", 2}, {"a", "log_append_time", 1}, {"b", "log_append_time", 1}} {
		if n := histogramCount(t, mp, "kmirror_end_to_end_latency_seconds", map[string]string{"mirror": c.mirror, "timestamp": c.ts}); n != c.want {
			t.Errorf("kmirror_end_to_end_latency_seconds{mirror=%q,timestamp=%q}: %d samples, want %d", c.mirror, c.ts, n, c.want)
		}
	}
}

// histogramCount returns the sample count of the histogram series of name
// whose labels include labels; 0 when there is none.
func histogramCount(t *testing.T, mp *metrics.Provider, name string, labels map[string]string) uint64 {
	t.Helper()
	fams, err := mp.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == k && l.GetValue() == v
				}
				if !found {
					continue series
				}
			}
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// BenchmarkEventsAppended measures what the engine does for every batch a
// runner appends (runner.Events.Appended): the mirror's byte, batch and
// offset counters and the end-to-end latency histogram. It runs on every batch of every partition, so it must
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
	bt := testBatch(b, 16, time.Now().UnixMilli(), false)
	b.ReportAllocs()
	for b.Loop() {
		ev.Appended(bt, 16)
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
	bt := testBatch(b, 16, time.Now().UnixMilli(), false)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ev := newMirrorEvents(m) // one runner per goroutine
		for pb.Next() {
			ev.Appended(bt, 16)
		}
	})
}
