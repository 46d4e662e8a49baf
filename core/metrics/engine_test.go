package metrics

import (
	"math"
	"testing"
)

// The engine's gauges read its source at collection: partitions per state
// (0 for a state none is in), FAILED partitions, the largest lag, each
// partition's known lag, the budget and the throttle (-1: unlimited).
func TestEngineGaugesReadTheirSource(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewEngine(p, EngineSource{
		Mirrors: func() []MirrorSample {
			return []MirrorSample{{Mirror: "dc1", Partitions: []PartitionSample{
				{Topic: "orders", Partition: 0, State: "MIRRORING", Lag: 5},
				{Topic: "orders", Partition: 1, State: "FAILED", Lag: -1},
			}}}
		},
		States: []string{"MIRRORING", "FAILED", "PAUSED"}, Failed: "FAILED",
		BudgetMax: func() int64 { return 100 }, BudgetReserved: func() int64 { return 7 },
		ThrottleRate: func() int64 { return math.MaxInt64 },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kmirror_partition_state", map[string]string{"mirror": "dc1", "state": "MIRRORING"}, 1},
		{"kmirror_partition_state", map[string]string{"mirror": "dc1", "state": "PAUSED"}, 0},
		{"kmirror_failed_partitions_count", map[string]string{"mirror": "dc1"}, 1},
		{"kmirror_max_lag", map[string]string{"mirror": "dc1"}, 5},
		{"kmirror_consumer_lag", map[string]string{"mirror": "dc1", "topic": "orders", "partition": "0"}, 5},
		{"kmirror_fetch_buffer_max_bytes", nil, 100},
		{"kmirror_fetch_buffer_reserved_bytes", nil, 7},
		{"kmirror_replication_throttle_byte_rate", nil, -1},
	} {
		if v := value(t, p, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if _, ok, _ := p.Value("kmirror_consumer_lag", map[string]string{"partition": "1"}); ok {
		t.Error("kmirror_consumer_lag shows a partition whose lag is unknown")
	}
}

// Appended batches are counted per mirror, and a mirror's counts are the
// same however often they are asked for (a runner built again).
func TestEngineCountsAppendsPerMirror(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(p, EngineSource{Mirrors: func() []MirrorSample { return nil },
		BudgetMax: func() int64 { return 0 }, BudgetReserved: func() int64 { return 0 }, ThrottleRate: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	e.AppendCountsOf("a").Appended(100, 10)
	e.AppendCountsOf("a").Appended(50, 1)
	if v := value(t, p, "kmirror_mirrored_bytes_total", map[string]string{"mirror": "a"}); v != 150 {
		t.Errorf("kmirror_mirrored_bytes_total = %v, want 150", v)
	}
	if v := value(t, p, "kmirror_mirrored_batches_total", map[string]string{"mirror": "a"}); v != 2 {
		t.Errorf("kmirror_mirrored_batches_total = %v, want 2", v)
	}
}
