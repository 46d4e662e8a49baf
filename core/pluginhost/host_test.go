package pluginhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testlog"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// The test plugins, built once for the package by TestMain.
var (
	filterBin, filterSum string // testdata/filterplugin
	v2Bin, v2Sum         string // testdata/v2plugin: protocol major 2
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pluginhost-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := func(pkg string) (string, string) {
		out := filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s := sha256.Sum256(b)
		return out, hex.EncodeToString(s[:])
	}
	filterBin, filterSum = build("testdata/filterplugin")
	v2Bin, v2Sum = build("testdata/v2plugin")
	if os.Getenv("KMIRROR_TEST_ORPHAN_HOST") == "1" {
		orphanHost() // never returns
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newHost makes a Host whose log lines (JSON) go to the returned buffer,
// closed when the test ends.
func newHost(t *testing.T, specs []pluginhost.Spec, opts pluginhost.Options) (*pluginhost.Host, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "kmirror", Output: logs, JSONFormat: true, Level: hclog.Debug})
	h, err := pluginhost.New(specs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, logs
}

func filterSpec(name string, cfg plugin.Config) pluginhost.Spec {
	return pluginhost.Spec{Name: name, Kind: plugin.KindFilter, Path: filterBin, SHA256: filterSum, Config: cfg}
}

// withEnv is an Options.Command that runs the spec's file (the test filter
// for a built-in) with env: how the tests set the test filter's
// KMIRROR_TEST_* variables.
func withEnv(env ...string) func(pluginhost.Spec) (*exec.Cmd, error) {
	return func(s pluginhost.Spec) (*exec.Cmd, error) {
		path := s.Path
		if path == "" {
			path = filterBin
		}
		cmd := exec.Command(path)
		cmd.Env = env
		return cmd, nil
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func topics(names ...string) []filter.Topic {
	var out []filter.Topic
	for _, n := range names {
		out = append(out, filter.Topic{Name: n, Partitions: 1})
	}
	return out
}

func TestStartFilterAndCall(t *testing.T) {
	t.Parallel()
	h, _ := newHost(t, []pluginhost.Spec{filterSpec("keep-orders", nil)}, pluginhost.Options{Command: withEnv("KMIRROR_TEST_KEEP=orders")})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := h.Filter("keep-orders")
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.FilterTopics(context.Background(), "dc1", topics("orders-eu", "payments", "orders-us"))
	if err != nil {
		t.Fatal(err)
	}
	if names := filtertest.TopicNames(got); len(names) != 2 || names[0] != "orders-eu" || names[1] != "orders-us" {
		t.Errorf("FilterTopics kept %v, want orders-eu, orders-us", names)
	}
	// The handle is a filter like any other.
	filtertest.Run(t, f)
	if _, err := h.Auth("keep-orders"); err == nil || !strings.Contains(err.Error(), "is a filter plugin, not auth") {
		t.Errorf("Auth(filter plugin) = %v, want a kind error", err)
	}
	if _, err := h.StateStore("nope"); err == nil || !strings.Contains(err.Error(), `no plugin named "nope"`) {
		t.Errorf("StateStore(unknown) = %v", err)
	}
}

func TestChecksumMismatchIsNotStarted(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	wrong := strings.Repeat("0", 64)
	spec := filterSpec("f", nil)
	spec.SHA256 = wrong
	h, _ := newHost(t, []pluginhost.Spec{spec}, pluginhost.Options{Command: withEnv("KMIRROR_TEST_MARKER=" + marker)})
	err := h.Start(context.Background())
	if err == nil {
		t.Fatal("Start succeeded with a wrong checksum")
	}
	for _, want := range []string{"plugin.filter.f", filterBin, filterSum, wrong, "not started"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the plugin ran (marker: %v)", err)
	}
	if st, _ := h.Status("f"); st.Running {
		t.Errorf("Status = %+v, want not running", st)
	}
}

func TestMissingFile(t *testing.T) {
	t.Parallel()
	spec := filterSpec("f", nil)
	spec.Path = filepath.Join(t.TempDir(), "kmirror-filter-gone")
	h, _ := newHost(t, []pluginhost.Spec{spec}, pluginhost.Options{})
	err := h.Start(context.Background())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), spec.Path) {
		t.Fatalf("Start = %v, want an error naming %s and wrapping fs.ErrNotExist", err, spec.Path)
	}
}

func TestWrongMajorVersionRefused(t *testing.T) {
	t.Parallel()
	spec := pluginhost.Spec{Name: "future", Kind: plugin.KindFilter, Path: v2Bin, SHA256: v2Sum}
	h, _ := newHost(t, []pluginhost.Spec{spec}, pluginhost.Options{})
	err := h.Start(context.Background())
	if err == nil {
		t.Fatal("Start accepted a plugin of protocol version 2")
	}
	for _, want := range []string{"plugin.filter.future", "refused", "filter protocol version 2", fmt.Sprintf("this kmirror speaks version %d", filter.ProtocolMajor)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestConfigOutsideSchemaNamesTheKey(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	h, _ := newHost(t, []pluginhost.Spec{filterSpec("f", plugin.Config{"keep": 3, "marker": marker, "colour": "red"})}, pluginhost.Options{Command: withEnv("KMIRROR_TEST_SCHEMA=1")})
	err := h.Start(context.Background())
	if !errors.Is(err, plugin.ErrInvalidConfig) {
		t.Fatalf("Start = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"plugins.f.config.keep: must be a string", "plugins.f.config.colour: unknown key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the plugin was configured although its block breaks its schema (marker: %v)", err)
	}
}

func TestPluginLogsAreRelogged(t *testing.T) {
	t.Parallel()
	h, logs := newHost(t, []pluginhost.Spec{filterSpec("audit", nil)}, pluginhost.Options{Command: withEnv()})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The plugin logs "serving" as it starts; the line crosses a pipe,
	// so it may land just after Start returns.
	waitFor(t, "the plugin's serving line", func() bool { return len(logs.Messages("serving")) > 0 })
	st, _ := h.Status("audit")
	line := logs.Messages("serving")[0]
	if line["@module"] != "plugin.filter.audit" || line["pid"] != float64(st.Pid) || line["module"] != "filter" {
		t.Errorf("plugin line = %v, want @module plugin.filter.audit and the plugin's own pid field %d", line, st.Pid)
	}
	if l := logs.Messages("plugin configured"); len(l) != 1 || l[0]["@module"] != "plugin.filter.audit" {
		t.Errorf("host lines about the plugin = %v, want one under plugin.filter.audit", l)
	}
}

func TestCrashedPluginIsRestartedAndConfiguredAgain(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	h, logs := newHost(t, []pluginhost.Spec{filterSpec("f", nil)}, pluginhost.Options{
		Command: withEnv("KMIRROR_TEST_KEEP=a", "KMIRROR_TEST_MARKER="+marker),
		// Long enough for the test to see the plugin down.
		Restart:       backoff.Fixed(time.Second),
		WatchInterval: 10 * time.Millisecond,
	})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, _ := h.Filter("f")
	ctx := context.Background()
	if _, err := f.FilterTopics(ctx, "dc1", topics("a1", "b1")); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Status("f")
	if !st.Running || st.Pid == 0 {
		t.Fatalf("Status = %+v, want running with a pid", st)
	}
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	var down error
	waitFor(t, "the handle to report the plugin unavailable", func() bool {
		_, down = f.FilterTopics(ctx, "dc1", topics("a1"))
		return errors.Is(down, pluginhost.ErrUnavailable)
	})
	if !errors.Is(down, filter.ErrUnavailable) {
		t.Errorf("error %v does not match filter.ErrUnavailable", down)
	}
	for _, want := range []string{"plugin.filter.f", "signal: killed"} {
		if !strings.Contains(down.Error(), want) {
			t.Errorf("error %q lacks %q", down, want)
		}
	}

	waitFor(t, "a new process", func() bool {
		now, _ := h.Status("f")
		return now.Running && now.Pid != st.Pid
	})
	got, err := f.FilterTopics(ctx, "dc1", topics("a1", "b1"))
	if err != nil || len(got) != 1 || got[0].Name != "a1" {
		t.Fatalf("after the restart FilterTopics = %v, %v; want a1", got, err)
	}
	b, _ := os.ReadFile(marker)
	if n := strings.Count(string(b), "started\n"); n != 2 {
		t.Errorf("the plugin was started %d times, want 2 (start and restart)", n)
	}
	if n := len(logs.Messages("plugin configured")); n != 2 {
		t.Errorf("the host configured the plugin %d times, want 2 (start and restart)", n)
	}
	if now, _ := h.Status("f"); now.Restarts != 1 {
		t.Errorf("Restarts = %d, want 1", now.Restarts)
	}
	if !strings.Contains(logs.String(), "plugin stopped; restarting it") {
		t.Errorf("no log line says the plugin stopped:\n%s", logs)
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	h, _ := newHost(t, []pluginhost.Spec{filterSpec("a", nil), filterSpec("b", nil)}, pluginhost.Options{Command: withEnv()})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, n := range h.Names() {
		st, _ := h.Status(n)
		if !alive(st.Pid) {
			t.Fatalf("plugin %s: pid %d is not alive", n, st.Pid)
		}
		pids = append(pids, st.Pid)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d outlived Close", pid)
		}
	}
	f, _ := h.Filter("a")
	if _, err := f.FilterTopics(context.Background(), "dc1", topics("x")); !errors.Is(err, pluginhost.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close FilterTopics = %v, want ErrUnavailable (closed)", err)
	}
}

func TestBuiltinRunsThroughTheCommand(t *testing.T) {
	t.Parallel()
	var asked []string
	var mu sync.Mutex
	h, _ := newHost(t, []pluginhost.Spec{{Name: "re", Kind: plugin.KindFilter, Builtin: "testfilter"}}, pluginhost.Options{
		Command: func(s pluginhost.Spec) (*exec.Cmd, error) {
			mu.Lock()
			asked = append(asked, string(s.Kind)+"/"+s.Builtin)
			mu.Unlock()
			return withEnv()(s)
		},
	})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Status("re")
	if !st.Running || st.InProcess || st.Builtin != "testfilter" {
		t.Errorf("Status = %+v, want a running built-in out of process", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || asked[0] != "filter/testfilter" {
		t.Errorf("Command asked for %v", asked)
	}
}

func TestDefaultCommandReexecutesKmirror(t *testing.T) {
	t.Parallel()
	cmd, err := pluginhost.DefaultCommand(pluginhost.Spec{Name: "sso", Kind: plugin.KindAuth, Builtin: "static"})
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if cmd.Path != exe || strings.Join(cmd.Args[1:], " ") != "plugin serve auth static" {
		t.Errorf("command = %s %v, want %s plugin serve auth static", cmd.Path, cmd.Args, exe)
	}
}

func TestBuiltinInProcess(t *testing.T) {
	t.Parallel()
	builtins := func(kind plugin.Kind, name string) (plugin.ServeConfig, bool) {
		if kind != plugin.KindAuth || name != "fixed" {
			return plugin.ServeConfig{}, false
		}
		return plugin.ServeConfig{
			Schema: plugin.Schema{{Name: "username", Type: plugin.FieldString, Required: true}},
			NewAuth: func(_ context.Context, _ string, c plugin.Config) (auth.Provider, error) {
				return fixedProvider{user: c["username"].(string)}, nil
			},
		}, true
	}
	h, _ := newHost(t, []pluginhost.Spec{{Name: "sso", Kind: plugin.KindAuth, Builtin: "fixed", Config: plugin.Config{"username": "mirror"}}},
		pluginhost.Options{InProcess: true, Builtins: builtins})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Auth("sso")
	creds, err := p.Credentials(context.Background(), auth.Request{Role: auth.RoleSource, Mechanism: auth.MechanismPlain})
	if err != nil || creds.Username != "mirror" {
		t.Fatalf("Credentials = %+v, %v", creds, err)
	}
	if st, _ := h.Status("sso"); !st.Running || !st.InProcess || st.Pid != 0 {
		t.Errorf("Status = %+v, want running in process", st)
	}

	// The schema is checked in process too, and names the key.
	bad, _ := newHost(t, []pluginhost.Spec{{Name: "sso", Kind: plugin.KindAuth, Builtin: "fixed"}}, pluginhost.Options{InProcess: true, Builtins: builtins})
	if err := bad.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "plugins.sso.config.username: required") {
		t.Errorf("Start without a required key = %v", err)
	}
	// An unknown built-in is refused before anything runs.
	if _, err := pluginhost.New([]pluginhost.Spec{{Name: "x", Kind: plugin.KindAuth, Builtin: "nope"}}, pluginhost.Options{InProcess: true, Builtins: builtins}); err == nil || !strings.Contains(err.Error(), `plugins.x.builtin: this kmirror has no built-in auth plugin "nope"`) {
		t.Errorf("New with an unknown built-in = %v", err)
	}
}

type fixedProvider struct{ user string }

func (p fixedProvider) Info() auth.Info {
	return auth.Info{Name: "fixed", Version: "1", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor, Mechanisms: []string{auth.MechanismPlain}}
}

func (p fixedProvider) Credentials(context.Context, auth.Request) (auth.Credentials, error) {
	return auth.Credentials{Username: p.user, Password: auth.NewSecret("pw")}, nil
}

func (p fixedProvider) Close() error { return nil }

func TestNewRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec pluginhost.Spec
		want string
	}{
		{pluginhost.Spec{Name: "A", Kind: plugin.KindFilter, Builtin: "x"}, "plugins.A: invalid plugin name"},
		{pluginhost.Spec{Name: "a", Kind: "cache", Builtin: "x"}, "plugins.a.kind"},
		{pluginhost.Spec{Name: "a", Kind: plugin.KindFilter}, "set exactly one of path and builtin"},
		{pluginhost.Spec{Name: "a", Kind: plugin.KindFilter, Path: filterBin}, "plugins.a.sha256: required with path"},
	} {
		if _, err := pluginhost.New([]pluginhost.Spec{tc.spec}, pluginhost.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want …%s…", tc.spec, err, tc.want)
		}
	}
	if _, err := pluginhost.New([]pluginhost.Spec{{Name: "sso", Kind: plugin.KindAuth, Builtin: "static"}}, pluginhost.Options{InProcess: true}); err == nil || !strings.Contains(err.Error(), "plugins.sso.builtin: plugin.builtin.in.process is true, but this kmirror cannot run built-ins in process") {
		t.Errorf("New in process without Builtins = %v", err)
	}
}

func TestUnavailableErrorMatchesTheKindsSentinel(t *testing.T) {
	t.Parallel()
	a := &pluginhost.UnavailableError{Kind: plugin.KindAuth, Name: "sso", Reason: "process 7 exited (exit status 2)"}
	if !errors.Is(a, pluginhost.ErrUnavailable) || !errors.Is(a, auth.ErrUnavailable) || errors.Is(a, filter.ErrUnavailable) {
		t.Errorf("auth UnavailableError matches wrongly: %v", a)
	}
	if want := "plugin.auth.sso is unavailable: process 7 exited (exit status 2)"; !strings.HasPrefix(a.Error(), want) {
		t.Errorf("Error() = %q, want prefix %q", a, want)
	}
	s := &pluginhost.UnavailableError{Kind: plugin.KindStateStore, Name: "etcd", Reason: "x"}
	if !errors.Is(s, pluginhost.ErrUnavailable) || errors.Is(s, auth.ErrUnavailable) || errors.Is(s, filter.ErrUnavailable) {
		t.Errorf("statestore UnavailableError matches wrongly: %v", s)
	}
}

// Ensure adds a plugin to a running host, leaves it alone when asked again
// with the same spec, replaces it when the spec changed, and Drop stops it.
func TestEnsureAddsReplacesAndDropsPlugins(t *testing.T) {
	t.Parallel()
	h, _ := newHost(t, []pluginhost.Spec{filterSpec("base", nil)}, pluginhost.Options{Command: withEnv("KMIRROR_TEST_KEEP=orders")})
	ctx := context.Background()
	if err := h.Ensure(ctx, filterSpec("late", nil)); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("Ensure before Start = %v, want refused", err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Ensure(ctx, filterSpec("late", nil)); err != nil {
		t.Fatal(err)
	}
	f, err := h.Filter("late")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.FilterTopics(ctx, "dc1", topics("orders-eu", "payments")); err != nil || len(got) != 1 {
		t.Fatalf("FilterTopics through the added plugin = %v, %v", got, err)
	}
	first, _ := h.Status("late")

	if err := h.Ensure(ctx, filterSpec("late", nil)); err != nil {
		t.Fatal(err)
	}
	if again, _ := h.Status("late"); again.Pid != first.Pid {
		t.Fatalf("Ensure with the same spec restarted the plugin (pid %d → %d)", first.Pid, again.Pid)
	}

	if err := h.Ensure(ctx, filterSpec("late", plugin.Config{})); err != nil {
		t.Fatal(err)
	}
	replaced, _ := h.Status("late")
	waitFor(t, "the replaced process to exit", func() bool { return !alive(first.Pid) })
	if replaced.Pid == first.Pid || !replaced.Running {
		t.Fatalf("changed spec: status %+v, first pid %d", replaced, first.Pid)
	}
	if got, err := f.FilterTopics(ctx, "dc1", topics("orders-eu")); err != nil || len(got) != 1 {
		t.Fatalf("the old handle after the replacement = %v, %v", got, err)
	}

	h.Drop("late")
	waitFor(t, "the dropped process to exit", func() bool { return !alive(replaced.Pid) })
	if _, ok := h.Status("late"); ok {
		t.Fatal("a dropped plugin is still listed")
	}
	if _, err := f.FilterTopics(ctx, "dc1", topics("x")); !errors.Is(err, pluginhost.ErrUnavailable) {
		t.Fatalf("a dropped plugin's handle = %v, want ErrUnavailable", err)
	}
	if err := h.Ensure(ctx, pluginhost.Spec{Name: "Bad Name", Kind: plugin.KindFilter, Path: filterBin, SHA256: filterSum}); err == nil {
		t.Fatal("Ensure accepted an invalid spec")
	}
}

// orphanHost is the daemon of TestAPluginDiesWithItsHost, run as a child
// process: it starts one plugin, prints its pid and waits to be killed.
func orphanHost() {
	h, err := pluginhost.New([]pluginhost.Spec{filterSpec("orphan", nil)}, pluginhost.Options{Command: withEnv()})
	if err == nil {
		err = h.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	st, _ := h.Status("orphan")
	fmt.Println(st.Pid)
	select {}
}

// A daemon killed with SIGKILL takes its plugins with it: an orphaned
// plugin would keep running (and a file store's lock with it).
func TestAPluginDiesWithItsHost(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KMIRROR_TEST_ORPHAN_HOST=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil || pid <= 0 {
		_ = cmd.Process.Kill()
		t.Fatalf("reading the plugin's pid: %v", err)
	}
	if !alive(pid) {
		t.Fatalf("plugin %d is not running", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, "the plugin to die with its host", func() bool { return !alive(pid) })
}

// A plugin runs in a process group of its own: a signal to the daemon's
// group (Ctrl-C in a terminal) does not reach it.
func TestAPluginHasItsOwnProcessGroup(t *testing.T) {
	t.Parallel()
	h, _ := newHost(t, []pluginhost.Spec{filterSpec("group", nil)}, pluginhost.Options{Command: withEnv()})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Status("group")
	pgid, err := syscall.Getpgid(st.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != st.Pid || pgid == syscall.Getpgrp() {
		t.Fatalf("plugin %d is in process group %d (ours %d), want its own", st.Pid, pgid, syscall.Getpgrp())
	}
}
