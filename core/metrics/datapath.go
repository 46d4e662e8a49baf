package metrics

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// latencyBuckets are the bucket bounds, in seconds, of the request latency
// histograms: from a loopback round trip (under a millisecond) to a
// request timeout (30 s), so that both a LAN and a WAN link show where
// their latency sits.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// partitionBuckets are the bucket bounds of the partitions-per-request
// histogram (how well appends are gathered per destination broker).
var partitionBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// DataPath records the figures of one mirror's data path: the
// ProduceRequests its writer sends to the destination, the fetch requests
// its fetcher sends to the source, and what is buffered or in flight
// between them. Names, in Prometheus form:
//
//	kmirror_produce_request_latency_seconds{mirror,broker}     histogram
//	kmirror_produce_request_partitions{mirror,broker}          histogram
//	kmirror_produce_requests_total{mirror,broker,result}       counter (result: ok, error)
//	kmirror_produce_requests_in_flight{mirror,broker}          gauge
//	kmirror_produce_bytes_total{mirror,broker}                 counter
//	kmirror_fetch_request_latency_seconds{mirror,broker,type}  histogram (type: long_poll, release)
//	kmirror_fetch_requests_total{mirror,broker,result}         counter
//	kmirror_fetch_bytes_total{mirror,broker}                   counter
//	kmirror_fetch_requests_in_flight{mirror}                   gauge (Observe)
//	kmirror_fetch_buffered_bytes{mirror}                       gauge (Observe)
//	kmirror_fetch_partition_max_bytes{mirror}                  gauge (Observe)
//	kmirror_appends_in_flight{mirror}                          gauge (Observe)
//	kmirror_min_fetch_rate{mirror}                             gauge (Observe)
//
// Its request methods are called once per request (not per batch), from
// several goroutines at once. They allocate nothing: the counters and the
// in-flight gauge are atomics per broker, read when metrics are collected,
// and only the histograms go through the OpenTelemetry SDK, with attribute
// sets built once per broker.
type DataPath struct {
	inst   *dataPathInstruments
	mirror string
	attrs  metric.ObserveOption // {mirror}
	now    func() time.Time

	brokers sync.Map // int32 → *brokerStats

	mu       sync.Mutex
	observed *observer // Observe's; nil: none
}

// DataPathStats are the figures of a mirror's data path read when metrics
// are collected (Observe).
type DataPathStats struct {
	// FetchesInFlight: fetch requests sent to the source, not yet answered.
	FetchesInFlight int
	// BufferedBytes: bytes fetched and not yet appended to the destination.
	BufferedBytes int64
	// PartitionMaxBytes: the per-partition fetch size in use.
	PartitionMaxBytes int32
	// AppendsInFlight: pipelined appends sent to the destination and not
	// yet answered.
	AppendsInFlight int64
}

type observer struct{ stats func() DataPathStats }

// brokerStats are a data path's figures for one broker.
type brokerStats struct {
	record   []metric.RecordOption    // {mirror, broker}
	fetch    [2][]metric.RecordOption // {mirror, broker, type}: [0] long_poll, [1] release
	observe  metric.ObserveOption     // {mirror, broker}
	ok, fail metric.ObserveOption     // {mirror, broker, result}

	produceInFlight, produceBytes, produceOK, produceFailed atomic.Int64
	fetchBytes, fetchOK, fetchFailed                        atomic.Int64
	produced, fetched                                       atomic.Bool // a request was seen
	// lastFetch is when the last fetch request to the broker was
	// answered (Unix nanoseconds); fetchRate the rate of those answers.
	lastFetch atomic.Int64
	fetchRate *windowRate
}

// dataPathInstruments are shared by every DataPath of a Provider.
type dataPathInstruments struct {
	produceLatency, fetchLatency metric.Float64Histogram
	producePartitions            metric.Int64Histogram
}

// NewDataPath returns the data-path figures of a mirror: a new DataPath at
// the mirror's first start, the same one (counters intact) afterwards.
func (p *Provider) NewDataPath(mirror string) (*DataPath, error) {
	p.dpOnce.Do(func() { p.dpInst, p.dpErr = p.newDataPathInstruments() })
	if p.dpErr != nil {
		return nil, p.dpErr
	}
	p.dpMu.Lock()
	defer p.dpMu.Unlock()
	if p.dataPaths == nil {
		p.dataPaths = map[string]*DataPath{}
	}
	if d, ok := p.dataPaths[mirror]; ok {
		return d, nil
	}
	d := &DataPath{inst: p.dpInst, mirror: mirror, now: p.now, attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("mirror", mirror)))}
	p.dataPaths[mirror] = d
	return d, nil
}

func (p *Provider) newDataPathInstruments() (*dataPathInstruments, error) {
	m := p.Meter("github.com/kmirror/kmirror/core/metrics")
	in := &dataPathInstruments{}
	var err error
	if in.produceLatency, err = m.Float64Histogram("produce.request.latency", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBuckets...),
		metric.WithDescription("Time from sending a ProduceRequest to the destination to its answer (Kafka producer's request-latency), by mirror and destination broker.")); err != nil {
		return nil, err
	}
	if in.producePartitions, err = m.Int64Histogram("produce.request.partitions", metric.WithExplicitBucketBoundaries(partitionBuckets...),
		metric.WithDescription("Partitions (one batch each) per ProduceRequest, by mirror and destination broker: how well appends are gathered into requests.")); err != nil {
		return nil, err
	}
	if in.fetchLatency, err = m.Float64Histogram("fetch.request.latency", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBuckets...),
		metric.WithDescription("Time from sending a fetch request to a source broker to its answer (Kafka's FetchRequestRateAndTimeMs, KIP-1279 FetcherStats RequestRate), by mirror, source broker and type (long_poll: the session's fetch, which the broker holds up to replica.fetch.wait.max.ms when there is no data; release: a no-wait fetch for partitions released while the long poll is out).")); err != nil {
		return nil, err
	}
	type perBroker struct {
		name, doc string
		gauge     bool
		observe   func(o metric.Int64Observer, b *brokerStats)
	}
	for _, c := range []perBroker{
		{"produce.requests", "ProduceRequests answered, by mirror, destination broker and result (error: the request failed as a whole, or a partition was answered with an error; those appends are retried or fail).", false,
			func(o metric.Int64Observer, b *brokerStats) {
				if b.produced.Load() {
					o.Observe(b.produceOK.Load(), b.ok)
					o.Observe(b.produceFailed.Load(), b.fail)
				}
			}},
		{"produce.bytes", "Record batch bytes sent in ProduceRequests (retries included; markers are replayed with EndTxn and not counted), by mirror and destination broker.", false,
			func(o metric.Int64Observer, b *brokerStats) {
				if b.produced.Load() {
					o.Observe(b.produceBytes.Load(), b.observe)
				}
			}},
		{"produce.requests.in.flight", "ProduceRequests sent to the destination and not yet answered, by mirror and destination broker.", true,
			func(o metric.Int64Observer, b *brokerStats) {
				if b.produced.Load() {
					o.Observe(b.produceInFlight.Load(), b.observe)
				}
			}},
		{"fetch.requests", "Fetch requests answered, by mirror, source broker and result (ok, error).", false,
			func(o metric.Int64Observer, b *brokerStats) {
				if b.fetched.Load() {
					o.Observe(b.fetchOK.Load(), b.ok)
					o.Observe(b.fetchFailed.Load(), b.fail)
				}
			}},
		{"fetch.bytes", "Record bytes received in fetch responses, by mirror and source broker.", false,
			func(o metric.Int64Observer, b *brokerStats) {
				if b.fetched.Load() {
					o.Observe(b.fetchBytes.Load(), b.observe)
				}
			}},
	} {
		cb := metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			p.eachBroker(func(b *brokerStats) { c.observe(o, b) })
			return nil
		})
		if c.gauge {
			_, err = m.Int64ObservableGauge(c.name, metric.WithDescription(c.doc), cb)
		} else {
			_, err = m.Int64ObservableCounter(c.name, metric.WithDescription(c.doc), cb)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, c := range []struct {
		name, unit, doc string
		value           func(DataPathStats) int64
	}{
		{"fetch.requests.in.flight", "", "Fetch requests sent to the source and not yet answered (long polls and release fetches), by mirror.",
			func(s DataPathStats) int64 { return int64(s.FetchesInFlight) }},
		{"fetch.buffered.bytes", "By", "Bytes fetched from the source and not yet appended to the destination, by mirror; all mirrors together stay within mirror.buffer.max.bytes.",
			func(s DataPathStats) int64 { return s.BufferedBytes }},
		{"fetch.partition.max.bytes", "By", "The per-partition fetch size in use, by mirror: replica.fetch.max.bytes, or less when mirror.buffer.max.bytes is shared by many partitions.",
			func(s DataPathStats) int64 { return int64(s.PartitionMaxBytes) }},
		{"appends.in.flight", "", "Pipelined appends sent to the destination and not yet answered, by mirror (at most mirror.appends.in.flight.per.partition per partition).",
			func(s DataPathStats) int64 { return s.AppendsInFlight }},
	} {
		_, err = m.Int64ObservableGauge(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.doc), metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, d := range p.dataPathList() {
				d.mu.Lock()
				obs := d.observed
				d.mu.Unlock()
				if obs != nil {
					o.Observe(c.value(obs.stats()), d.attrs)
				}
			}
			return nil
		}))
		if err != nil {
			return nil, err
		}
	}
	_, err = m.Float64ObservableGauge("min.fetch.rate",
		metric.WithDescription("Fetch requests per second, over about the last minute, to the slowest-fetching source broker the mirror fetched from in that minute (KIP-1279 MinFetchRate), by mirror; 0 while it fetches from none. A broker that leads the mirror's partitions but does not answer shows here as a rate falling to 0."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, d := range p.dataPathList() {
				d.mu.Lock()
				connected := d.observed != nil
				d.mu.Unlock()
				if rate, ok := d.minFetchRate(); ok || connected {
					o.Observe(rate, d.attrs)
				}
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return in, nil
}

// minFetchRate samples every broker's fetch rate and returns the lowest
// among those that answered a fetch within RateWindow; ok is false when
// none did.
func (d *DataPath) minFetchRate() (rate float64, ok bool) {
	now := d.now()
	d.brokers.Range(func(_, v any) bool {
		b := v.(*brokerStats)
		r := b.fetchRate.rate(now, b.fetchOK.Load()+b.fetchFailed.Load())
		if b.fetched.Load() && now.Sub(time.Unix(0, b.lastFetch.Load())) <= RateWindow && (!ok || r < rate) {
			rate, ok = r, true
		}
		return true
	})
	return rate, ok
}

func (p *Provider) dataPathList() []*DataPath {
	p.dpMu.Lock()
	defer p.dpMu.Unlock()
	out := make([]*DataPath, 0, len(p.dataPaths))
	for _, d := range p.dataPaths {
		out = append(out, d)
	}
	return out
}

func (p *Provider) eachBroker(f func(*brokerStats)) {
	for _, d := range p.dataPathList() {
		d.brokers.Range(func(_, v any) bool {
			f(v.(*brokerStats))
			return true
		})
	}
}

func (d *DataPath) broker(node int32) *brokerStats {
	if b, ok := d.brokers.Load(node); ok {
		return b.(*brokerStats)
	}
	m, br := attribute.String("mirror", d.mirror), attribute.String("broker", strconv.Itoa(int(node)))
	base := metric.WithAttributeSet(attribute.NewSet(m, br))
	b := &brokerStats{
		record: []metric.RecordOption{base},
		fetch: [2][]metric.RecordOption{
			{metric.WithAttributeSet(attribute.NewSet(m, br, attribute.String("type", "long_poll")))},
			{metric.WithAttributeSet(attribute.NewSet(m, br, attribute.String("type", "release")))},
		},
		observe:   base,
		ok:        metric.WithAttributeSet(attribute.NewSet(m, br, attribute.String("result", "ok"))),
		fail:      metric.WithAttributeSet(attribute.NewSet(m, br, attribute.String("result", "error"))),
		fetchRate: newWindowRate(d.now()),
	}
	got, _ := d.brokers.LoadOrStore(node, b)
	return got.(*brokerStats)
}

// ProduceSent records a ProduceRequest sent to broker (in flight).
func (d *DataPath) ProduceSent(broker int32) {
	b := d.broker(broker)
	b.produceInFlight.Add(1)
	b.produced.Store(true)
}

// ProduceDone records the answer to a ProduceRequest sent to broker: its
// latency, its partitions and bytes, and whether it failed (as a whole or
// for a partition).
func (d *DataPath) ProduceDone(broker int32, latency time.Duration, partitions, bytes int, failed bool) {
	b := d.broker(broker)
	b.produceInFlight.Add(-1)
	b.produceBytes.Add(int64(bytes))
	if failed {
		b.produceFailed.Add(1)
	} else {
		b.produceOK.Add(1)
	}
	ctx := context.Background()
	d.inst.produceLatency.Record(ctx, latency.Seconds(), b.record...)
	d.inst.producePartitions.Record(ctx, int64(partitions), b.record...)
}

// FetchDone records the answer to a fetch request sent to broker: its
// latency, the record bytes it brought, whether it was a release fetch
// (a no-wait fetch for partitions released while the session's long poll
// is out) rather than the long poll, and whether it failed.
func (d *DataPath) FetchDone(broker int32, latency time.Duration, bytes int, release, failed bool) {
	b := d.broker(broker)
	b.fetchBytes.Add(int64(bytes))
	if failed {
		b.fetchFailed.Add(1)
	} else {
		b.fetchOK.Add(1)
	}
	b.lastFetch.Store(d.now().UnixNano())
	b.fetched.Store(true)
	typ := 0
	if release {
		typ = 1
	}
	d.inst.fetchLatency.Record(context.Background(), latency.Seconds(), b.fetch[typ]...)
}

// Observe reads stats (the fetcher's and the writer's figures) when metrics
// are collected, until stop is called. It replaces any stats given before;
// a stop of an earlier Observe (the mirror's previous run, stopped late)
// leaves the new one in place. The counters keep their values across
// Observe and stop: the mirror started again adds to them.
func (d *DataPath) Observe(stats func() DataPathStats) (stop func()) {
	o := &observer{stats: stats}
	d.mu.Lock()
	d.observed = o
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		if d.observed == o {
			d.observed = nil
		}
		d.mu.Unlock()
	}
}
