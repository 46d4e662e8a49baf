package metrics

import (
	"context"
	"strconv"
	"sync"
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
// histogram (how well appends are batched per destination broker).
var partitionBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// DataPath records the figures of one mirror's data path: the
// ProduceRequests its writer sends to the destination and the fetch
// requests its fetcher sends to the source. Its methods are called once per
// request (not per batch), from several goroutines at once; the attribute
// sets ({mirror, broker}, with result) are built once per broker, so
// recording allocates nothing. Names, in Prometheus form:
//
//	kmirror_produce_request_latency_seconds{mirror,broker}  histogram
//	kmirror_produce_request_partitions{mirror,broker}       histogram
//	kmirror_produce_requests_total{mirror,broker,result}    counter (result: ok, error)
//	kmirror_produce_requests_in_flight{mirror,broker}       gauge
//	kmirror_produce_bytes_total{mirror,broker}              counter
//	kmirror_fetch_request_latency_seconds{mirror,broker}    histogram
//	kmirror_fetch_requests_total{mirror,broker,result}      counter
//	kmirror_fetch_bytes_total{mirror,broker}                counter
//	kmirror_fetch_requests_in_flight{mirror}                gauge (ObserveFetcher)
//	kmirror_fetch_buffered_bytes{mirror}                    gauge (ObserveFetcher)
type DataPath struct {
	mirror string
	attrs  attribute.Set // {mirror}

	produceLatency    metric.Float64Histogram
	producePartitions metric.Int64Histogram
	produceRequests   metric.Int64Counter
	produceInFlight   metric.Int64UpDownCounter
	produceBytes      metric.Int64Counter
	fetchLatency      metric.Float64Histogram
	fetchRequests     metric.Int64Counter
	fetchBytes        metric.Int64Counter
	fetchInFlight     metric.Int64ObservableGauge
	fetchBuffered     metric.Int64ObservableGauge
	meter             metric.Meter

	brokers sync.Map // int32 → *brokerAttrs

	mu  sync.Mutex
	reg metric.Registration // ObserveFetcher's callback; nil: none
}

// brokerAttrs are the measurement options of one broker, built once.
type brokerAttrs struct {
	add      []metric.AddOption    // {mirror, broker}
	record   []metric.RecordOption // {mirror, broker}
	ok, fail []metric.AddOption    // {mirror, broker, result}
}

// NewDataPath creates the data-path instruments of a mirror. Close
// releases what ObserveFetcher registered.
func (p *Provider) NewDataPath(mirror string) (*DataPath, error) {
	m := p.Meter("github.com/kmirror/kmirror/core/metrics")
	d := &DataPath{mirror: mirror, attrs: attribute.NewSet(attribute.String("mirror", mirror)), meter: m}
	var err error
	hist := func(name, doc string) metric.Float64Histogram {
		h, e := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(doc), metric.WithExplicitBucketBoundaries(latencyBuckets...))
		err = firstErr(err, e)
		return h
	}
	counter := func(name, doc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(doc))
		err = firstErr(err, e)
		return c
	}
	gauge := func(name, doc string) metric.Int64ObservableGauge {
		g, e := m.Int64ObservableGauge(name, metric.WithDescription(doc))
		err = firstErr(err, e)
		return g
	}
	d.produceLatency = hist("produce.request.latency", "Time from sending a ProduceRequest to the destination to its answer (KIP-1279 has none; Kafka's producer request-latency), by mirror and destination broker.")
	var e error
	d.producePartitions, e = m.Int64Histogram("produce.request.partitions", metric.WithDescription("Partitions (one batch each) per ProduceRequest, by mirror and destination broker: how well appends are gathered into requests."), metric.WithExplicitBucketBoundaries(partitionBuckets...))
	err = firstErr(err, e)
	d.produceRequests = counter("produce.requests", "ProduceRequests answered, by mirror, destination broker and result (error: the request failed as a whole or at least one partition was answered with an error; those appends are retried or fail).")
	d.produceBytes = counter("produce.bytes", "Record batch bytes sent in ProduceRequests (retries included), by mirror and destination broker.")
	d.fetchLatency = hist("fetch.request.latency", "Time from sending a fetch request to the source to its answer, long polls included (up to replica.fetch.wait.max.ms when there is nothing new), by mirror and source broker.")
	d.fetchRequests = counter("fetch.requests", "Fetch requests answered, by mirror, source broker and result (ok, error).")
	d.fetchBytes = counter("fetch.bytes", "Record bytes received in fetch responses, by mirror and source broker.")
	d.fetchInFlight = gauge("fetch.requests.in.flight", "Fetch requests sent to the source and not yet answered, by mirror.")
	d.fetchBuffered = gauge("fetch.buffered.bytes", "Bytes fetched and not yet appended to the destination, by mirror.")
	if err != nil {
		return nil, err
	}
	if d.produceInFlight, err = m.Int64UpDownCounter("produce.requests.in.flight", metric.WithDescription("ProduceRequests sent to the destination and not yet answered, by mirror and destination broker.")); err != nil {
		return nil, err
	}
	return d, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (d *DataPath) broker(node int32) *brokerAttrs {
	if b, ok := d.brokers.Load(node); ok {
		return b.(*brokerAttrs)
	}
	m, br := attribute.String("mirror", d.mirror), attribute.String("broker", strconv.Itoa(int(node)))
	base := metric.WithAttributeSet(attribute.NewSet(m, br))
	b := &brokerAttrs{
		add:    []metric.AddOption{base},
		record: []metric.RecordOption{base},
		ok:     []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(m, br, attribute.String("result", "ok")))},
		fail:   []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(m, br, attribute.String("result", "error")))},
	}
	got, _ := d.brokers.LoadOrStore(node, b)
	return got.(*brokerAttrs)
}

// ProduceSent records a ProduceRequest sent to broker (in flight).
func (d *DataPath) ProduceSent(broker int32) {
	d.produceInFlight.Add(context.Background(), 1, d.broker(broker).add...)
}

// ProduceDone records the answer to a ProduceRequest sent to broker:
// its latency, its partitions and bytes, and whether it failed (as a whole
// or for a partition).
func (d *DataPath) ProduceDone(broker int32, latency time.Duration, partitions, bytes int, failed bool) {
	ctx, b := context.Background(), d.broker(broker)
	d.produceInFlight.Add(ctx, -1, b.add...)
	d.produceLatency.Record(ctx, latency.Seconds(), b.record...)
	d.producePartitions.Record(ctx, int64(partitions), b.record...)
	d.produceBytes.Add(ctx, int64(bytes), b.add...)
	if failed {
		d.produceRequests.Add(ctx, 1, b.fail...)
	} else {
		d.produceRequests.Add(ctx, 1, b.ok...)
	}
}

// FetchDone records the answer to a fetch request sent to broker: its
// latency, the record bytes it brought, and whether it failed.
func (d *DataPath) FetchDone(broker int32, latency time.Duration, bytes int, failed bool) {
	ctx, b := context.Background(), d.broker(broker)
	d.fetchLatency.Record(ctx, latency.Seconds(), b.record...)
	d.fetchBytes.Add(ctx, int64(bytes), b.add...)
	if failed {
		d.fetchRequests.Add(ctx, 1, b.fail...)
	} else {
		d.fetchRequests.Add(ctx, 1, b.ok...)
	}
}

// ObserveFetcher reads the fetcher's figures when metrics are collected:
// fetch requests in flight and bytes buffered between fetch and append. It
// replaces any function given before; Close removes it.
func (d *DataPath) ObserveFetcher(f func() (inFlight int, buffered int64)) error {
	opt := metric.WithAttributeSet(d.attrs)
	reg, err := d.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, b := f()
		o.ObserveInt64(d.fetchInFlight, int64(n), opt)
		o.ObserveInt64(d.fetchBuffered, b, opt)
		return nil
	}, d.fetchInFlight, d.fetchBuffered)
	if err != nil {
		return err
	}
	d.mu.Lock()
	old := d.reg
	d.reg = reg
	d.mu.Unlock()
	if old != nil {
		return old.Unregister()
	}
	return nil
}

// Close stops observing the fetcher (ObserveFetcher). The counters keep
// their values: a mirror started again adds to them.
func (d *DataPath) Close() error {
	d.mu.Lock()
	reg := d.reg
	d.reg = nil
	d.mu.Unlock()
	if reg != nil {
		return reg.Unregister()
	}
	return nil
}
