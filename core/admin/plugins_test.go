package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testlog"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/core/config"
)

// fakePlugins is a PluginSource with fixed answers.
type fakePlugins []admin.PluginStatus

func (f fakePlugins) Plugins() []admin.PluginStatus { return f }

// startWithPlugins runs a Server whose PluginSource is src and returns
// the harness to call it.
func startWithPlugins(t *testing.T, src admin.PluginSource) *harness {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{AdminAddress: "127.0.0.1:0", AdminTokenFile: tokenFile, State: config.State{Type: config.StateTypeFile, Dir: dir}}
	h := &harness{t: t, ctl: &admintest.Controller{}, logs: &testlog.Buffer{}, cfg: cfg, http: &http.Client{Timeout: 10 * time.Second}}
	srv, err := admin.New(admin.Options{Controller: h.ctl, Plugins: src, Logger: hclog.New(&hclog.LoggerOptions{Output: h.logs})})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	h.srv, h.url = srv, "http://"+srv.Addr()
	return h
}

func TestPluginsListsWhatTheHostReports(t *testing.T) {
	t.Parallel()
	want := []admin.PluginStatus{
		{Name: "keep", Kind: "filter", Running: true, Pid: 4242, Restarts: 2, Version: "1.2.0", ProtocolMajor: 1, ProtocolMinor: 0},
		{Name: "sso", Kind: "auth", Builtin: "oauth", Reason: "process 17 exited (exit status 1); the host restarts it", ProtocolMajor: 1},
	}
	h := startWithPlugins(t, fakePlugins(want))
	code, body := h.do(http.MethodGet, "/v1/plugins", testToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/plugins: %d %s", code, body)
	}
	var got admin.PluginList
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plugins) != 2 || got.Plugins[0] != want[0] || got.Plugins[1] != want[1] {
		t.Fatalf("plugins = %+v, want %+v", got.Plugins, want)
	}
	// The field names are stable: the CLI and scripts read them.
	var raw map[string][]map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "kind", "running", "in_process", "pid", "restarts", "version", "protocol_major", "protocol_minor"} {
		if _, ok := raw["plugins"][0][k]; !ok {
			t.Errorf("field %q missing from %s", k, body)
		}
	}
	if raw["plugins"][1]["reason"] == nil || raw["plugins"][1]["builtin"] != "oauth" {
		t.Errorf("reason or builtin missing from %s", body)
	}
}

func TestPluginsNeedsTheTokenAndIsEmptyWithoutAHost(t *testing.T) {
	t.Parallel()
	h := startWithPlugins(t, nil)
	if code, body := h.do(http.MethodGet, "/v1/plugins", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s, want 401", code, body)
	}
	code, body := h.do(http.MethodGet, "/v1/plugins", testToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/plugins: %d %s", code, body)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	if l, ok := raw["plugins"].([]any); !ok || len(l) != 0 {
		t.Fatalf("plugins = %v, want an empty list (not null)", raw["plugins"])
	}
}
