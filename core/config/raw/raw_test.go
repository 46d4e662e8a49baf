package raw_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config/raw"
)

type problems []string

func (p *problems) report(path, reason string) { *p = append(*p, path+": "+reason) }

var index = raw.EnvIndex{
	"daemon":      {"LOG_LEVEL": "log.level"},
	"destination": {"BOOTSTRAP_SERVERS": "bootstrap.servers"},
	"state":       {"DIR": "dir"},
	"mirror":      {"BOOTSTRAP_SERVERS": "bootstrap.servers"},
	"plugin":      {"PATH": "path"},
}

// The file comes first, then the environment, then --set; each value says
// where it came from, and nested and dotted keys land on the same name.
func TestLayersOverrideInOrder(t *testing.T) {
	t.Parallel()
	var p problems
	d, err := raw.Parse([]byte(`
log:
  level: info
destination:
  bootstrap: {servers: file:9092}
state: {dir: /file}
mirrors:
  - name: dc-1
    bootstrap.servers: file:9092
plugins:
  sso: {kind: auth, path: sso, config: {a: {b: 1}}}
`), "yaml", "configuration", p.report)
	if err != nil || d == nil {
		t.Fatalf("Parse = %v, %v", d, err)
	}
	raw.ApplyEnv(d, []string{
		"KMIRROR_DESTINATION__BOOTSTRAP_SERVERS=env:9092",
		"KMIRROR_MIRRORS__DC_1__BOOTSTRAP_SERVERS=env:9092",
		"KMIRROR_PLUGINS__SSO__PATH=env-sso",
		"KMIRROR_CONFIG=ignored",
		"OTHER=ignored",
	}, []string{"KMIRROR_CONFIG"}, index, p.report)
	raw.ApplySets(d, []string{"log.level=debug", "destination.bootstrap.servers=set:9092", "state.dir=/set"}, p.report)
	if len(p) != 0 {
		t.Fatalf("problems: %v", p)
	}
	for _, c := range []struct {
		sec        raw.Section
		key        string
		want, from string
	}{
		{d.Daemon, "log.level", "debug", "--set"},
		{d.Destination, "bootstrap.servers", "set:9092", "--set"},
		{d.State, "dir", "/set", "--set"},
		{d.Mirrors[0], "bootstrap.servers", "env:9092", "KMIRROR_MIRRORS__DC_1__BOOTSTRAP_SERVERS"},
		{d.Plugins[0].Section, "path", "env-sso", "KMIRROR_PLUGINS__SSO__PATH"},
		{d.Plugins[0].Section, "kind", "auth", ""},
	} {
		if v := c.sec.Vals[c.key]; v.V != c.want || v.From != c.from {
			t.Errorf("%s = %v from %q; want %v from %q", c.key, v.V, v.From, c.want, c.from)
		}
	}
	// A plugin's config block is kept whole: it belongs to the plugin.
	if blk, ok := d.Plugins[0].Section.Vals["config"].V.(map[string]any); !ok || blk["a"] == nil {
		t.Errorf("config block = %#v", d.Plugins[0].Section.Vals["config"])
	}
}

// Problems name the variable, the flag's position or the path, never a
// value given for a key.
func TestProblemsNameWhereNotWhat(t *testing.T) {
	t.Parallel()
	var p problems
	d, err := raw.Parse([]byte("mirrors:\n  - name: dc1\nstate: [1]\na.b: 1\na: {b: 2}\n"), "yaml", "f.yaml", p.report)
	if err != nil || d == nil {
		t.Fatalf("Parse = %v, %v", d, err)
	}
	raw.ApplyEnv(d, []string{"KMIRROR_LOG_LEVL=s3cret", "KMIRROR_MIRRORS__DC2__BOOTSTRAP_SERVERS=s3cret"}, nil, index, p.report)
	raw.ApplySets(d, []string{"s3cret", "mirrors.dc2.bootstrap.servers=s3cret", "plugins.x.config.k=s3cret"}, p.report)
	got := strings.Join(p, "\n")
	for _, want := range []string{
		"state: expected a map of keys",
		"a.b: given twice",
		"KMIRROR_LOG_LEVL: unknown environment variable: it names no configuration key (docs/config.md lists each key's variable); did you mean KMIRROR_LOG_LEVEL?",
		"KMIRROR_MIRRORS__DC2__BOOTSTRAP_SERVERS: no mirror matches DC2; the mirrors are dc1",
		"--set: flag 1: expected key=value",
		`--set: flag 2: "mirrors.dc2.bootstrap.servers": no mirror named "dc2"`,
		"--set: flag 3: \"plugins.x.config.k\": a plugin's config block cannot be overridden",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "s3cret") {
		t.Errorf("a problem quotes a value:\n%s", got)
	}
}

func TestParseAndReadFileFailures(t *testing.T) {
	t.Parallel()
	var p problems
	if d, err := raw.Parse([]byte("a: [1"), "yaml", "f.yaml", p.report); d != nil || err != nil || len(p) != 1 || !strings.HasPrefix(p[0], "f.yaml: cannot parse YAML") {
		t.Errorf("bad YAML: %v, %v, %v", d, err, p)
	}
	if _, err := raw.Parse(nil, "json", "f", p.report); err == nil {
		t.Error("format json accepted")
	}
	if _, _, err := raw.ReadFile(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, _, err := raw.ReadFile("kmirror.json"); err == nil || !strings.Contains(err.Error(), "use .yaml, .yml or .toml") {
		t.Errorf("unknown extension: %v", err)
	}
	if data, format, err := raw.ReadFile(""); data != nil || format != "yaml" || err != nil {
		t.Errorf("no file: %q %q %v", data, format, err)
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	keys := []string{"bootstrap.servers", "client.id", "security.protocol"}
	for in, want := range map[string]string{"bootstrap.server": "bootstrap.servers", "CLIENT.ID": "client.id", "zzz": ""} {
		if got := raw.Suggest(in, keys); got != want {
			t.Errorf("Suggest(%q) = %q; want %q", in, got, want)
		}
	}
}

// Kubernetes puts service-link variables into every pod of a namespace with
// a Service named kmirror (or kmirror-<x>): they are left alone, while a
// typo in a real key's variable still fails.
func TestKubernetesServiceLinkVariablesAreIgnored(t *testing.T) {
	t.Parallel()
	links := []string{
		"KMIRROR_SERVICE_HOST", "KMIRROR_SERVICE_PORT", "KMIRROR_SERVICE_PORT_METRICS", "KMIRROR_PORT",
		"KMIRROR_PORT_9644_TCP", "KMIRROR_PORT_9644_TCP_PROTO", "KMIRROR_PORT_9644_TCP_PORT", "KMIRROR_PORT_9644_TCP_ADDR",
		"KMIRROR_ADMIN_SERVICE_HOST", "KMIRROR_ADMIN_PORT_9645_TCP_ADDR",
	}
	for _, n := range links {
		if !raw.ServiceLink(n) {
			t.Errorf("%s is not taken for a service-link variable", n)
		}
	}
	for _, n := range []string{"KMIRROR_LOG_LEVEL", "KMIRROR_HTTP_ADDRESS", "KMIRROR_SERVICE", "KMIRROR_PORTS", "KMIRROR_PORT_X", "KMIRROR_DESTINATION__BOOTSTRAP_SERVERS"} {
		if raw.ServiceLink(n) {
			t.Errorf("%s taken for a service-link variable", n)
		}
	}
}
