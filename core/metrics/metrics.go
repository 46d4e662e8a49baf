// Package metrics owns kmirror's OpenTelemetry meter provider and its Prometheus
// exposition. Every instrument in kmirror is created from the Provider built here,
// so that /metrics shows all of them on one registry (no global state: tests build
// their own Provider and read it back). It also holds the instruments themselves:
// the mirroring engine's (Engine), each mirror's data path's (DataPath),
// each cluster client's connections and requests (Client, a franz-go hook)
// and the admin API's requests (AdminRequests). docs/metrics.md lists
// every metric and its KIP-1279 counterpart. One histogram, the per-batch
// end-to-end latency, is kept in atomics and exported by a collector on the
// same registry, for its cost (durationHistogram).
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Namespace prefixes every kmirror metric name on /metrics.
const Namespace = "kmirror"

// Provider couples an OpenTelemetry MeterProvider with the Prometheus registry it
// exports to.
type Provider struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	// now is the clock of the rate gauges (time.Now; a test's).
	now func() time.Time

	// The data paths' instruments, created at the first NewDataPath, and
	// each mirror's DataPath, kept for the life of the Provider so that
	// its counters stay monotonic across the mirror's restarts.
	// dpMu is never held while calling the SDK, whose collection holds its
	// own lock while it runs the callbacks that take dpMu.
	dpOnce    sync.Once
	dpInst    *dataPathInstruments
	dpErr     error
	dpMu      sync.Mutex
	dataPaths map[string]*DataPath

	// The cluster clients' instruments and each client's figures (Client),
	// kept like the data paths'.
	clOnce  sync.Once
	clInst  *clientInstruments
	clErr   error
	clMu    sync.Mutex
	clients map[clientKey]*Client

	// The end-to-end latency histograms' collector, registered once, and
	// the Engine it reads.
	e2eOnce sync.Once
	e2eErr  error
	e2e     atomic.Pointer[Engine]
}

// New builds a Provider with its own registry. Go runtime and process collectors
// are registered too, as operators expect from a daemon.
func New() (*Provider, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithNamespace(Namespace),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("metrics: creating the Prometheus exporter: %w", err)
	}
	// No cardinality limit: the SDK's default (2,000 series per
	// instrument) would fold kmirror_consumer_lag of a daemon mirroring
	// more partitions into one overflow series. kmirror bounds its series
	// itself: only the per-partition ones grow with the partitions, and
	// metrics.partition.series.enable turns them off.
	return &Provider{registry: reg, provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithCardinalityLimit(0)), now: time.Now}, nil
}

// Meter returns a named meter; name is the instrumentation scope (the package).
func (p *Provider) Meter(name string) metric.Meter { return p.provider.Meter(name) }

// Handler serves the Prometheus text exposition of every instrument.
func (p *Provider) Handler() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{EnableOpenMetrics: false})
}

// Gather returns the current metric families, for tests and the describe command.
func (p *Provider) Gather() ([]*MetricFamily, error) { return p.registry.Gather() }

// Shutdown flushes and stops the meter provider.
func (p *Provider) Shutdown(ctx context.Context) error { return p.provider.Shutdown(ctx) }
