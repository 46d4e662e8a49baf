package pyfilter_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testlog"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/internal/pyfilter"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// The Python plugin, launched through the real host: AutoMTLS on, its
// checksum taken from the launcher. A missing python3 or virtualenv fails
// these tests (CI installs both: scripts/install-deps.sh); they never skip.

func launcher(t *testing.T) pyfilter.Plugin {
	t.Helper()
	p, err := pyfilter.Launcher()
	if err != nil {
		t.Fatalf("the Python filter plugin cannot be prepared: %v", err)
	}
	return p
}

// start launches the Python plugin as filter plugin "py" with cfg, and
// fails the test when the host cannot start it.
func start(t *testing.T, cfg plugin.Config, opts pluginhost.Options) (*pluginhost.Host, filter.Filter, *testlog.Buffer) {
	t.Helper()
	h, logs, err := tryStart(t, cfg, opts)
	if err != nil {
		t.Fatalf("start the Python plugin: %v\nhost log:\n%s", err, logs)
	}
	f, err := h.Filter("py")
	if err != nil {
		t.Fatal(err)
	}
	return h, f, logs
}

func tryStart(t *testing.T, cfg plugin.Config, opts pluginhost.Options) (*pluginhost.Host, *testlog.Buffer, error) {
	t.Helper()
	p := launcher(t)
	logs := &testlog.Buffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "kmirror", Output: logs, JSONFormat: true, Level: hclog.Debug})
	spec := pluginhost.Spec{Name: "py", Kind: plugin.KindFilter, Path: p.Path, SHA256: p.SHA256, Config: cfg}
	h, err := pluginhost.New([]pluginhost.Spec{spec}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, logs, h.Start(context.Background())
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func ids(groups []filter.Group) []string {
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		out = append(out, g.ID)
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestConfigOutsideTheSchemaIsRefusedNamingTheKey(t *testing.T) {
	t.Parallel()
	// The host checks the block against the schema the plugin declared:
	// the list of known keys in the error comes from the Python side.
	_, _, err := tryStart(t, plugin.Config{"prefixes": []any{"orders-"}, "colour": "red", "drop_states": "Dead"}, pluginhost.Options{})
	if !errors.Is(err, plugin.ErrInvalidConfig) {
		t.Fatalf("Start = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{
		"plugins.py.config.colour: unknown key (known: drop_states, prefixes, prefixes_file)",
		"plugins.py.config.drop_states: must be a list of strings",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "red") {
		t.Errorf("error %q quotes a configured value", err)
	}
}

func TestPluginRefusesAValueNamingTheKey(t *testing.T) {
	t.Parallel()
	// An empty prefix fits the schema (a list of strings): only the
	// plugin's Configure can refuse it, through a google.rpc.BadRequest.
	_, logs, err := tryStart(t, plugin.Config{"prefixes": []any{"orders-", ""}}, pluginhost.Options{})
	if !errors.Is(err, plugin.ErrInvalidConfig) {
		t.Fatalf("Start = %v, want ErrInvalidConfig", err)
	}
	want := "plugins.py.config.prefixes: item 1 is empty, which would pass every group"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	// The plugin said so in its own log, re-logged by the host.
	waitFor(t, "the plugin's log line about the refusal", func() bool { return len(logs.Messages("configuration refused")) > 0 })
	if l := logs.Messages("configuration refused")[0]; l["@module"] != "plugin.filter.py" || l["module"] != "python-groups" {
		t.Errorf("re-logged line = %v, want @module plugin.filter.py and the plugin's module python-groups", l)
	}
}

func TestFilterGroupsKeepsPrefixesAndDropsDeadGroups(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "prefixes")
	writeFile(t, file, "# maintained by the platform team\naudit-\n\n")
	_, f, _ := start(t, plugin.Config{"prefixes": []any{"orders-", "billing-"}, "prefixes_file": file}, pluginhost.Options{})

	info := f.Info()
	if info.Name != "python-groups" || info.ProtocolMajor != filter.ProtocolMajor || !slices.Equal(info.Kinds, []filter.Kind{filter.Groups}) {
		t.Errorf("Info = %+v, want python-groups, protocol %d, groups only", info, filter.ProtocolMajor)
	}
	in := []filter.Group{
		{ID: "orders-eu", Kind: "consumer", State: "Stable"},
		{ID: "orders-old", Kind: "classic", State: "Dead"},
		{ID: "payments", Kind: "consumer", State: "Empty"},
		{ID: "billing-1", Kind: "share", State: "Empty"},
		{ID: "audit-x", Kind: "classic", State: "PreparingRebalance"},
		{ID: "", Kind: "classic", State: "Empty"},
	}
	got, err := f.FilterGroups(context.Background(), "dc1", in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders-eu", "billing-1", "audit-x"}; !slices.Equal(ids(got), want) {
		t.Errorf("FilterGroups kept %v, want %v", ids(got), want)
	}
	// Topics are not its kind: the host does not ask, everything passes.
	topics := []filter.Topic{{Name: "anything", Partitions: 1}}
	if got, err := f.FilterTopics(context.Background(), "dc1", topics); err != nil || len(got) != 1 {
		t.Errorf("FilterTopics = %v, %v; want the topic through untouched", got, err)
	}
}

func TestFilterGroupsAnswersABatchOfManyChunks(t *testing.T) {
	t.Parallel()
	_, f, _ := start(t, plugin.Config{"prefixes": []any{"keep-"}, "drop_states": []any{"dead", "empty"}}, pluginhost.Options{})
	// About 3 MiB of groups: the host sends them in several chunks of at
	// most 1 MiB, and the plugin answers each in order.
	var in []filter.Group
	var want []string
	pad := strings.Repeat("x", 80)
	for i := range 30000 {
		g := filter.Group{ID: fmt.Sprintf("drop-%d-%s", i, pad), Kind: "consumer", State: "Stable"}
		switch i % 3 {
		case 0:
			g.ID = fmt.Sprintf("keep-%d-%s", i, pad)
			want = append(want, g.ID)
		case 1:
			g.ID = fmt.Sprintf("keep-%d-%s", i, pad)
			g.State = "Empty" // dropped: drop_states is case-insensitive
		}
		in = append(in, g)
	}
	got, err := f.FilterGroups(context.Background(), "dc1", in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), want) {
		t.Errorf("FilterGroups kept %d groups, want %d (first kept: %v)", len(got), len(want), ids(got)[:min(3, len(got))])
	}
}

func TestUnreadablePrefixesFileIsTheUnavailableSentinel(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "prefixes")
	writeFile(t, file, "orders-\n")
	_, f, _ := start(t, plugin.Config{"prefixes_file": file}, pluginhost.Options{})
	ctx := context.Background()
	groups := []filter.Group{{ID: "orders-eu", State: "Stable"}, {ID: "payments", State: "Stable"}}
	if got, err := f.FilterGroups(ctx, "dc1", groups); err != nil || !slices.Equal(ids(got), []string{"orders-eu"}) {
		t.Fatalf("FilterGroups = %v, %v; want orders-eu", ids(got), err)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	_, err := f.FilterGroups(ctx, "dc1", groups)
	if !errors.Is(err, filter.ErrUnavailable) {
		t.Fatalf("FilterGroups without its prefixes file = %v, want filter.ErrUnavailable", err)
	}
	// The filter answered (it is up): it is not the host's "plugin down".
	if errors.Is(err, pluginhost.ErrUnavailable) || errors.Is(err, filter.ErrInvalidConfig) {
		t.Errorf("error %v matches more than the filter's own sentinel", err)
	}
	if !strings.Contains(err.Error(), "cannot read prefixes_file "+file) {
		t.Errorf("error %q does not name the file", err)
	}

	// The file is the live list: once back, with a new prefix, it decides again.
	writeFile(t, file, "payments\n")
	if got, err := f.FilterGroups(ctx, "dc1", groups); err != nil || !slices.Equal(ids(got), []string{"payments"}) {
		t.Fatalf("FilterGroups after the file came back = %v, %v; want payments", ids(got), err)
	}
}

func TestKilledPluginIsRestartedAndDecidesAgain(t *testing.T) {
	t.Parallel()
	h, f, logs := start(t, plugin.Config{"prefixes": []any{"orders-"}}, pluginhost.Options{
		// Long enough for the test to see the plugin down.
		Restart:       backoff.Fixed(time.Second),
		WatchInterval: 10 * time.Millisecond,
	})
	ctx := context.Background()
	groups := []filter.Group{{ID: "orders-eu", State: "Stable"}, {ID: "payments", State: "Stable"}}
	if _, err := f.FilterGroups(ctx, "dc1", groups); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Status("py")
	if !st.Running || st.Pid == 0 {
		t.Fatalf("Status = %+v, want running with a pid", st)
	}
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var down error
	waitFor(t, "the handle to report the plugin unavailable", func() bool {
		_, down = f.FilterGroups(ctx, "dc1", groups)
		return errors.Is(down, pluginhost.ErrUnavailable)
	})
	if !errors.Is(down, filter.ErrUnavailable) || !strings.Contains(down.Error(), "plugin.filter.py") {
		t.Errorf("error %v: want filter.ErrUnavailable naming plugin.filter.py", down)
	}
	waitFor(t, "a new process", func() bool {
		now, _ := h.Status("py")
		return now.Running && now.Pid != st.Pid
	})
	got, err := f.FilterGroups(ctx, "dc1", groups)
	if err != nil || !slices.Equal(ids(got), []string{"orders-eu"}) {
		t.Fatalf("after the restart FilterGroups = %v, %v; want orders-eu", ids(got), err)
	}
	if now, _ := h.Status("py"); now.Restarts != 1 {
		t.Errorf("Restarts = %d, want 1", now.Restarts)
	}
	// Configured again by the host: the new process logged it too.
	waitFor(t, "the new process's configured line", func() bool { return len(logs.Messages("configured")) == 2 })
}

func TestCloseShutsThePluginDownGracefully(t *testing.T) {
	t.Parallel()
	h, _, logs := start(t, nil, pluginhost.Options{})
	st, _ := h.Status("py")
	waitFor(t, "the plugin's serving line", func() bool { return len(logs.Messages("serving")) > 0 })
	if l := logs.Messages("serving")[0]; l["pid"] != float64(st.Pid) || l["@module"] != "plugin.filter.py" {
		t.Errorf("serving line = %v, want the plugin's pid %d under plugin.filter.py", l, st.Pid)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if alive(st.Pid) {
		t.Errorf("the plugin process %d outlived Close", st.Pid)
	}
	// It stopped on go-plugin's GRPCController.Shutdown, not on a kill:
	// its last words crossed the pipe before it exited.
	if !poll(func() bool { return len(logs.Messages("shutting down")) == 1 }) {
		t.Errorf("the plugin did not log that it shuts down; host log:\n%s", logs)
	}
}

// poll reports whether cond holds before a deadline.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func TestPluginRefusesAPeerWithoutTheHostsCertificate(t *testing.T) {
	t.Parallel()
	_, f, logs := start(t, nil, pluginhost.Options{})
	waitFor(t, "the plugin's serving line", func() bool { return len(logs.Messages("serving")) > 0 })
	addr, _ := logs.Messages("serving")[0]["address"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("the plugin serves on %q, want loopback", addr)
	}
	// Another local process, without the host's client certificate: the
	// TLS handshake fails (with TLS 1.3, at the first read at the latest).
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err == nil {
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err == nil {
			_, err = conn.Read(make([]byte, 1))
		}
	}
	if err == nil {
		t.Fatal("the plugin answered a peer that has no client certificate")
	}
	waitFor(t, "the plugin's log line about the refusal", func() bool {
		return len(logs.Messages("refused a connection: TLS handshake failed")) > 0
	})
	// The host's own connection is unaffected.
	if _, err := f.FilterGroups(context.Background(), "dc1", []filter.Group{{ID: "a", State: "Stable"}}); err != nil {
		t.Errorf("FilterGroups after the refusal = %v", err)
	}
}
