package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// pluginFixture writes an executable stand-in into a plugin directory and
// returns the directory and the file's SHA-256.
func pluginFixture(t *testing.T) (dir, sum string) {
	t.Helper()
	dir = t.TempDir()
	content := "#!/bin/sh\nexit 0\n"
	writeFile(t, dir, "kmirror-auth-vault", content)
	s := sha256.Sum256([]byte(content))
	return dir, hex.EncodeToString(s[:])
}

func TestPluginsDecode(t *testing.T) {
	t.Parallel()
	dir, sum := pluginFixture(t)
	cfg := mustParse(t, minimal+fmt.Sprintf(`
plugin.dir: %s
plugins:
  sso:
    kind: auth
    path: kmirror-auth-vault
    sha256: %s
    config:
      address: https://vault:8200
      retries: 3
      nested: {a: 1}
  regex:
    kind: filter
    builtin: regex
`, dir, strings.ToUpper(sum)), nil, nil)
	if len(cfg.Plugins) != 2 || cfg.Plugins[0].Name != "regex" || cfg.Plugins[1].Name != "sso" {
		t.Fatalf("Plugins = %+v, want regex and sso sorted by name", cfg.Plugins)
	}
	sso, _ := cfg.Plugin("sso")
	if sso.Kind != "auth" || sso.SHA256 != sum || sso.File(cfg.PluginDirectory()) != filepath.Join(dir, "kmirror-auth-vault") {
		t.Errorf("sso = %+v (file %s)", sso, sso.File(cfg.PluginDirectory()))
	}
	if sso.Config["address"] != "https://vault:8200" || sso.Config["retries"] != 3 {
		t.Errorf("sso config = %#v", sso.Config)
	}
	if _, ok := sso.Config["nested"].(map[string]any); !ok {
		t.Errorf("nested object not kept whole: %#v", sso.Config["nested"])
	}
	if cfg.PluginBuiltinInProcess {
		t.Error("plugin.builtin.in.process defaults to true, want false")
	}
	var found bool
	for _, s := range cfg.Effective() {
		if s.Path == "plugins.sso.config" {
			found = true
			if strings.Contains(s.Value, "vault:8200") {
				t.Errorf("Effective shows a plugin config value: %s", s.Value)
			}
		}
	}
	if !found {
		t.Error("Effective lists no plugins.sso.config")
	}
	if !strings.Contains(cfg.Summary(), "sso: auth plugin") {
		t.Errorf("Summary does not list the plugin:\n%s", cfg.Summary())
	}
}

func TestPluginDirDefaultsUnderStateDir(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, minimal, nil, nil)
	if got, want := cfg.PluginDirectory(), filepath.Join("/tmp/kmirror-state-test", "plugins"); got != want {
		t.Errorf("PluginDirectory() = %s, want %s", got, want)
	}
}

func TestPluginsInvalid(t *testing.T) {
	t.Parallel()
	dir, sum := pluginFixture(t)
	other := strings.Repeat("ab", 32)
	head := minimal + "plugin.dir: " + dir + "\nplugins:\n"
	for _, tc := range []struct {
		name, yaml, path, want string
	}{
		{"bad name", "  SSO:\n    kind: auth\n    builtin: static\n", "plugins.SSO", "invalid plugin name"},
		{"no kind", "  sso:\n    builtin: static\n", "plugins.sso.kind", "required"},
		{"bad kind", "  sso:\n    kind: credentials\n    builtin: static\n", "plugins.sso.kind", "auth"},
		{"neither path nor builtin", "  sso:\n    kind: auth\n", "plugins.sso", "set path"},
		{"both", fmt.Sprintf("  sso:\n    kind: auth\n    builtin: static\n    path: kmirror-auth-vault\n    sha256: %s\n", sum), "plugins.sso.builtin", "not both"},
		{"no checksum", "  sso:\n    kind: auth\n    path: kmirror-auth-vault\n", "plugins.sso.sha256", "required with path"},
		{"checksum on builtin", "  sso:\n    kind: auth\n    builtin: static\n    sha256: " + sum + "\n", "plugins.sso.sha256", "only for a plugin given by path"},
		{"bad hex", "  sso:\n    kind: auth\n    path: kmirror-auth-vault\n    sha256: xyz\n", "plugins.sso.sha256", "not a SHA-256"},
		{"mismatch", "  sso:\n    kind: auth\n    path: kmirror-auth-vault\n    sha256: " + other + "\n", "plugins.sso.sha256", filepath.Join(dir, "kmirror-auth-vault") + " has SHA-256 " + sum + ", the configuration says " + other},
		{"missing file", "  sso:\n    kind: auth\n    path: nope\n    sha256: " + sum + "\n", "plugins.sso.path", filepath.Join(dir, "nope") + " does not exist"},
		{"config not a map", "  sso:\n    kind: auth\n    builtin: static\n    config: 3\n", "plugins.sso.config", "expected a map"},
		{"unknown key", "  sso:\n    kind: auth\n    builtin: static\n    checksum: x\n", "plugins.sso.checksum", "unknown key"},
		{"not a map", "  - kind: auth\n", "plugins", "keyed by name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrs(t, head+tc.yaml, nil, nil)
			if !errs.Has(tc.path, tc.want) {
				t.Errorf("want %s: …%s…; got:\n%s", tc.path, tc.want, indent(errs.Error()))
			}
		})
	}
}

func TestPluginOverrides(t *testing.T) {
	t.Parallel()
	dir, sum := pluginFixture(t)
	yaml := minimal + "plugin.dir: " + dir + "\nplugins:\n  my-sso:\n    kind: auth\n    builtin: static\n"
	cfg := mustParse(t, yaml, []string{"KMIRROR_PLUGINS__MY_SSO__BUILTIN=oauth", "KMIRROR_PLUGIN_BUILTIN_IN_PROCESS=true"}, nil)
	if p, _ := cfg.Plugin("my-sso"); p.Builtin != "oauth" || !cfg.PluginBuiltinInProcess {
		t.Errorf("env override not applied: %+v, in process %v", p, cfg.PluginBuiltinInProcess)
	}
	cfg = mustParse(t, yaml, nil, []string{"plugins.my-sso.builtin=", "plugins.my-sso.path=kmirror-auth-vault", "plugins.my-sso.sha256=" + sum})
	if p, _ := cfg.Plugin("my-sso"); p.Path != "kmirror-auth-vault" || p.Builtin != "" {
		t.Errorf("--set override not applied: %+v", p)
	}
	for _, tc := range []struct {
		env, sets    []string
		path, reason string
	}{
		{env: []string{"KMIRROR_PLUGINS__OTHER__BUILTIN=x"}, path: "KMIRROR_PLUGINS__OTHER__BUILTIN", reason: "no plugin matches OTHER"},
		{env: []string{"KMIRROR_PLUGINS__MY_SSO__CONFIG=x"}, path: "KMIRROR_PLUGINS__MY_SSO__CONFIG", reason: "cannot be overridden"},
		{sets: []string{"plugins.my-sso.config.url=x"}, path: "--set", reason: "cannot be overridden"},
		{sets: []string{"plugins.other.kind=auth"}, path: "--set", reason: "no plugin named"},
		{sets: []string{"plugins.my-sso.kind=nope"}, path: "plugins.my-sso.kind", reason: "(from --set)"},
	} {
		errs := parseErrs(t, yaml, tc.env, tc.sets)
		if !errs.Has(tc.path, tc.reason) {
			t.Errorf("env %v sets %v: want %s: …%s…; got:\n%s", tc.env, tc.sets, tc.path, tc.reason, indent(errs.Error()))
		}
	}
}

func TestPluginsTOML(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`
[destination]
"bootstrap.servers" = "dst:9092"
[state]
dir = "/tmp/kmirror-state-test"
[plugins.sso]
kind = "auth"
builtin = "static"
[plugins.sso.config]
username = "mirror"
`), "toml", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := cfg.Plugin("sso"); !ok || p.Builtin != "static" || p.Config["username"] != "mirror" {
		t.Errorf("TOML plugin = %+v", p)
	}
}

// Keys that name a plugin name one of the plugins section, of their kind;
// a cluster whose credentials come from a plugin sets no credential key.
func TestPluginReferences(t *testing.T) {
	t.Parallel()
	plugins := "plugins:\n  sso:\n    kind: auth\n    builtin: oauth\n  scope:\n    kind: filter\n    builtin: regex\n  vault:\n    kind: statestore\n    builtin: file\n"
	base := "destination:\n  bootstrap.servers: dst:9092\n"
	state := "state:\n  dir: /tmp/kmirror-state-test\n"
	mirror := func(extra string) string {
		return "mirrors:\n  - name: m1\n    bootstrap.servers: src:9092\n" + extra
	}
	ok := base + "  security.protocol: SASL_SSL\n  sasl.mechanism: OAUTHBEARER\n  sasl.credentials.plugin: sso\n" +
		"state:\n  type: plugin\n  plugin: vault\n  dir: /tmp/kmirror-state-test\n" + plugins +
		mirror("    security.protocol: SASL_PLAINTEXT\n    sasl.mechanism: SCRAM-SHA-512\n    sasl.credentials.plugin: sso\n    mirror.filter.plugins: scope\n")
	cfg := mustParse(t, ok, nil, nil)
	if cfg.Destination.SASLCredentialsPlugin != "sso" || cfg.State.Plugin != "vault" || cfg.State.Type != StateTypePlugin {
		t.Fatalf("decoded %+v / %+v", cfg.Destination.Keys, cfg.State)
	}
	if m := cfg.Mirrors[0]; m.Source.SASLCredentialsPlugin != "sso" || len(m.FilterPlugins) != 1 || m.FilterPlugins[0] != "scope" {
		t.Fatalf("mirror %+v", m)
	}
	for _, tc := range []struct {
		name, yaml, path, want string
	}{
		{"unknown auth plugin", base + "  security.protocol: SASL_PLAINTEXT\n  sasl.credentials.plugin: nope\n" + state + plugins,
			"destination.sasl.credentials.plugin", `no plugin named "nope" in plugins (auth plugins configured: sso)`},
		{"wrong kind", base + "  security.protocol: SASL_PLAINTEXT\n  sasl.credentials.plugin: scope\n" + state + plugins,
			"destination.sasl.credentials.plugin", `plugin "scope" is of kind filter; this key needs one of kind auth`},
		{"plugin and password", base + "  security.protocol: SASL_PLAINTEXT\n  sasl.credentials.plugin: sso\n  sasl.username: u\n  sasl.password: p\n" + state + plugins,
			"destination.sasl.password", "set together with sasl.credentials.plugin"},
		{"plugin without SASL", base + "  sasl.credentials.plugin: sso\n" + state + plugins,
			"destination.sasl.credentials.plugin", "security.protocol is PLAINTEXT"},
		{"unknown filter", base + state + plugins + mirror("    mirror.filter.plugins: scope,nope\n"),
			"mirrors[m1].mirror.filter.plugins[1]", `no plugin named "nope"`},
		{"state plugin missing", base + "state:\n  type: plugin\n" + plugins,
			"state.plugin", "required when state.type is plugin"},
		{"state plugin of another kind", base + "state:\n  type: plugin\n  plugin: sso\n" + plugins,
			"state.plugin", "is of kind auth; this key needs one of kind statestore"},
		{"state plugin with file", base + "state:\n  dir: /tmp/x\n  plugin: vault\n" + plugins,
			"state.plugin", "set but state.type is file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrs(t, tc.yaml, nil, nil)
			if !errs.Has(tc.path, tc.want) {
				t.Errorf("want %s: …%s…; got:\n%s", tc.path, tc.want, indent(errs.Error()))
			}
		})
	}
}
