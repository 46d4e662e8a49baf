package mirror

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// scraped returns the value of the sample of name whose labels include
// labels, failing the test when there is none.
func scraped(t *testing.T, mp *metrics.Provider, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok, err := mp.Value(name, labels)
	if err != nil || !ok {
		t.Fatalf("%s%v: found %v, err %v", name, labels, ok, err)
	}
	return v
}

// After a mirror copied a topic, /metrics says what happened: the bytes
// mirrored are the bytes of the batches on the destination, the state
// gauges sum to the partitions, each data batch's end-to-end latency was
// recorded, the clients dialled both clusters and read and wrote bytes,
// the fetch and replication rates are non-zero, and no goroutine died.
func TestMetricsMoveWithMirroring(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "moves", 3)
	f.produce(t, "moves", 120, "tx-moves")
	e := startEngine(t, f.config(t, "moves"), memstore.New())
	f.waitMirrored(t, e, "moves", 3)
	mp := e.opts.Metrics

	var bytes, dataBatches int
	for p := range int32(3) {
		_, _, bs, err := verify.ReadBatches(kfaketest.Context(t), f.dstCl, "moves", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			bytes += len(b)
			if !b.IsControl() {
				dataBatches++
			}
		}
	}
	test := map[string]string{"mirror": "test"}
	// The last batch's count follows its acknowledgement, which the
	// partition's status (waitMirrored) may show first.
	kfaketest.WaitFor(t, "kmirror_mirrored_bytes_total to reach the destination's bytes", func() (bool, string) {
		v := scraped(t, mp, "kmirror_mirrored_bytes_total", test)
		return v == float64(bytes), fmt.Sprintf("%v of %d bytes", v, bytes)
	})

	if v := scraped(t, mp, "kmirror_partitions", test); v != 3 {
		t.Errorf("kmirror_partitions = %v, want 3", v)
	}
	var sum float64
	fams, err := mp.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var latencyCount uint64
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case fam.GetName() == "kmirror_partition_state" && labels["mirror"] == "test":
				sum += m.GetGauge().GetValue()
			case fam.GetName() == "kmirror_end_to_end_latency_seconds" && labels["mirror"] == "test":
				latencyCount += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if sum != 3 {
		t.Errorf("kmirror_partition_state{mirror=test} sums to %v, want 3", sum)
	}
	if latencyCount != uint64(dataBatches) {
		t.Errorf("kmirror_end_to_end_latency_seconds{mirror=test}: %d samples, want one per data batch on the destination (%d)", latencyCount, dataBatches)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"kmirror_mirror_topic_count", test, 1},
		{"kmirror_client_dials_total", map[string]string{"cluster": "source", "mirror": "test", "result": "ok"}, 1},
		{"kmirror_client_dials_total", map[string]string{"cluster": "destination", "mirror": "", "result": "ok"}, 1},
		{"kmirror_client_connections", map[string]string{"cluster": "source", "mirror": "test"}, 1},
		{"kmirror_client_incoming_bytes_total", map[string]string{"cluster": "source", "mirror": "test"}, float64(bytes)},
		{"kmirror_client_outgoing_bytes_total", map[string]string{"cluster": "destination", "mirror": ""}, float64(bytes)},
		{"kmirror_client_requests_total", map[string]string{"cluster": "source", "mirror": "test", "api": "Fetch", "result": "ok"}, 1},
		{"kmirror_client_requests_total", map[string]string{"cluster": "destination", "mirror": "", "api": "Produce", "result": "ok"}, 1},
		{"kmirror_min_fetch_rate", test, 1e-9},
		{"kmirror_replication_byte_rate", test, 1e-9},
	} {
		if v := scraped(t, mp, c.name, c.labels); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	if v := scraped(t, mp, "kmirror_dead_thread_count", test); v != 0 {
		t.Errorf("kmirror_dead_thread_count = %v, want 0", v)
	}
	if v := scraped(t, mp, "kmirror_client_authentication_failures_total", map[string]string{"cluster": "source", "mirror": "test"}); v != 0 {
		t.Errorf("kmirror_client_authentication_failures_total = %v without SASL, want 0", v)
	}
}

// With metrics.partition.series.enable off, a mirroring engine exports no
// series with a partition; a reload that turns it on brings them back
// without restarting the mirror.
func TestPartitionSeriesFollowTheConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "quiet", 2)
	f.produce(t, "quiet", 20, "tx-quiet")
	cfg := f.config(t, "quiet")
	cfg.MetricsPartitionSeries = false
	e := startEngine(t, cfg, memstore.New())
	f.waitMirrored(t, e, "quiet", 2)
	mp := e.opts.Metrics
	if _, ok, _ := mp.Value("kmirror_consumer_lag", map[string]string{"mirror": "test"}); ok {
		t.Error("kmirror_consumer_lag is exported with metrics.partition.series.enable off")
	}
	if v := scraped(t, mp, "kmirror_max_lag", map[string]string{"mirror": "test"}); v != 0 {
		t.Errorf("kmirror_max_lag = %v once mirrored, want 0", v)
	}
	on := f.config(t, "quiet")
	if err := e.Reload(kfaketest.Context(t), on); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		if v := scraped(t, mp, "kmirror_consumer_lag", map[string]string{"mirror": "test", "topic": "quiet", "partition": fmt.Sprint(p)}); v != 0 {
			t.Errorf("kmirror_consumer_lag{partition=%d} = %v after the reload, want 0", p, v)
		}
	}
}
