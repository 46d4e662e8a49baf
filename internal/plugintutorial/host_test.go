package plugintutorial_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testlog"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/internal/plugintutorial"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// waitFor waits until the log holds a line containing every part.
func waitFor(t *testing.T, log *testlog.Buffer, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(log.String(), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line holds all of %q; the log:\n%s", parts, log.String())
		}
		time.Sleep(20 * time.Millisecond) // poll the log
	}
}

// start runs the tutorial's plugin under the host as `kmirror run` does,
// configured with cfg, and returns the host (or its Start error) and the
// host's log.
func start(t *testing.T, bin, sum string, cfg plugin.Config) (*pluginhost.Host, *testlog.Buffer, error) {
	t.Helper()
	log := &testlog.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Debug, JSONFormat: true})
	h, err := pluginhost.New([]pluginhost.Spec{{Name: plugintutorial.Name, Kind: plugin.KindFilter, Path: bin, SHA256: sum, Config: cfg}},
		pluginhost.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, log, h.Start(t.Context())
}

// tutorialConfig loads the tutorial's configuration (the example's
// kmirror.yaml, which docs/writing-plugins.md shows) as kmirror does, with
// the plugin directory, file and checksum of the built plugin, and returns
// its plugin entry as the host's Spec.
func tutorialConfig(t *testing.T, bin, sum string) pluginhost.Spec {
	t.Helper()
	yaml := plugintutorial.Config(t, bin, sum)
	cfg, err := config.Parse([]byte("destination:\n  bootstrap.servers: 127.0.0.1:9092\nstate:\n  dir: "+t.TempDir()+"\n"+yaml), "yaml", nil, nil)
	if err != nil {
		t.Fatalf("the tutorial's configuration: %v", err)
	}
	p, ok := cfg.Plugin(plugintutorial.Name)
	if !ok {
		t.Fatalf("the tutorial's configuration has no plugin %q", plugintutorial.Name)
	}
	return pluginhost.Spec{Name: p.Name, Kind: plugin.Kind(p.Kind), Path: p.File(cfg.PluginDirectory()), SHA256: p.SHA256, Config: p.Config}
}

// The tutorial's plugin, built as its readers build it and configured as
// the tutorial configures it, runs under kmirror's plugin host: verified,
// configured through the schema it declares, and deciding which groups and
// topics a mirror syncs; its logs appear under plugin.filter.teams.
func TestTutorialPluginDecidesThroughTheHost(t *testing.T) {
	t.Parallel()
	bin, sum := plugintutorial.Plugin(t)
	spec := tutorialConfig(t, bin, sum)
	if spec.Path != bin {
		t.Fatalf("the configuration's plugin file is %s, want %s", spec.Path, bin)
	}
	h, log, err := start(t, spec.Path, spec.SHA256, spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	f, err := h.Filter(plugintutorial.Name)
	if err != nil {
		t.Fatal(err)
	}
	if info := f.Info(); info.Name != plugintutorial.Name || info.Version != "0.1.0" || !slices.Equal(info.Kinds, []filter.Kind{filter.Groups, filter.Topics}) {
		t.Fatalf("Info = %+v", info)
	}
	ctx := t.Context()
	groups, err := f.FilterGroups(ctx, "dc1-to-dc2", filtertest.Groups("billing-app", "search-indexer", "payments", "billing"))
	if got := filtertest.GroupIDs(groups); err != nil || !slices.Equal(got, []string{"billing-app", "search-indexer"}) {
		t.Fatalf("FilterGroups = %v, %v", got, err)
	}
	topics, err := f.FilterTopics(ctx, "dc1-to-dc2", filtertest.Topics("billing.invoices", "search.docs"))
	if got := filtertest.TopicNames(topics); err != nil || !slices.Equal(got, []string{"billing.invoices"}) {
		t.Fatalf("FilterTopics = %v, %v", got, err)
	}
	waitFor(t, log, `"@module":"plugin.filter.teams"`, `"@message":"configured"`, `"group_prefixes":["billing-","search-"]`)
	waitFor(t, log, `"@module":"plugin.filter.teams"`, `"@message":"groups filtered"`, `"mirror":"dc1-to-dc2"`, `"kept":2`)

	// Through the host, the plugin still does what every filter must.
	filtertest.Run(t, f)
	if st, _ := h.Status(plugintutorial.Name); !st.Running || st.Restarts != 0 {
		t.Fatalf("Status = %+v", st)
	}
}

// The host checks the config block against the plugin's schema, and the
// plugin refuses values its schema cannot express; both name the key.
func TestTutorialPluginConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	bin, sum := plugintutorial.Plugin(t)
	for _, c := range []struct {
		name string
		cfg  plugin.Config
		want []string
	}{
		{"schema", plugin.Config{"group_prefix": []any{"billing-"}}, []string{
			"plugins.teams.config.group_prefix: unknown key (known: group_prefixes, topic_prefixes)",
			"plugins.teams.config.group_prefixes: required",
		}},
		{"type", plugin.Config{"group_prefixes": "billing-"}, []string{"plugins.teams.config.group_prefixes: must be a list of strings"}},
		{"plugin", plugin.Config{"group_prefixes": []any{"billing-", ""}}, []string{
			"plugins.teams.config.group_prefixes: item 1 is empty, which would match everything",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := start(t, bin, sum, c.cfg)
			if !errors.Is(err, plugin.ErrInvalidConfig) {
				t.Fatalf("Start = %v, want ErrInvalidConfig", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start = %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// A binary that is not the one whose checksum the configuration holds is
// not started.
func TestTutorialPluginWithAnotherChecksumIsNotStarted(t *testing.T) {
	t.Parallel()
	bin, _ := plugintutorial.Plugin(t)
	other := strings.Repeat("0", 64)
	_, _, err := start(t, bin, other, plugin.Config{"group_prefixes": []any{"billing-"}})
	if err == nil || !strings.Contains(err.Error(), "not started: checksum mismatch") || !strings.Contains(err.Error(), other) {
		t.Fatalf("Start = %v, want a checksum mismatch naming both sums", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	plugintutorial.Cleanup()
	os.Exit(code)
}
