package admin_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/internal/testlog"
)

// observed is one call of Options.Observe.
type observed struct {
	route string
	code  int
}

// Every request answered is observed once with its route pattern (never
// the path, which holds a mirror name), its status and duration: a routed
// call, a refused token, an unknown path.
func TestObserveSeesEveryRequestByRoute(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{AdminAddress: "127.0.0.1:0", AdminTokenFile: tokenFile, State: config.State{Type: config.StateTypeFile, Dir: dir}}
	var mu sync.Mutex
	var got []observed
	h := &harness{t: t, ctl: &admintest.Controller{StatusValue: sampleStatus()}, logs: &testlog.Buffer{}, cfg: cfg, http: &http.Client{Timeout: 10 * time.Second}}
	srv, err := admin.New(admin.Options{Controller: h.ctl, Logger: hclog.New(&hclog.LoggerOptions{Output: h.logs}),
		Observe: func(route string, code int, took time.Duration) {
			if took < 0 {
				t.Errorf("Observe(%q, %d): negative duration %s", route, code, took)
			}
			mu.Lock()
			got = append(got, observed{route, code})
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	h.srv, h.url = srv, "http://"+srv.Addr()

	h.do(http.MethodGet, "/v1/mirrors", testToken, "")
	h.do(http.MethodGet, "/v1/mirrors/dc1", testToken, "")
	h.do(http.MethodGet, "/v1/mirrors/dc1", "wrong-token", "")
	h.do(http.MethodGet, "/v1/nothing-here", testToken, "")
	want := []observed{{admin.RouteList, 200}, {admin.RouteMirror, 200}, {admin.RouteMirror, 401}, {"", 404}}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
}
