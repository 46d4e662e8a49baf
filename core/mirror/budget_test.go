package mirror

import (
	"context"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// Every mirror's fetcher shares the engine's budget: a tiny
// mirror.buffer.max.bytes (under one partition's fetch size, so one fetch
// at a time, the sessions taking turns) still mirrors everything,
// the fetch metrics are exposed, and a reload changes the budget in place.
func TestEngineSharesOneFetchBudgetAndExposesFetchMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "budget", 4)
	f.produce(t, "budget", 300, "tx-budget")
	e := startEngine(t, f.config(t, "budget", "mirror.buffer.max.bytes: 4096"), memstore.New())
	f.waitMirrored(t, e, "budget", 4)
	f.verify(t, "budget", 4)

	mp := e.opts.Metrics
	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok, err := mp.Value(name, labels)
		if err != nil || !ok {
			t.Fatalf("%s%v: no sample (%v)", name, labels, err)
		}
		return v
	}
	if v := gauge("kmirror_fetch_buffer_max_bytes", nil); v != 4096 {
		t.Errorf("kmirror_fetch_buffer_max_bytes = %v, want 4096", v)
	}
	if v := gauge("kmirror_fetch_partition_max_bytes", map[string]string{"mirror": "test"}); v != 16384 {
		t.Errorf("kmirror_fetch_partition_max_bytes = %v, want the 16 KiB floor (budget / partitions is less)", v)
	}
	gauge("kmirror_fetch_buffered_bytes", map[string]string{"mirror": "test"})
	gauge("kmirror_fetch_requests_in_flight", map[string]string{"mirror": "test"})
	gauge("kmirror_fetch_buffer_reserved_bytes", nil)
	fams, err := mp.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var fetches uint64
	for _, fam := range fams {
		if fam.GetName() == "kmirror_fetch_request_latency_seconds" {
			for _, m := range fam.GetMetric() {
				fetches += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if fetches == 0 {
		t.Error("kmirror_fetch_request_latency_seconds has no sample")
	}

	if err := e.Reload(context.Background(), f.config(t, "budget", "mirror.buffer.max.bytes: 1048576")); err != nil {
		t.Fatal(err)
	}
	if v := gauge("kmirror_fetch_buffer_max_bytes", nil); v != 1048576 {
		t.Errorf("after reload kmirror_fetch_buffer_max_bytes = %v, want 1048576", v)
	}
	f.produce(t, "budget", 50, "tx-budget-2")
	f.waitMirrored(t, e, "budget", 4)
	f.verify(t, "budget", 4)
}
