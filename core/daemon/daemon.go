// Package daemon owns the life cycle of a kmirror process: it loads the
// configuration, serves /healthz, /readyz and /metrics, starts the engine's
// components in order, reloads on request (SIGHUP), and shuts everything down in
// the reverse order within a deadline.
//
// Order (sinks before sources, as in Telegraf): the HTTP listener starts first
// and stops last, so that metrics stay scrapeable while components drain;
// components start in the order given and stop in reverse order.
//
// Reload rule (as in Caddy): a new configuration is loaded and validated in full
// before anything changes; a configuration that fails to load or that a
// component rejects leaves the running one in place, and the reason is logged.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/livestatus"
	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/core/memlimit"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/version"
)

// ErrShutdownTimeout is returned by Run when components did not stop within
// shutdown.timeout.ms.
var ErrShutdownTimeout = errors.New("shutdown did not finish within shutdown.timeout.ms")

// Component is a long-running part of the engine that the daemon starts, reloads
// and stops. Start must return once the component is running (its goroutines
// are owned by the component and stopped by Stop).
type Component interface {
	Name() string
	Start(ctx context.Context, cfg *config.Config) error
	// Reload applies a new, already validated configuration. Returning an error
	// rejects the configuration; the component must then keep the old one.
	Reload(ctx context.Context, cfg *config.Config) error
	Stop(ctx context.Context) error
}

// Describer is implemented by components that report their status on
// GET /v1/describe, the unauthenticated status for probes and dashboards
// (`kmirror describe` asks the admin API). The value is encoded as
// JSON and must hold no secret.
type Describer interface {
	Describe() any
}

// StatusPage is implemented by the component whose status the page at GET /
// shows: Live is the page's data, served at GET /v1/live (encoded as JSON).
type StatusPage interface {
	Live() any
}

// Readiness is implemented by components whose state can make the daemon
// not ready (http.readyz.* keys): NotReady returns why, one reason a line,
// under the configuration in force; none while ready. It must be cheap and
// safe to call concurrently (every /readyz and scrape calls it).
type Readiness interface {
	NotReady(cfg *config.Config, now time.Time) []string
}

// Options configure a Daemon. Load is required: it is called once at start and
// again on each reload.
type Options struct {
	Load       func() (*config.Config, error)
	Logger     hclog.InterceptLogger
	Metrics    *metrics.Provider
	Components []Component
}

// Daemon is one running kmirror process.
type Daemon struct {
	opts    Options
	log     hclog.Logger
	cfg     atomic.Pointer[config.Config]
	ready   atomic.Bool
	reloads metric.Int64Counter

	mu       sync.Mutex
	started  []Component
	listener net.Listener
}

// New validates opts and returns a Daemon; nothing is started yet.
func New(opts Options) (*Daemon, error) {
	if opts.Load == nil {
		return nil, errors.New("daemon: Options.Load is required")
	}
	if opts.Logger == nil {
		return nil, errors.New("daemon: Options.Logger is required")
	}
	if opts.Metrics == nil {
		return nil, errors.New("daemon: Options.Metrics is required")
	}
	d := &Daemon{opts: opts, log: opts.Logger.Named("daemon")}
	m := opts.Metrics.Meter("github.com/kmirror/kmirror/core/daemon")
	var err error
	d.reloads, err = m.Int64Counter("config.reloads", metric.WithDescription("Configuration reloads, by result (applied or rejected)."))
	if err != nil {
		return nil, err
	}
	info := version.Get()
	_, err = m.Int64ObservableGauge("build.info",
		metric.WithDescription("Always 1; labels carry the kmirror version, commit, Go and franz-go versions."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, metric.WithAttributes(
				attribute.String("version", info.Version), attribute.String("commit", info.Commit),
				attribute.String("go_version", info.GoVersion), attribute.String("franz_go_version", info.FranzGo)))
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("ready",
		metric.WithDescription("1 while /readyz answers 200: the daemon is started, not shutting down, and no http.readyz.* check fails."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			if len(d.notReady()) == 0 {
				o.Observe(1)
			} else {
				o.Observe(0)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Config returns the configuration in force.
func (d *Daemon) Config() *config.Config { return d.cfg.Load() }

// Addr returns the address the HTTP listener is bound to, or "" when it is
// disabled or not yet started.
func (d *Daemon) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.listener == nil {
		return ""
	}
	return d.listener.Addr().String()
}

// Run loads the configuration, starts everything and blocks until ctx is done,
// then shuts down in order. Each value received on reload triggers a reload.
// Run returns nil after a clean shutdown.
func (d *Daemon) Run(ctx context.Context, reload <-chan struct{}) error {
	cfg, err := d.opts.Load()
	if err != nil {
		return err
	}
	d.cfg.Store(cfg)
	d.applyLogLevel(cfg)
	// Set before anything allocates much: start-up is when the heap grows.
	limit := memlimit.Start(cfg.MemorySoftLimit, "memory.soft.limit.bytes", d.log)
	defer limit.Stop()

	srv, srvErr, err := d.startHTTP(cfg)
	if err != nil {
		return err
	}
	// Components run under their own context so that they outlive ctx's
	// cancellation until Stop is called in order.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	for _, c := range d.opts.Components {
		if err := c.Start(runCtx, cfg); err != nil {
			startErr := fmt.Errorf("starting %s: %w", c.Name(), err)
			d.log.Error("start failed; stopping what was started", "component", c.Name(), "error", err)
			if sErr := d.shutdown(srv, cfg, cancelRun); sErr != nil {
				return errors.Join(startErr, sErr)
			}
			return startErr
		}
		d.mu.Lock()
		d.started = append(d.started, c)
		d.mu.Unlock()
	}
	d.ready.Store(true)
	info := version.Get()
	d.log.Info("kmirror started", "version", info.Version, "commit", info.Commit, "http", d.Addr(), "mirrors", len(cfg.Mirrors))

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			d.log.Info("shutdown requested", "reason", context.Cause(ctx))
			break loop
		case <-reload:
			d.Reload(ctx)
		case err := <-srvErr:
			runErr = fmt.Errorf("HTTP listener failed: %w", err)
			d.log.Error("HTTP listener failed; shutting down", "error", err)
			break loop
		}
	}
	if err := d.shutdown(srv, d.cfg.Load(), cancelRun); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// Reload loads and validates the configuration again and hands it to every
// component. On any error the running configuration stays in force.
func (d *Daemon) Reload(ctx context.Context) {
	old := d.cfg.Load()
	cfg, err := d.opts.Load()
	if err != nil {
		d.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("result", "rejected")))
		d.log.Error("configuration reload rejected; the running configuration stays in force", "error", err)
		return
	}
	if cfg.HTTPAddress != old.HTTPAddress {
		d.log.Warn("http.address changed; the new address takes effect after a restart", "running", old.HTTPAddress, "configured", cfg.HTTPAddress)
	}
	if cfg.LogFormat != old.LogFormat {
		d.log.Warn("log.format changed; the new format takes effect after a restart", "running", old.LogFormat, "configured", cfg.LogFormat)
	}
	if cfg.MemorySoftLimit != old.MemorySoftLimit {
		d.log.Warn("memory.soft.limit.bytes changed; the new limit takes effect after a restart", "running", old.MemorySoftLimit, "configured", cfg.MemorySoftLimit)
	}
	d.mu.Lock()
	started := append([]Component(nil), d.started...)
	d.mu.Unlock()
	for _, c := range started {
		if err := c.Reload(ctx, cfg); err != nil {
			d.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("result", "rejected")))
			d.log.Error("configuration reload rejected by a component; the running configuration stays in force", "component", c.Name(), "error", err)
			return
		}
	}
	d.cfg.Store(cfg)
	d.applyLogLevel(cfg)
	d.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("result", "applied")))
	d.log.Info("configuration reloaded", "mirrors", len(cfg.Mirrors))
}

func (d *Daemon) applyLogLevel(cfg *config.Config) {
	if lvl, err := logging.ParseLevel(cfg.LogLevel); err == nil {
		d.opts.Logger.SetLevel(lvl)
	}
}

func (d *Daemon) startHTTP(cfg *config.Config) (*http.Server, <-chan error, error) {
	errCh := make(chan error, 1)
	if cfg.HTTPAddress == "" {
		d.log.Info("HTTP listener disabled (http.address is empty)")
		return nil, errCh, nil
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddress)
	if err != nil {
		return nil, nil, fmt.Errorf("http.address %q: %w", cfg.HTTPAddress, err)
	}
	d.mu.Lock()
	d.listener = ln
	d.mu.Unlock()
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { // owned by Run: stopped by srv.Shutdown in shutdown().
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errCh <- err
		}
	}()
	d.log.Info("HTTP listener started", "address", ln.Addr().String())
	return srv, errCh, nil
}

// Handler serves /healthz, /readyz, /metrics and /v1/describe, the status
// page (GET / and its data, GET /v1/live), and /debug/pprof/ while
// http.pprof.enable is on.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if why := d.notReady(); len(why) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + strings.Join(why, "\n") + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", d.opts.Metrics.Handler())
	mux.Handle("/debug/pprof/", d.pprofHandler())
	mux.Handle("GET /{$}", d.statusOnly(http.HandlerFunc(livestatus.ServePage)))
	mux.Handle("GET /v1/live", d.statusOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		started := append([]Component(nil), d.started...)
		d.mu.Unlock()
		for _, c := range started {
			if sp, ok := c.(StatusPage); ok {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Cache-Control", "no-store")
				_ = json.NewEncoder(w).Encode(sp.Live())
				return
			}
		}
		http.Error(w, "no mirror engine is running", http.StatusServiceUnavailable)
	})))
	mux.Handle("GET /v1/describe", d.statusOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		out := map[string]any{}
		d.mu.Lock()
		started := append([]Component(nil), d.started...)
		d.mu.Unlock()
		for _, c := range started {
			if ds, ok := c.(Describer); ok {
				out[c.Name()] = ds.Describe()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})))
	return mux
}

// statusOnly serves h while the configuration in force has
// http.status.enable on, and 404 saying how to turn it on otherwise (read
// per request: a reload switches it).
func (d *Daemon) statusOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg := d.cfg.Load(); cfg == nil || !cfg.HTTPStatusEnable {
			http.Error(w, "the status endpoints are off on this listener (it is unauthenticated): set http.status.enable: true to serve the status page, /v1/live and /v1/describe, or use the admin API (kmirror describe)", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// notReady says why the daemon is not ready; none while it is. /readyz
// and kmirror_ready both follow it.
func (d *Daemon) notReady() []string {
	if !d.ready.Load() {
		return []string{"the daemon is starting or shutting down"}
	}
	cfg := d.cfg.Load()
	d.mu.Lock()
	started := append([]Component(nil), d.started...)
	d.mu.Unlock()
	var why []string
	now := time.Now()
	for _, c := range started {
		if r, ok := c.(Readiness); ok {
			why = append(why, r.NotReady(cfg, now)...)
		}
	}
	return why
}

// pprofHandler serves Go's profiles (net/http/pprof) under /debug/pprof/
// while the configuration in force has http.pprof.enable on, and 404
// otherwise: the switch is read per request, so a reload turns it on or
// off without a restart. /debug/pprof/cmdline is left out on purpose: the
// command line may carry a secret (--set destination.sasl.password=...).
func (d *Daemon) pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // the index, and every named profile (heap, allocs, goroutine, ...)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg := d.cfg.Load(); cfg == nil || !cfg.HTTPPprofEnable {
			http.NotFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// shutdown stops components in reverse order, then the HTTP listener, within
// shutdown.timeout.ms.
func (d *Daemon) shutdown(srv *http.Server, cfg *config.Config, cancelRun context.CancelFunc) error {
	d.ready.Store(false)
	timeout := cfg.ShutdownTimeout
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, ErrShutdownTimeout)
	defer cancel()
	start := time.Now()

	d.mu.Lock()
	started := d.started
	d.started = nil
	d.mu.Unlock()
	var errs []error
	for i := len(started) - 1; i >= 0; i-- {
		c := started[i]
		if err := c.Stop(ctx); err != nil {
			d.log.Error("component did not stop cleanly", "component", c.Name(), "error", err)
			errs = append(errs, fmt.Errorf("stopping %s: %w", c.Name(), err))
		} else {
			d.log.Debug("component stopped", "component", c.Name())
		}
	}
	cancelRun()
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the HTTP listener: %w", err))
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("%w (%s)", ErrShutdownTimeout, timeout))
	}
	if err := d.opts.Metrics.Shutdown(context.WithoutCancel(ctx)); err != nil {
		d.log.Debug("metrics provider shutdown", "error", err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	d.log.Info("kmirror stopped", "took", time.Since(start).Round(time.Millisecond))
	return nil
}
