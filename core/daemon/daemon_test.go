package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testlog"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// recorder is a Component that records the calls it receives.
type recorder struct {
	name      string
	mu        *sync.Mutex
	calls     *[]string
	reloadErr error
	stopDelay time.Duration
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) log(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.calls = append(*r.calls, r.name+"."+s)
}
func (r *recorder) Start(context.Context, *config.Config) error { r.log("start"); return nil }
func (r *recorder) Reload(_ context.Context, cfg *config.Config) error {
	if r.reloadErr != nil {
		r.log("reload-rejected")
		return r.reloadErr
	}
	r.log("reload:" + cfg.LogLevel)
	return nil
}
func (r *recorder) Stop(ctx context.Context) error {
	r.log("stop")
	select {
	case <-time.After(r.stopDelay):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func configYAML(level string, shutdownMS int) string {
	return fmt.Sprintf(`
log.level: %s
http.address: 127.0.0.1:0
shutdown.timeout.ms: %d
destination:
  bootstrap.servers: 127.0.0.1:9092
state:
  dir: %s
`, level, shutdownMS, "/tmp/kmirror-daemon-test")
}

type harness struct {
	d      *Daemon
	logs   *testlog.Buffer
	calls  *[]string
	mu     *sync.Mutex
	yaml   *string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned; runErr holds its result
	runErr error
	reload chan struct{}
}

func startDaemon(t *testing.T, comps func(mu *sync.Mutex, calls *[]string) []Component, shutdownMS int) *harness {
	t.Helper()
	h := &harness{logs: &testlog.Buffer{}, calls: new([]string), mu: new(sync.Mutex), reload: make(chan struct{})}
	y := configYAML("info", shutdownMS)
	h.yaml = &y
	logger, err := logging.New(h.logs, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	h.d, err = New(Options{
		Load: func() (*config.Config, error) {
			mu.Lock()
			defer mu.Unlock()
			return config.Parse([]byte(*h.yaml), "yaml", nil, nil)
		},
		Logger:     logger,
		Metrics:    mp,
		Components: comps(h.mu, h.calls),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan struct{})
	go func() { h.runErr = h.d.Run(ctx, h.reload); close(h.done) }()
	kfaketest.WaitFor(t, "the daemon to become ready", func() (bool, string) {
		return h.d.Addr() != "" && h.d.ready.Load(), "logs:\n" + h.logs.String()
	})
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
		}
	})
	return h
}

func (h *harness) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + h.d.Addr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *harness) stop(t *testing.T) error {
	t.Helper()
	h.cancel()
	select {
	case <-h.done:
		return h.runErr
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancellation")
		return nil
	}
}

func (h *harness) callList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), (*h.calls)...)
}

func twoComponents(mu *sync.Mutex, calls *[]string) []Component {
	return []Component{&recorder{name: "a", mu: mu, calls: calls}, &recorder{name: "b", mu: mu, calls: calls}}
}

func TestEndpointsServeHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, twoComponents, 5000)
	if code, body := h.get(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := h.get(t, "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	code, body := h.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{"kmirror_build_info{", "kmirror_ready 1", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestComponentsStartInOrderAndStopInReverse(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, twoComponents, 5000)
	if err := h.stop(t); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	got := strings.Join(h.callList(), " ")
	if got != "a.start b.start b.stop a.stop" {
		t.Fatalf("call order = %q, want %q", got, "a.start b.start b.stop a.stop")
	}
	if !strings.Contains(h.logs.String(), "kmirror stopped") {
		t.Fatalf("no stop log line:\n%s", h.logs)
	}
}

func TestReloadAppliesValidConfigAndKeepsOldOnInvalid(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, twoComponents, 5000)
	// A valid change reaches the components and the logger.
	*h.yaml = configYAML("debug", 5000)
	h.reload <- struct{}{}
	kfaketest.WaitFor(t, "log level to become debug", func() (bool, string) {
		return h.d.Config().LogLevel == "debug", "log level " + h.d.Config().LogLevel
	})
	if got := strings.Join(h.callList(), " "); !strings.Contains(got, "a.reload:debug b.reload:debug") {
		t.Fatalf("components did not get the reload: %q", got)
	}
	// An invalid file is rejected; the running config stays.
	*h.yaml = configYAML("debug", 5000) + "mirror.num.replica.fetchers: -3\n"
	h.reload <- struct{}{}
	kfaketest.WaitFor(t, "rejection to be logged", func() (bool, string) {
		return strings.Contains(h.logs.String(), "configuration reload rejected"), "logs:\n" + h.logs.String()
	})
	if !strings.Contains(h.logs.String(), "mirror.num.replica.fetchers") {
		t.Fatalf("rejection log does not name the key:\n%s", h.logs)
	}
	if h.d.Config().NumReplicaFetchers != 1 {
		t.Fatalf("running config changed to %d after a rejected reload", h.d.Config().NumReplicaFetchers)
	}
	if v, ok, _ := h.d.opts.Metrics.Value("kmirror_config_reloads_total", map[string]string{"result": "rejected"}); !ok || v != 1 {
		t.Fatalf("rejected reloads metric = %v (found %v), want 1", v, ok)
	}
	if v, ok, _ := h.d.opts.Metrics.Value("kmirror_config_reloads_total", map[string]string{"result": "applied"}); !ok || v != 1 {
		t.Fatalf("applied reloads metric = %v (found %v), want 1", v, ok)
	}
}

func TestReloadRejectedByComponentKeepsOldConfig(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, func(mu *sync.Mutex, calls *[]string) []Component {
		return []Component{&recorder{name: "a", mu: mu, calls: calls, reloadErr: errors.New("cannot change that at run time")}}
	}, 5000)
	*h.yaml = configYAML("debug", 5000)
	h.reload <- struct{}{}
	kfaketest.WaitFor(t, "component rejection to be logged", func() (bool, string) {
		return strings.Contains(h.logs.String(), "cannot change that at run time"), "logs:\n" + h.logs.String()
	})
	if h.d.Config().LogLevel != "info" {
		t.Fatalf("log level = %q after a rejected reload, want info", h.d.Config().LogLevel)
	}
}

func TestShutdownDeadlineIsEnforced(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, func(mu *sync.Mutex, calls *[]string) []Component {
		return []Component{&recorder{name: "slow", mu: mu, calls: calls, stopDelay: time.Hour}}
	}, 200)
	start := time.Now()
	err := h.stop(t)
	if !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Run returned %v, want ErrShutdownTimeout", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("shutdown took %s despite a 200ms deadline", time.Since(start))
	}
}

func TestReadyzReportsNotReadyWhileShuttingDown(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, twoComponents, 5000)
	h.d.ready.Store(false)
	if code, body := h.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready") {
		t.Fatalf("/readyz = %d %q, want 503", code, body)
	}
}

// describing is a component that reports a status.
type describing struct{ recorder }

func (describing) Describe() any { return map[string]int{"partitions": 3} }

func TestDescribeCollectsComponentStatus(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, func(mu *sync.Mutex, calls *[]string) []Component {
		return []Component{&describing{recorder{name: "mirrors", mu: mu, calls: calls}}, &recorder{name: "plain", mu: mu, calls: calls}}
	}, 5000)
	h.enableStatus(t)
	code, body := h.get(t, "/v1/describe")
	if code != 200 {
		t.Fatalf("/v1/describe = %d", code)
	}
	var got map[string]map[string]int
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	if len(got) != 1 || got["mirrors"]["partitions"] != 3 {
		t.Fatalf("describe = %v, want only the describing component", got)
	}
}

func TestPprofServedOnlyWhileSwitchedOn(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, twoComponents, 5000)
	// Off by default: nothing under /debug/pprof/.
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, _ := h.get(t, p); code != http.StatusNotFound {
			t.Fatalf("GET %s with http.pprof.enable off = %d, want 404", p, code)
		}
	}

	// Switched on by a reload: the index and the profiles answer.
	*h.yaml = configYAML("info", 5000) + "http.pprof.enable: true\n"
	h.reload <- struct{}{}
	kfaketest.WaitFor(t, "http.pprof.enable to be in force", func() (bool, string) {
		return h.d.Config().HTTPPprofEnable, "logs:\n" + h.logs.String()
	})
	if code, body := h.get(t, "/debug/pprof/"); code != 200 || !strings.Contains(body, "heap") || !strings.Contains(body, "goroutine") {
		t.Fatalf("GET /debug/pprof/ = %d, want 200 and the list of profiles:\n%s", code, body)
	}
	if code, body := h.get(t, "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile:") {
		t.Fatalf("GET /debug/pprof/heap?debug=1 = %d, want 200 and a heap profile:\n%.500s", code, body)
	}
	// The binary form is a gzipped protocol buffer, what `go tool pprof` reads.
	if code, body := h.get(t, "/debug/pprof/heap"); code != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Fatalf("GET /debug/pprof/heap = %d, want 200 and a gzipped profile (%d bytes)", code, len(body))
	}
	if code, body := h.get(t, "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("GET /debug/pprof/goroutine?debug=1 = %d:\n%.500s", code, body)
	}

	// The command line is never served: it may hold a secret (--set).
	if code, body := h.get(t, "/debug/pprof/cmdline"); code == 200 {
		t.Fatalf("GET /debug/pprof/cmdline = 200, want it refused:\n%s", body)
	}

	// Switched off again: 404 once more, and the other endpoints are unaffected.
	*h.yaml = configYAML("info", 5000)
	h.reload <- struct{}{}
	kfaketest.WaitFor(t, "http.pprof.enable to be off", func() (bool, string) {
		return !h.d.Config().HTTPPprofEnable, "logs:\n" + h.logs.String()
	})
	if code, _ := h.get(t, "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Fatalf("GET /debug/pprof/heap after switching off = %d, want 404", code)
	}
	if code, _ := h.get(t, "/metrics"); code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
}

// unready is a component whose readiness checks fail while why is set.
type unready struct {
	recorder
	mu  sync.Mutex
	why []string
}

func (u *unready) NotReady(*config.Config, time.Time) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.why
}

func (u *unready) set(why ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.why = why
}

// TestReadyzFollowsComponentChecks: /readyz answers 503 with the reasons
// while a component's readiness check fails, and kmirror_ready follows it.
func TestReadyzFollowsComponentChecks(t *testing.T) {
	t.Parallel()
	u := &unready{}
	h := startDaemon(t, func(mu *sync.Mutex, calls *[]string) []Component {
		u.recorder = recorder{name: "engine", mu: mu, calls: calls}
		return []Component{u}
	}, 5000)
	if code, body := h.get(t, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz = %d %q, want 200", code, body)
	}
	u.set("mirror m: the source cluster has been unreachable for 20s: connection refused")
	code, body := h.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "source cluster has been unreachable") {
		t.Fatalf("/readyz = %d %q, want 503 naming the cluster", code, body)
	}
	if _, m := h.get(t, "/metrics"); !strings.Contains(m, "kmirror_ready 0") {
		t.Fatalf("kmirror_ready is not 0 while /readyz fails:\n%s", m)
	}
	u.set()
	if code, _ := h.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d after the check passed, want 200", code)
	}
	if _, m := h.get(t, "/metrics"); !strings.Contains(m, "kmirror_ready 1") {
		t.Fatalf("kmirror_ready is not 1 again:\n%s", m)
	}
}

type live struct{ recorder }

func (live) Live() any { return map[string]string{"mirrors": "shown"} }

// TestStatusPageAndItsData: GET / is the status page (HTML), GET /v1/live
// the data of the component that has a status page; without one, /v1/live
// says so (503); other paths stay 404.
func TestStatusPageAndItsData(t *testing.T) {
	t.Parallel()
	h := startDaemon(t, func(mu *sync.Mutex, calls *[]string) []Component {
		return []Component{&recorder{name: "plain", mu: mu, calls: calls}, &live{recorder{name: "mirrors", mu: mu, calls: calls}}}
	}, 5000)
	// Off by default (the listener is unauthenticated): 404 saying how to
	// turn them on, for the page, its data and describe alike.
	for _, p := range []string{"/", "/v1/live", "/v1/describe"} {
		if code, body := h.get(t, p); code != 404 || !strings.Contains(body, "http.status.enable: true") {
			t.Errorf("GET %s with http.status.enable off = %d %q", p, code, body)
		}
	}
	h.enableStatus(t)
	if code, body := h.get(t, "/"); code != 200 || !strings.Contains(body, "<title>kmirror status</title>") {
		t.Errorf("GET / = %d %.80q", code, body)
	}
	if code, body := h.get(t, "/v1/live"); code != 200 || strings.TrimSpace(body) != `{"mirrors":"shown"}` {
		t.Errorf("GET /v1/live = %d %q", code, body)
	}
	if code, _ := h.get(t, "/nothing-here"); code != 404 {
		t.Errorf("GET /nothing-here = %d, want 404", code)
	}
	bare := startDaemon(t, twoComponents, 5000)
	bare.enableStatus(t)
	if code, body := bare.get(t, "/v1/live"); code != 503 || !strings.Contains(body, "no mirror engine") {
		t.Errorf("GET /v1/live without a status page = %d %q", code, body)
	}
}

// enableStatus turns http.status.enable on by a reload.
func (h *harness) enableStatus(t *testing.T) {
	t.Helper()
	*h.yaml = configYAML("info", 5000) + "http.status.enable: true\n"
	h.reload <- struct{}{}
	kfaketest.WaitFor(t, "http.status.enable to be in force", func() (bool, string) {
		return h.d.Config().HTTPStatusEnable, "logs:\n" + h.logs.String()
	})
}
