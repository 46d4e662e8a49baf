package metrics

import (
	"testing"
	"time"
)

// histogram returns the sample count and sum of histogram name whose labels
// include labels.
func histogram(t *testing.T, p *Provider, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	fams, err := p.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) && m.GetHistogram() != nil {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatalf("no histogram %s%v", name, labels)
	return 0, 0
}

func value(t *testing.T, p *Provider, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok, err := p.Value(name, labels)
	if err != nil || !ok {
		t.Fatalf("%s%v: found %v, err %v", name, labels, ok, err)
	}
	return v
}

func TestDataPathMetrics(t *testing.T) {
	t.Parallel()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.NewDataPath("m1")
	if err != nil {
		t.Fatal(err)
	}
	b1 := map[string]string{"mirror": "m1", "broker": "1"}

	d.ProduceSent(1)
	d.ProduceSent(1)
	d.ProduceSent(2)
	if v := value(t, p, "kmirror_produce_requests_in_flight", b1); v != 2 {
		t.Errorf("produce requests in flight on broker 1 = %v, want 2", v)
	}
	d.ProduceDone(1, 3*time.Millisecond, 2, 1000, false)
	d.ProduceDone(1, 5*time.Millisecond, 1, 500, true)
	if v := value(t, p, "kmirror_produce_requests_in_flight", b1); v != 0 {
		t.Errorf("produce requests in flight on broker 1 = %v after both answers, want 0", v)
	}
	if v := value(t, p, "kmirror_produce_requests_in_flight", map[string]string{"broker": "2"}); v != 1 {
		t.Errorf("produce requests in flight on broker 2 = %v, want 1", v)
	}
	if v := value(t, p, "kmirror_produce_bytes_total", b1); v != 1500 {
		t.Errorf("produce bytes = %v, want 1500", v)
	}
	for result, want := range map[string]float64{"ok": 1, "error": 1} {
		if v := value(t, p, "kmirror_produce_requests_total", map[string]string{"mirror": "m1", "broker": "1", "result": result}); v != want {
			t.Errorf("produce requests %s = %v, want %v", result, v, want)
		}
	}
	if n, sum := histogram(t, p, "kmirror_produce_request_latency_seconds", b1); n != 2 || sum < 0.0079 || sum > 0.0081 {
		t.Errorf("produce latency histogram: %d samples, sum %v s; want 2 and 0.008", n, sum)
	}
	if n, sum := histogram(t, p, "kmirror_produce_request_partitions", b1); n != 2 || sum != 3 {
		t.Errorf("produce partitions histogram: %d samples, sum %v; want 2 and 3", n, sum)
	}

	d.FetchDone(7, 500*time.Millisecond, 4096, false, false)
	d.FetchDone(7, time.Second, 0, false, true)
	d.FetchDone(7, 2*time.Millisecond, 100, true, false)
	b7 := map[string]string{"mirror": "m1", "broker": "7"}
	if v := value(t, p, "kmirror_fetch_bytes_total", b7); v != 4196 {
		t.Errorf("fetch bytes = %v, want 4196", v)
	}
	if v := value(t, p, "kmirror_fetch_requests_total", map[string]string{"broker": "7", "result": "error"}); v != 1 {
		t.Errorf("failed fetch requests = %v, want 1", v)
	}
	if n, sum := histogram(t, p, "kmirror_fetch_request_latency_seconds", map[string]string{"mirror": "m1", "broker": "7", "type": "long_poll"}); n != 2 || sum != 1.5 {
		t.Errorf("long poll latency histogram: %d samples, sum %v s; want 2 and 1.5", n, sum)
	}
	if n, _ := histogram(t, p, "kmirror_fetch_request_latency_seconds", map[string]string{"mirror": "m1", "broker": "7", "type": "release"}); n != 1 {
		t.Errorf("release fetch latency histogram: %d samples, want 1", n)
	}

	// The fetcher's and writer's figures are read at collection, until stop.
	observed := []string{"kmirror_fetch_requests_in_flight", "kmirror_fetch_buffered_bytes", "kmirror_fetch_partition_max_bytes", "kmirror_appends_in_flight"}
	for _, name := range observed {
		if _, ok, _ := p.Value(name, nil); ok {
			t.Errorf("%s shown before Observe", name)
		}
	}
	st := DataPathStats{FetchesInFlight: 3, BufferedBytes: 1 << 20, PartitionMaxBytes: 65536, AppendsInFlight: 5}
	stop := d.Observe(func() DataPathStats { return st })
	m1 := map[string]string{"mirror": "m1"}
	for i, want := range []float64{3, 1 << 20, 65536, 5} {
		if v := value(t, p, observed[i], m1); v != want {
			t.Errorf("%s = %v, want %v", observed[i], v, want)
		}
	}
	st.BufferedBytes = 42
	if v := value(t, p, "kmirror_fetch_buffered_bytes", m1); v != 42 {
		t.Errorf("fetch buffered bytes = %v, want 42", v)
	}
	// The mirror started again observes its new data path; the previous
	// run's stop, late, leaves it in place.
	stop2 := d.Observe(func() DataPathStats { return DataPathStats{AppendsInFlight: 7} })
	stop()
	if v := value(t, p, "kmirror_appends_in_flight", m1); v != 7 {
		t.Errorf("appends in flight after the previous run's stop = %v, want 7", v)
	}
	stop2()
	for _, name := range observed {
		if _, ok, _ := p.Value(name, nil); ok {
			t.Errorf("%s still shown after stop", name)
		}
	}
	// A second data path of the same mirror (a restart) adds to the counters.
	d2, err := p.NewDataPath("m1")
	if err != nil {
		t.Fatal(err)
	}
	d2.ProduceSent(1)
	d2.ProduceDone(1, time.Millisecond, 1, 10, false)
	if v := value(t, p, "kmirror_produce_bytes_total", b1); v != 1510 {
		t.Errorf("produce bytes after a restart = %v, want 1510", v)
	}
}

// Recording a request allocates nothing once its broker was seen.
func TestDataPathRecordingDoesNotAllocate(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside a
	// parallel test, whose allocations it would count.
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.NewDataPath("m1")
	if err != nil {
		t.Fatal(err)
	}
	d.ProduceSent(1)
	d.ProduceDone(1, time.Millisecond, 1, 1, false)
	d.FetchDone(1, time.Millisecond, 1, false, false)
	if n := testing.AllocsPerRun(100, func() {
		d.ProduceSent(1)
		d.ProduceDone(1, time.Millisecond, 4, 16384, false)
		d.FetchDone(1, time.Millisecond, 16384, false, false)
		d.FetchDone(1, time.Millisecond, 0, true, false)
	}); n != 0 {
		t.Errorf("recording a produce and a fetch request allocates %v times, want 0", n)
	}
}
