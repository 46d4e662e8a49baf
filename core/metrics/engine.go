package metrics

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// EngineSource is what the engine's gauges read when metrics are
// collected. Every field is required but PartitionSeries.
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
	// PartitionSeries says whether series with a topic and partition
	// label (kmirror_consumer_lag, the topic and partition of
	// kmirror_destination_mismatches_total) are exported
	// (metrics.partition.series.enable); nil: always.
	PartitionSeries func() bool
}

// MirrorSample is one mirror's partitions when metrics are collected.
type MirrorSample struct {
	Mirror     string
	Partitions []PartitionSample
	// Clusters are whether the mirror can talk to its clusters now.
	Clusters []ClusterSample
	// DeadThreads counts the mirror's goroutines (partition runners, its
	// data path, its sync loops) that ended while the mirror still ran
	// (KIP-1279 DeadThreadCount).
	DeadThreads int64
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

// endToEndBuckets are the bucket bounds, in seconds, of the end-to-end
// latency histogram: from a record copied while the source is still
// answering its producer (milliseconds) to a backlog hours old.
var endToEndBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400}

// Engine holds the mirroring engine's metrics; the per-mirror data-path
// figures (produce and fetch requests, bytes buffered and appends in flight)
// are DataPath's. Names follow KIP-1279's (MaxLag, ConsumerLag,
// FailedPartitionsCount, <State>PartitionState, BytesPerSec, byte-rate,
// DeadThreadCount, MirrorTopicCount) in Prometheus form; docs/metrics.md
// has the mapping.
type Engine struct {
	transitions metric.Int64Counter
	mdErrors    metric.Int64Counter
	cfgErrors   metric.Int64Counter
	mismatches  metric.Int64Counter
	series      func() bool
	now         func() time.Time

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
	byteRate                *windowRate          // kmirror_replication_byte_rate

	// endToEnd are the mirror's end-to-end latency histograms: [0]
	// create_time, [1] log_append_time (timestampTypes).
	endToEnd [2]*durationHistogram
	mirror   string
	now      func() time.Time
}

// NewEngine creates the engine's instruments on p; their gauges read src.
func NewEngine(p *Provider, src EngineSource) (*Engine, error) {
	// The meter keeps the engine package's name, which the instruments
	// had before they moved here.
	m := p.Meter("github.com/kmirror/kmirror/core/mirror")
	in := &Engine{series: src.PartitionSeries, now: p.now}
	if in.series == nil {
		in.series = func() bool { return true }
	}
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
				for _, a := range in.appendCounts() {
					o.Observe(c.value(a), a.attrs)
				}
				return nil
			}))
		if err != nil {
			return nil, err
		}
	}
	_, err = m.Float64ObservableGauge("replication.byte.rate",
		metric.WithDescription("Measured replication rate: bytes of record batches appended to the destination per second over about the last minute (KIP-1279 MirrorReplication byte-rate as measured; compare with kmirror_replication_throttle_byte_rate), by mirror."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			now := in.now()
			for _, a := range in.appendCounts() {
				o.Observe(a.byteRate.rate(now, a.bytes.Load()), a.attrs)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	if err := p.exportEndToEnd(in); err != nil {
		return nil, err
	}
	if in.mdErrors, err = m.Int64Counter("metadata.refresh.error", metric.WithDescription("Failed rounds of the topics sync loop (KIP-1279 MetadataRefreshError), by mirror.")); err != nil {
		return nil, err
	}
	if in.cfgErrors, err = m.Int64Counter("topic.config.metadata.sync.error", metric.WithDescription("Topic configs the destination rejected, and failed rounds of the topic config sync loop (KIP-1279 TopicConfigMetadataSyncError), by mirror.")); err != nil {
		return nil, err
	}
	if in.mismatches, err = m.Int64Counter("destination.mismatches", metric.WithDescription("Destination partitions found to differ from their source before continuing (a foreign record, an ABORT where the source committed, data beyond the source's end), by mirror, topic, partition (unless metrics.partition.series.enable is off) and the action taken (map or fail).")); err != nil {
		return nil, err
	}
	if err := in.mirrorGauges(m, src); err != nil {
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
	_, err = m.Int64ObservableGauge("replication.throttle.byte.rate",
		metric.WithDescription("The configured daemon-wide replication throttle in bytes/s (mirror.replication.throttled.rate, KIP-1279 MirrorReplication byte-rate as configured); -1 when unlimited. The measured rate is kmirror_replication_byte_rate."),
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

// mirrorGauges creates the gauges read from src.Mirrors, all observed by
// one callback so that a collection reads the mirrors' partitions once
// (at 10,000 partitions, a status of each is what a scrape costs).
func (in *Engine) mirrorGauges(m metric.Meter, src EngineSource) error {
	gauge := func(name, doc string) (metric.Int64ObservableGauge, error) {
		return m.Int64ObservableGauge(name, metric.WithDescription(doc))
	}
	states, err := gauge("partition.state", "Partitions per state (KIP-1279 <State>PartitionState), by mirror and state; the states of a mirror sum to kmirror_partitions.")
	if err != nil {
		return err
	}
	total, err := gauge("partitions", "Partitions the mirror runs, in any state, by mirror.")
	if err != nil {
		return err
	}
	failed, err := gauge("failed.partitions.count", "FAILED partitions (KIP-1279 FailedPartitionsCount), by mirror.")
	if err != nil {
		return err
	}
	maxLag, err := gauge("max.lag", "Largest lag in offsets between a source partition's high watermark and what is mirrored (KIP-1279 MaxLag), by mirror.")
	if err != nil {
		return err
	}
	lag, err := gauge("consumer.lag", "Lag in offsets of one mirrored partition (KIP-1279 FetcherLagMetrics ConsumerLag), by mirror, topic and partition; absent while unknown, and when metrics.partition.series.enable is off.")
	if err != nil {
		return err
	}
	topics, err := gauge("mirror.topic.count", "Topics the mirror runs partitions of (KIP-1279 MirrorTopicCount), by mirror.")
	if err != nil {
		return err
	}
	dead, err := gauge("dead.thread.count", "The mirror's goroutines (partition runners, its data path's fetcher, its sync loops) that ended while the mirror still ran (KIP-1279 DeadThreadCount); 0 unless kmirror has a bug, by mirror.")
	if err != nil {
		return err
	}
	up, err := gauge("cluster.up", "1 while kmirror can talk to the cluster (any broker answers on the mirror's client), 0 while it cannot, by cluster (source or destination) and mirror.")
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		series := in.series()
		counts := make(map[string]int64, len(src.States))
		seen := map[string]bool{}
		for _, ms := range src.Mirrors() {
			mirror := attribute.String("mirror", ms.Mirror)
			one := metric.WithAttributes(mirror)
			clear(counts)
			clear(seen)
			for _, s := range src.States {
				counts[s] = 0
			}
			var nFailed, top int64
			known := false
			for _, p := range ms.Partitions {
				counts[p.State]++
				if p.State == src.Failed {
					nFailed++
				}
				top = max(top, p.Lag)
				known = known || p.Lag >= 0
				seen[p.Topic] = true
				if series && p.Lag >= 0 {
					o.ObserveInt64(lag, p.Lag, metric.WithAttributes(mirror, attribute.String("topic", p.Topic), attribute.Int("partition", int(p.Partition))))
				}
			}
			for s, n := range counts {
				o.ObserveInt64(states, n, metric.WithAttributes(mirror, attribute.String("state", s)))
			}
			o.ObserveInt64(total, int64(len(ms.Partitions)), one)
			o.ObserveInt64(failed, nFailed, one)
			if known || len(ms.Partitions) == 0 {
				o.ObserveInt64(maxLag, top, one) // (absent while no partition's lag is known, e.g. the source does not answer)
			}
			o.ObserveInt64(topics, int64(len(seen)), one)
			o.ObserveInt64(dead, ms.DeadThreads, one)
			for _, c := range ms.Clusters {
				v := int64(0)
				if c.Up {
					v = 1
				}
				o.ObserveInt64(up, v, metric.WithAttributes(attribute.String("cluster", c.Cluster), mirror))
			}
		}
		return nil
	}, states, total, failed, maxLag, lag, topics, dead, up)
	return err
}

// appendCounts returns every mirror's counts.
func (in *Engine) appendCounts() []*AppendCounts {
	in.appendsMu.Lock()
	defer in.appendsMu.Unlock()
	out := make([]*AppendCounts, 0, len(in.appends))
	for _, a := range in.appends {
		out = append(out, a)
	}
	return out
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
		m := attribute.String("mirror", mirror)
		a = &AppendCounts{attrs: metric.WithAttributeSet(attribute.NewSet(m)), byteRate: newWindowRate(in.now()), mirror: mirror, now: in.now,
			endToEnd: [2]*durationHistogram{newDurationHistogram(endToEndBuckets), newDurationHistogram(endToEndBuckets)}}
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

// Landed records the end-to-end latency of a data batch whose append the
// destination has just acknowledged: from maxTimestamp (the batch's
// MaxTimestamp, milliseconds since the epoch) to now. With logAppendTime
// (the source topic's message.timestamp.type is LogAppendTime) that is
// the source broker's append time of the batch; otherwise the producer's
// timestamp of its newest record, which the producer's clock and any
// timestamp it chose shift. A timestamp in the future (clock skew) counts
// as 0; a batch without one (-1) is not counted.
func (a *AppendCounts) Landed(maxTimestamp int64, logAppendTime bool) {
	if maxTimestamp < 0 {
		return
	}
	d := max(a.now().Sub(time.UnixMilli(maxTimestamp)), 0)
	i := 0
	if logAppendTime {
		i = 1
	}
	a.endToEnd[i].observe(d)
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
	if !in.series() {
		in.mismatches.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror), attribute.String("action", action)))
		return
	}
	in.mismatches.Add(context.Background(), 1, metric.WithAttributes(attribute.String("mirror", mirror), attribute.String("topic", topic),
		attribute.Int("partition", int(p)), attribute.String("action", action)))
}
