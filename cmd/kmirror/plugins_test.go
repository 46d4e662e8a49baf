package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/plugincmd"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// The test filter plugin of core/pluginhost, built once for the tests
// that need a real plugin.
var testPlugin struct {
	once sync.Once
	dir  string
	err  error
}

// testFilterPlugin returns a fresh copy of the test filter plugin, named
// file, in a directory of its own, and its SHA-256.
func testFilterPlugin(t *testing.T, file string) (path, sum string) {
	t.Helper()
	testPlugin.once.Do(func() {
		testPlugin.dir = filepath.Join(filepath.Dir(binary), "plugins")
		build := exec.Command("go", "build", "-o", filepath.Join(testPlugin.dir, "filterplugin"), "../../core/pluginhost/testdata/filterplugin")
		if out, err := build.CombinedOutput(); err != nil {
			testPlugin.err = fmt.Errorf("building the test plugin: %v\n%s", err, out)
		}
	})
	if testPlugin.err != nil {
		t.Fatal(testPlugin.err)
	}
	b, err := os.ReadFile(filepath.Join(testPlugin.dir, "filterplugin"))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, b, 0o700); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return path, hex.EncodeToString(s[:])
}

// pluginConfig writes a configuration whose destination needs a password
// file that does not exist yet (the plugin commands must not need it:
// writePassword creates it), with the given plugins: block, and returns
// it and its state.dir.
func pluginConfig(t *testing.T, extra, plugins string) (cfgPath, stateDir string) {
	t.Helper()
	stateDir, dir := t.TempDir(), t.TempDir()
	cfgPath = filepath.Join(dir, "kmirror.yaml")
	content := fmt.Sprintf(`%s
destination:
  bootstrap.servers: 127.0.0.1:9092
  security.protocol: SASL_PLAINTEXT
  sasl.mechanism: PLAIN
  sasl.username: kmirror
  sasl.password.file: %s
state:
  dir: %s
%s`, extra, filepath.Join(dir, "password"), stateDir, plugins)
	if err := os.WriteFile(cfgPath, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, stateDir
}

// writePassword creates the password file of pluginConfig's destination.
func writePassword(t *testing.T, cfgPath string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfgPath), "password"), []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPluginsInstallCopiesVerifiesAndPrintsTheEntry(t *testing.T) {
	t.Parallel()
	src, sum := testFilterPlugin(t, "kmirror-filter-keep")
	cfgPath, stateDir := pluginConfig(t, "", "")
	code, out, errOut := kmirror(t, nil, "plugins", "install", src, "--kind", "filter", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	installed := filepath.Join(stateDir, "plugins", "kmirror-filter-keep")
	fi, err := os.Stat(installed)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed file %v %v, want mode 0755", fi, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(installed)); len(entries) != 1 {
		t.Fatalf("the plugin directory holds %v, want the plugin alone", entries)
	}
	for _, want := range []string{"SHA-256 " + sum, "a kmirror filter plugin: test", "protocol " + filterProtocol, "does not edit the configuration file",
		"plugins:\n  keep:\n    kind: filter\n    path: kmirror-filter-keep\n    sha256: " + sum + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	// The printed entry is valid: config validate accepts the file with it
	// (with the password file the destination needs).
	block := out[strings.Index(out, "plugins:\n"):]
	if i := strings.Index(block, "\n\n"); i >= 0 {
		block = block[:i+1]
	}
	writePassword(t, cfgPath)
	withPlugin := writeFile(t, "with-plugin.yaml", readFile(t, cfgPath)+block)
	if code, out, errOut := kmirror(t, nil, "config", "validate", "--config", withPlugin); code != 0 {
		t.Fatalf("config validate of the printed entry: exit %d\n%s%s\n--- entry ---\n%s", code, out, errOut, block)
	}

	// Installing the same file again changes nothing; a different file of
	// the same name is refused unless --force.
	if code, out, errOut := kmirror(t, nil, "plugins", "install", src, "--kind", "filter", "--config", cfgPath); code != 0 || !strings.Contains(out, "installed already") {
		t.Fatalf("second install: exit %d\n%s%s", code, out, errOut)
	}
	other := filepath.Join(t.TempDir(), "kmirror-filter-keep")
	b, _ := os.ReadFile(src)
	if err := os.WriteFile(other, append(b, 0), 0o700); err != nil { // still runs: a trailing byte
		t.Fatal(err)
	}
	if code, _, errOut := kmirror(t, nil, "plugins", "install", other, "--kind", "filter", "--config", cfgPath); code != exitFailure || !strings.Contains(errOut, "--force") {
		t.Fatalf("install over a different file: exit %d, want 1 asking for --force\n%s", code, errOut)
	}
	if got, _ := os.ReadFile(installed); len(got) != len(b) {
		t.Fatal("a refused install changed the installed file")
	}
	code, out, errOut = kmirror(t, nil, "plugins", "install", other, "--kind", "filter", "--config", cfgPath, "--force", "--json")
	if code != 0 {
		t.Fatalf("install --force: exit %d\n%s%s", code, out, errOut)
	}
	var res plugincmd.InstallResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("install --json: %v\n%s", err, out)
	}
	if !res.Replaced || res.Name != "keep" || res.Path != "kmirror-filter-keep" || res.SHA256 == sum || res.ProtocolMajor != 1 || res.PluginName != "test" {
		t.Fatalf("install --json = %+v", res)
	}
}

func TestPluginsInstallRefusesWhatIsNotAPluginOfTheKind(t *testing.T) {
	t.Parallel()
	src, _ := testFilterPlugin(t, "kmirror-filter-keep")
	notPlugin := writeFile(t, "hello", "#!/bin/sh\necho hello\n")
	if err := os.Chmod(notPlugin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, kind, want string
	}{
		{"not a plugin", notPlugin, "filter", "is not a kmirror filter plugin"},
		{"another kind", src, "auth", "not a auth plugin: it serves the filter protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfgPath, stateDir := pluginConfig(t, "", "")
			code, _, errOut := kmirror(t, nil, "plugins", "install", tc.file, "--kind", tc.kind, "--name", "x", "--config", cfgPath)
			if code != exitFailure || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "nothing installed") {
				t.Fatalf("exit %d, want 1 and %q:\n%s", code, tc.want, errOut)
			}
			entries, err := os.ReadDir(filepath.Join(stateDir, "plugins"))
			if err != nil || len(entries) != 0 {
				t.Fatalf("the plugin directory holds %v (%v), want nothing", entries, err)
			}
		})
	}
}

func TestPluginsVerify(t *testing.T) {
	t.Parallel()
	src, sum := testFilterPlugin(t, "kmirror-filter-keep")
	dir := filepath.Dir(src)
	other := strings.Repeat("ab", 32)
	okCfg, _ := pluginConfig(t, "plugin.dir: "+dir, fmt.Sprintf(`plugins:
  keep: {kind: filter, path: kmirror-filter-keep, sha256: %s}
  regex: {kind: filter, builtin: regex}
`, sum))
	if code, out, errOut := kmirror(t, nil, "plugins", "verify", "--config", okCfg); code != 0 || !strings.Contains(out, "all 2 plugins verified") {
		t.Fatalf("verify of good plugins: exit %d\n%s%s", code, out, errOut)
	}
	badCfg, _ := pluginConfig(t, "plugin.dir: "+dir, fmt.Sprintf(`plugins:
  keep: {kind: filter, path: kmirror-filter-keep, sha256: %s}
  changed: {kind: filter, path: kmirror-filter-keep, sha256: %s}
  gone: {kind: filter, path: no-such-plugin, sha256: %s}
`, sum, other, sum))
	code, out, errOut := kmirror(t, nil, "plugins", "verify", "--config", badCfg)
	if code != exitFailure {
		t.Fatalf("verify with bad plugins: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"2 of 3 plugins would not be started",
		"plugins.changed (mismatch): " + src + " has SHA-256 " + sum + ", the configuration says " + other,
		"plugins.gone (missing): " + filepath.Join(dir, "no-such-plugin") + " does not exist",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("verify's errors lack %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "ok        plugins.keep") || strings.Contains(errOut, "plugins.keep") {
		t.Errorf("verify does not say keep is fine:\n%s%s", out, errOut)
	}
}

func TestPluginsRemove(t *testing.T) {
	t.Parallel()
	src, sum := testFilterPlugin(t, "kmirror-filter-keep")
	dir := filepath.Dir(src)
	if err := os.WriteFile(filepath.Join(dir, "unused"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := pluginConfig(t, "plugin.dir: "+dir, fmt.Sprintf("plugins:\n  keep: {kind: filter, path: kmirror-filter-keep, sha256: %s}\n", sum))
	code, _, errOut := kmirror(t, nil, "plugins", "remove", "keep", "--config", cfgPath)
	if code != exitFailure || !strings.Contains(errOut, "plugins.keep.path still references "+src) {
		t.Fatalf("remove of a referenced file: exit %d, want 1 naming plugins.keep.path\n%s", code, errOut)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("a refused remove removed the file: %v", err)
	}
	if code, out, errOut := kmirror(t, nil, "plugins", "remove", "unused", "--config", cfgPath); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("remove of an unreferenced file: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := kmirror(t, nil, "plugins", "remove", "kmirror-filter-keep", "--force", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "plugins.keep.path still references it") {
		t.Fatalf("remove --force: exit %d\n%s%s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the plugin directory still holds %v", entries)
	}
	if code, _, errOut := kmirror(t, nil, "plugins", "remove", "../kmirror.yaml", "--config", cfgPath); code != exitUsage || !strings.Contains(errOut, "not in the plugin directory") {
		t.Fatalf("remove outside the plugin directory: exit %d\n%s", code, errOut)
	}
}

// listing runs `plugins list --json` with args and decodes it.
func listing(t *testing.T, args ...string) plugincmd.Listing {
	t.Helper()
	code, out, errOut := kmirror(t, nil, append([]string{"plugins", "list", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("plugins list: exit %d\n%s%s", code, out, errOut)
	}
	var l plugincmd.Listing
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("plugins list --json: %v\n%s", err, out)
	}
	return l
}

func TestPluginsListWithoutTheDaemon(t *testing.T) {
	t.Parallel()
	src, sum := testFilterPlugin(t, "kmirror-filter-keep")
	cfgPath, _ := pluginConfig(t, "admin.address: 127.0.0.1:1\nplugin.dir: "+filepath.Dir(src), fmt.Sprintf(`plugins:
  keep: {kind: filter, path: kmirror-filter-keep, sha256: %s}
  changed: {kind: filter, path: kmirror-filter-keep, sha256: %s}
  regex: {kind: filter, builtin: regex}
`, sum, strings.Repeat("ab", 32)))
	l := listing(t, "--config", cfgPath, "--token-file", writeFile(t, "token", "t\n"))
	if !strings.Contains(l.Daemon, "cannot reach the admin API") || len(l.Plugins) != 3 {
		t.Fatalf("list = %+v, want the daemon unreachable and 3 plugins", l)
	}
	byName := map[string]plugincmd.Row{}
	for _, p := range l.Plugins {
		if p.Running != nil {
			t.Errorf("%s: running = %v without a daemon, want null", p.Name, *p.Running)
		}
		byName[p.Name] = p
	}
	if p := byName["keep"]; p.Checksum != plugincmd.SumOK || p.Protocol != filterProtocol || p.File != src {
		t.Errorf("keep = %+v, want checksum ok and protocol %s read by launching it", p, filterProtocol)
	}
	if p := byName["changed"]; p.Checksum != plugincmd.SumMismatch || p.ActualSHA256 != sum || p.Protocol != "" {
		t.Errorf("changed = %+v, want a mismatch, not launched", p)
	}
	if p := byName["regex"]; p.Checksum != plugincmd.SumBuiltin || p.Protocol != filterProtocol || p.Builtin != "regex" {
		t.Errorf("regex = %+v", p)
	}
	code, out, errOut := kmirror(t, nil, "plugins", "list", "--config", cfgPath, "--token-file", writeFile(t, "token", "t\n"))
	if code != 0 || !strings.Contains(out, "unknown (daemon not reachable)") || !strings.Contains(out, "note: running: unknown: cannot reach the admin API") {
		t.Fatalf("plugins list: exit %d\n%s%s", code, out, errOut)
	}
}

func TestPluginsListAsksTheRunningDaemon(t *testing.T) {
	t.Parallel()
	src, sum := testFilterPlugin(t, "kmirror-filter-keep")
	cfgPath, _ := pluginConfig(t, "log.format: json\nhttp.address: 127.0.0.1:0\nadmin.address: 127.0.0.1:0\nplugin.dir: "+filepath.Dir(src), fmt.Sprintf(`plugins:
  keep: {kind: filter, path: kmirror-filter-keep, sha256: %s}
  regex: {kind: filter, builtin: regex, config: {topics.include: ["orders.*"]}}
`, sum))
	writePassword(t, cfgPath) // the daemon reads it
	d := startRun(t, cfgPath)
	adminAddr, _ := d.waitLog(t, "admin API listening")["address"].(string)
	l := listing(t, "--config", cfgPath, "--admin-address", adminAddr)
	if l.Daemon != "reachable" || len(l.Plugins) != 2 {
		t.Fatalf("list = %+v\ndaemon log:\n%s", l, d.log())
	}
	for _, p := range l.Plugins {
		if p.Running == nil || !*p.Running || p.Pid == 0 || p.Protocol != filterProtocol {
			t.Errorf("%s = %+v, want running with a pid and protocol %s", p.Name, p, filterProtocol)
		}
	}
	// The daemon's own answer, as scripts read it.
	code, out, errOut := kmirror(t, nil, "plugins", "list", "--config", cfgPath, "--admin-address", adminAddr)
	if code != 0 || !strings.Contains(out, "yes (pid ") {
		t.Fatalf("plugins list: exit %d\n%s%s", code, out, errOut)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A state store built from its configuration (the built-in file store)
// is probed without being configured: no Info yet, and nothing opened.
func TestProbeOfABuiltinStoreDoesNotConfigureIt(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	spec := pluginhost.Spec{Name: "state", Kind: plugin.KindStateStore, Path: binary, SHA256: hex.EncodeToString(s[:])}
	p, err := pluginhost.Probe(context.Background(), spec, pluginhost.Options{Command: func(pluginhost.Spec) (*exec.Cmd, error) {
		return exec.Command(binary, "plugin", "serve", "statestore", "file"), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if p.ProtocolMajor != 1 || p.InfoKnown || !strings.Contains(p.InfoError, "once it is configured") || len(p.Schema) == 0 {
		t.Fatalf("probed %+v, want protocol 1, the schema, and no Info before configuration", p)
	}
}

// filterProtocol is the filter protocol version this build speaks, as the
// commands print it.
var filterProtocol = fmt.Sprintf("%d.%d", filter.ProtocolMajor, filter.ProtocolMinor)
