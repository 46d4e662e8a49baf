package mirror

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
)

// instruments are the engine's metrics; the per-mirror data-path figures
// (produce and fetch requests, bytes buffered and appends in flight) are
// core/metrics.DataPath's, fed in datapath.go. Names follow KIP-1279's (MaxLag,
// ConsumerLag, FailedPartitionsCount, <State>PartitionState, BytesPerSec,
// ByteRate) in Prometheus form; docs/operations.md has the mapping.
type instruments struct {
	transitions metric.Int64Counter
	mdErrors    metric.Int64Counter
	cfgErrors   metric.Int64Counter
	mismatches  metric.Int64Counter

	// appends holds each mirror's per-batch counts (mirrored.bytes,
	// .batches, .offsets), read by observable counters when metrics are
	// collected; entries are never removed, so the counters stay monotonic
	// across a mirror's restarts.
	appendsMu sync.Mutex
	appends   map[string]*appendCounts
}

// appendCounts are one mirror's counts of appended batches. They are
// atomics rather than synchronous OpenTelemetry counters because they move
// on every batch of every partition: a batch costs three atomic adds, and
// the SDK's aggregation runs once per collection instead.
type appendCounts struct {
	bytes, batches, offsets atomic.Int64
	attrs                   metric.ObserveOption // {mirror}, built once
}

func newInstruments(p *metrics.Provider, e *Engine) (*instruments, error) {
	m := p.Meter("github.com/kmirror/kmirror/core/mirror")
	in := &instruments{}
	var err error
	if in.transitions, err = m.Int64Counter("partition.state.transitions", metric.WithDescription("Partition state transitions, by mirror, from and to state.")); err != nil {
		return nil, err
	}
	in.appends = map[string]*appendCounts{}
	for _, c := range []struct {
		name, doc string
		value     func(*appendCounts) int64
	}{
		{"mirrored.bytes", "Bytes of record batches appended to the destination (KIP-1279 FetcherStats BytesPerSec as a counter), by mirror.", func(a *appendCounts) int64 { return a.bytes.Load() }},
		{"mirrored.batches", "Record batches (data and control) appended to the destination, by mirror.", func(a *appendCounts) int64 { return a.batches.Load() }},
		{"mirrored.offsets", "Source offsets mirrored (records and markers), by mirror.", func(a *appendCounts) int64 { return a.offsets.Load() }},
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
			for _, ms := range e.Status().Mirrors {
				counts := map[string]int64{}
				for _, s := range partition.States() {
					counts[s.String()] = 0
				}
				for _, p := range ms.Partitions {
					counts[p.State]++
				}
				for s, n := range counts {
					o.Observe(n, metric.WithAttributes(attribute.String("mirror", ms.Name), attribute.String("state", s)))
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
			for _, ms := range e.Status().Mirrors {
				var n int64
				for _, p := range ms.Partitions {
					if p.State == partition.Failed.String() {
						n++
					}
				}
				o.Observe(n, metric.WithAttributes(attribute.String("mirror", ms.Name)))
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("max.lag",
		metric.WithDescription("Largest lag in offsets between a source partition's high watermark and what is mirrored (KIP-1279 MaxLag), by mirror."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range e.Status().Mirrors {
				var n int64
				for _, p := range ms.Partitions {
					n = max(n, p.Lag)
				}
				o.Observe(n, metric.WithAttributes(attribute.String("mirror", ms.Name)))
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("consumer.lag",
		metric.WithDescription("Lag in offsets of one mirrored partition (KIP-1279 FetcherLagMetrics ConsumerLag), by mirror, topic and partition; absent while unknown."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, ms := range e.Status().Mirrors {
				for _, p := range ms.Partitions {
					if p.Lag >= 0 {
						o.Observe(p.Lag, metric.WithAttributes(attribute.String("mirror", ms.Name), attribute.String("topic", p.Topic), attribute.Int("partition", int(p.Partition))))
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
			o.Observe(e.budget.Max())
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("fetch.buffer.reserved.bytes",
		metric.WithUnit("By"),
		metric.WithDescription("Bytes of the daemon-wide budget reserved by fetch requests in flight (the most their responses may bring)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(e.budget.Reserved())
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("replication.throttled.rate",
		metric.WithDescription("The daemon-wide throttle in bytes/s (KIP-1279 MirrorReplication byte-rate); -1 when unlimited."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			r := e.limiter.Rate()
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

func (in *instruments) transition(mirror string, from, to partition.State) {
	in.transitions.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("mirror", mirror), attribute.String("from", from.String()), attribute.String("to", to.String())))
}

// appendCountsOf returns the counts of appended batches of a mirror,
// creating them at the mirror's first runner. A runner keeps the pointer,
// so the per-batch path takes no lock and looks nothing up.
func (in *instruments) appendCountsOf(mirror string) *appendCounts {
	in.appendsMu.Lock()
	defer in.appendsMu.Unlock()
	a, ok := in.appends[mirror]
	if !ok {
		a = &appendCounts{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("mirror", mirror)))}
		in.appends[mirror] = a
	}
	return a
}

// appended counts one batch appended.
func (a *appendCounts) appended(bytes, offsets int64) {
	a.bytes.Add(bytes)
	a.batches.Add(1)
	a.offsets.Add(offsets)
}

func (in *instruments) metadataRefreshError(mirror string) {
	in.mdErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror)))
}

func (in *instruments) configSyncError(mirror string) {
	in.cfgErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror)))
}

func (in *instruments) destinationMismatch(mirror, topic string, p int32, action string) {
	in.mismatches.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror), attribute.String("topic", topic),
		attribute.Int("partition", int(p)), attribute.String("action", action)))
}
