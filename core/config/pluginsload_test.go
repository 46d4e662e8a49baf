package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadForPluginsSkipsTheClustersAndTheSums(t *testing.T) {
	t.Parallel()
	dir, sum := pluginFixture(t)
	writeFile(t, dir, "changed", "#!/bin/sh\nexit 1\n")
	state := t.TempDir()
	// The destination's password file does not exist and a plugin's file
	// does not match its sum: Load refuses the file, LoadForPlugins reads
	// what the plugin commands need.
	file := writeFile(t, t.TempDir(), "kmirror.yaml", fmt.Sprintf(`
admin.address: 127.0.0.1:9645
plugin.dir: %s
destination:
  bootstrap.servers: dst:9092
  security.protocol: SASL_PLAINTEXT
  sasl.mechanism: PLAIN
  sasl.username: kmirror
  sasl.password.file: /nonexistent/password
state:
  dir: %s
mirrors:
  - name: dc1
    bootstrap.servers: src:9092
plugins:
  sso:
    kind: auth
    path: kmirror-auth-vault
    sha256: %s
  keep:
    kind: filter
    path: changed
    sha256: %s
  regex:
    kind: filter
    builtin: regex
`, dir, state, sum, sum))
	src := Source{Path: file}
	if _, err := Load(src); err == nil {
		t.Fatal("Load accepted a missing password file and a checksum mismatch")
	}
	cfg, err := LoadForPlugins(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Plugins) != 3 || cfg.PluginDirectory() != dir || cfg.AdminAddress != "127.0.0.1:9645" || cfg.State.Dir != state {
		t.Fatalf("LoadForPlugins = plugins %+v, dir %s, admin %q, state %q", cfg.Plugins, cfg.PluginDirectory(), cfg.AdminAddress, cfg.State.Dir)
	}
	keep, _ := cfg.Plugin("keep")
	if keep.File(cfg.PluginDirectory()) != filepath.Join(dir, "changed") {
		t.Errorf("keep's file = %s", keep.File(cfg.PluginDirectory()))
	}
	if len(cfg.Mirrors) != 0 || len(cfg.Destination.BootstrapServers) != 0 {
		t.Errorf("LoadForPlugins decoded the clusters: %+v %+v", cfg.Destination, cfg.Mirrors)
	}
}

func TestLoadForPluginsStillChecksThePluginsEntries(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "kmirror.yaml", `
state:
  dir: /tmp/kmirror-state-test
plugins:
  sso:
    kind: auth
    path: kmirror-auth-vault
  Bad:
    kind: filter
    builtin: regex
`)
	_, err := LoadForPlugins(Source{Path: file})
	errs, ok := err.(*Errors)
	if !ok {
		t.Fatalf("err = %v, want *Errors", err)
	}
	if !errs.Has("plugins.sso.sha256", "required with path") || !errs.Has("plugins.Bad", "invalid plugin name") {
		t.Fatalf("errors:\n%v", err)
	}
	if strings.Contains(err.Error(), "destination") {
		t.Errorf("LoadForPlugins required the destination:\n%v", err)
	}
}
