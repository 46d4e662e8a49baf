package metrics

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// EngineSource is what the engine's gauges read when metrics are
// collected. Every field is required.
type EngineSource struct {
	// Mirrors returns every running mirror and its partitions.
	Mirrors func() []MirrorSample
	// States names every partition state, so that a state no partition
	// is in shows 0.
	States []string
	// Failed names the FAILED state.
	Failed string
	// BudgetMax and BudgetReserved read the daemon-wide fetch budget
	// (mirror.buffer.max.bytes).
	BudgetMax, BudgetReserved func() int64
	// ThrottleRate reads the daemon-wide throttle in bytes/s;
	// math.MaxInt64 when unlimited.
	ThrottleRate func() int64
}

// MirrorSample is one mirror's partitions when metrics are collected.
type MirrorSample struct {
	Mirror     string
	Partitions []PartitionSample
	// Clusters are whether the mirror can talk to its clusters now.
	Clusters []ClusterSample
}

// ClusterSample is whether a mirror can talk to one of its clusters
// ("source" or "destination") when metrics are collected.
type ClusterSample struct {
	Cluster string
	Up      bool
}

// PartitionSample is one partition's state and lag when metrics are
// collected; Lag is negative while unknown.
type PartitionSample struct {
	Topic     string
	Partition int32
	State     string
	Lag       int64
}

// Engine holds the mirroring engine's metrics; the per-mirror data-path
// figures (produce and fetch requests, bytes buffered and appends in flight)
// are DataPath's. Names follow KIP-1279's (MaxLag, ConsumerLag,
// FailedPartitionsCount, <State>PartitionState, BytesPerSec, ByteRate) in
// Prometheus form; docs/operations.md has the mapping.
type Engine struct {
	transitions metric.Int64Counter
	mdErrors    metric.Int64Counter
	cfgErrors   metric.Int64Counter
	mismatches  metric.Int64Counter

	// appends holds each mirror's per-batch counts (mirrored.bytes,
	// .batches, .offsets), read by observable counters when metrics are
	// collected; entries are never removed, so the counters stay monotonic
	// across a mirror's restarts.
	appendsMu sync.Mutex
	appends   map[string]*AppendCounts
}

// AppendCounts are one mirror's counts of appended batches. They are
// atomics rather than synchronous OpenTelemetry counters because they move
// on every batch of every partition: a batch costs three atomic adds, and
// the SDK's aggregation runs once per collection instead.
type AppendCounts struct {
	bytes, batches, offsets atomic.Int64
	attrs                   metric.ObserveOption // {mirror}, built once
}

// NewEngine creates the engine's instruments on p; their gauges read src.
func NewEngine(p *Provider, src EngineSource) (*Engine, error) {
	// The meter keeps the engine package's name, which the instruments
	// had before they moved here.
	m := p.Meter("github.com/kmirror/kmirror/core/mirror")
	in := &Engine{}
	var err error
	if in.transitions, err = m.Int64Counter("partition.state.transitions", metric.WithDescription("Partition state transitions, by mirror, from and to state.")); err != nil {
		return nil, err
	}
	in.appends = map[string]*AppendCounts{}
	for _, c := range []struct {
		name, doc string
		value     func(*AppendCounts) int64
	}{
		{"mirrored.bytes", "Bytes of record batches appended to the destination (KIP-1279 FetcherStats BytesPerSec as a counter), by mirror.", func(a *AppendCounts) int64 { return a.bytes.Load() }},
		{"mirrored.batches", "Record batches (data and control) appended to the destination, by mirror.", func(a *AppendCounts) int64 { return a.batches.Load() }},
		{"mirrored.offsets", "Source offsets mirrored (records and markers), by mirror.", func(a *AppendCounts) int64 { return a.offsets.Load() }},
	} {
		_, err = m.Int64ObservableCounter(c.name, metric.WithDescription(c.doc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				in.appendsMu.Lock()
				defer in.appendsMu.Unlock()
				for _, a := range in.appends {
					o.Observe(c.value(a), a.attrs)
				}
				return nil
			}))
		if err != nil {
			return nil, err
		}
	}
	if in.mdErrors, err = m.Int64Counter("metadata.refresh.error", metric.WithDescription("Failed rounds of the topics sync loop (KIP-1279 MetadataRefreshError), by mirror.")); err != nil {
		return nil, err
	}
	if in.cfgErrors, err = m.Int64Counter("topic.config.metadata.sync.error", metric.WithDescription("Topic configs the destination rejected, and failed rounds of the topic config sync loop (KIP-1279 TopicConfigMetadataSyncError), by mirror.")); err != nil {
		return nil, err
	}
	if in.mismatches, err = m.Int64Counter("destination.mismatches", metric.WithDescription("Destination partitions found to differ from their source before continuing (a foreign record, an ABORT where the source committed, data beyond the source's end), by mirror, topic, partition and the action taken (map or fail).")); err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("partition.state",
		metric.WithDescription("Partitions per state (KIP-1279 <State>PartitionState), by mirror and state."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range src.Mirrors() {
				counts := map[string]int64{}
				for _, s := range src.States {
					counts[s] = 0
				}
				for _, p := range ms.Partitions {
					counts[p.State]++
				}
				for s, n := range counts {
					o.Observe(n, metric.WithAttributes(attribute.String("mirror", ms.Mirror), attribute.String("state", s)))
				}
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("failed.partitions.count",
		metric.WithDescription("FAILED partitions (KIP-1279 FailedPartitionsCount), by mirror."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range src.Mirrors() {
				var n int64
				for _, p := range ms.Partitions {
					if p.State == src.Failed {
						n++
					}
				}
				o.Observe(n, metric.WithAttributes(attribute.String("mirror", ms.Mirror)))
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("max.lag",
		metric.WithDescription("Largest lag in offsets between a source partition's high watermark and what is mirrored (KIP-1279 MaxLag), by mirror."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range src.Mirrors() {
				var n int64
				for _, p := range ms.Partitions {
					n = max(n, p.Lag)
				}
				o.Observe(n, metric.WithAttributes(attribute.String("mirror", ms.Mirror)))
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("consumer.lag",
		metric.WithDescription("Lag in offsets of one mirrored partition (KIP-1279 FetcherLagMetrics ConsumerLag), by mirror, topic and partition; absent while unknown."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range src.Mirrors() {
				for _, p := range ms.Partitions {
					if p.Lag >= 0 {
						o.Observe(p.Lag, metric.WithAttributes(attribute.String("mirror", ms.Mirror), attribute.String("topic", p.Topic), attribute.Int("partition", int(p.Partition))))
					}
				}
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("fetch.buffer.max.bytes",
		metric.WithUnit("By"),
		metric.WithDescription("The daemon-wide budget of bytes fetched and not yet appended (mirror.buffer.max.bytes)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(src.BudgetMax())
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("fetch.buffer.reserved.bytes",
		metric.WithUnit("By"),
		metric.WithDescription("Bytes of the daemon-wide budget reserved by fetch requests in flight (the most their responses may bring)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(src.BudgetReserved())
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("cluster.up",
		metric.WithDescription("1 while kmirror can talk to the cluster (any broker answers on the mirror's client), 0 while it cannot, by cluster (source or destination) and mirror."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range src.Mirrors() {
				for _, c := range ms.Clusters {
					v := int64(0)
					if c.Up {
						v = 1
					}
					o.Observe(v, metric.WithAttributes(attribute.String("cluster", c.Cluster), attribute.String("mirror", ms.Mirror)))
				}
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("replication.throttled.rate",
		metric.WithDescription("The daemon-wide throttle in bytes/s (KIP-1279 MirrorReplication byte-rate); -1 when unlimited."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			r := src.ThrottleRate()
			if r == math.MaxInt64 {
				r = -1
			}
			o.Observe(r)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return in, nil
}

// Transition counts one partition state transition.
func (in *Engine) Transition(mirror, from, to string) {
	in.transitions.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("mirror", mirror), attribute.String("from", from), attribute.String("to", to)))
}

// AppendCountsOf returns the counts of appended batches of a mirror,
// creating them at the mirror's first runner. A runner keeps the pointer,
// so the per-batch path takes no lock and looks nothing up.
func (in *Engine) AppendCountsOf(mirror string) *AppendCounts {
	in.appendsMu.Lock()
	defer in.appendsMu.Unlock()
	a, ok := in.appends[mirror]
	if !ok {
		a = &AppendCounts{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("mirror", mirror)))}
		in.appends[mirror] = a
	}
	return a
}

// Appended counts one batch appended.
func (a *AppendCounts) Appended(bytes, offsets int64) {
	a.bytes.Add(bytes)
	a.batches.Add(1)
	a.offsets.Add(offsets)
}

// MetadataRefreshError counts a failed round of a mirror's topics loop.
func (in *Engine) MetadataRefreshError(mirror string) {
	in.mdErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror)))
}

// ConfigSyncError counts a topic config the destination rejected, or a
// failed round of a mirror's topic-configs loop.
func (in *Engine) ConfigSyncError(mirror string) {
	in.cfgErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror)))
}

// DestinationMismatch counts a destination partition found to differ from
// its source, and the action taken (map or fail).
func (in *Engine) DestinationMismatch(mirror, topic string, p int32, action string) {
	in.mismatches.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror), attribute.String("topic", topic),
		attribute.Int("partition", int(p)), attribute.String("action", action)))
}
