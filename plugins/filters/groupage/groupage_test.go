package groupage

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
	"github.com/kmirror/kmirror/sdk/plugin"
)

var now = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return now }

func mustNew(t testing.TB, c Config) *Filter {
	t.Helper()
	if c.Now == nil {
		c.Now = fixedClock
	}
	f, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func group(id string, lastCommit time.Time) filter.Group {
	return filter.Group{ID: id, Kind: filter.GroupConsumer, State: "Empty", LastCommit: lastCommit}
}

// The sample batch: around the boundary of a one-hour max_idle.
func sample() []filter.Group {
	return []filter.Group{
		group("fresh", now.Add(-time.Minute)),
		group("at-the-limit", now.Add(-time.Hour)),
		group("just-over", now.Add(-time.Hour-time.Nanosecond)),
		group("idle-a-week", now.Add(-7*24*time.Hour)),
		group("unknown", time.Time{}),
		group("future", now.Add(time.Hour)), // a clock step back on the host
		group("audit-idle", now.Add(-30*24*time.Hour)),
		{ID: "share-idle", Kind: filter.GroupShare, State: "Empty", LastCommit: now.Add(-2 * time.Hour)},
	}
}

func TestGroupsIdleLongerThanMaxIdleAreNotSynced(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"one hour", Config{MaxIdle: time.Hour},
			[]string{"fresh", "at-the-limit", "unknown", "future"}},
		{"include_always keeps matching idle groups", Config{MaxIdle: time.Hour, IncludeAlways: []string{"audit-.*", "share-idle"}},
			[]string{"fresh", "at-the-limit", "unknown", "future", "audit-idle", "share-idle"}},
		{"include_always matches whole ids", Config{MaxIdle: time.Hour, IncludeAlways: []string{"audit", "idle"}},
			[]string{"fresh", "at-the-limit", "unknown", "future"}},
		{"a long max_idle keeps all but the oldest", Config{MaxIdle: 8 * 24 * time.Hour},
			[]string{"fresh", "at-the-limit", "just-over", "idle-a-week", "unknown", "future", "share-idle"}},
		{"a nanosecond", Config{MaxIdle: time.Nanosecond},
			[]string{"unknown", "future"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := mustNew(t, c.cfg)
			in := sample()
			out, err := f.FilterGroups(t.Context(), "m", in)
			if err != nil {
				t.Fatal(err)
			}
			if err := filter.VerifyOutput(in, out); err != nil {
				t.Fatal(err)
			}
			if got := filtertest.GroupIDs(out); !slices.Equal(got, c.want) {
				t.Fatalf("kept %q, want %q (in input order)", got, c.want)
			}
		})
	}
}

// The clock is read at each call: a group ages out as time passes.
func TestAGroupAgesOutAsTheClockMoves(t *testing.T) {
	t.Parallel()
	clock := now
	f := mustNew(t, Config{MaxIdle: time.Hour, Now: func() time.Time { return clock }})
	in := []filter.Group{group("g", now)}
	for _, step := range []struct {
		at   time.Duration
		kept bool
	}{{0, true}, {59 * time.Minute, true}, {time.Hour, true}, {time.Hour + time.Second, false}} {
		clock = now.Add(step.at)
		out, err := f.FilterGroups(t.Context(), "m", in)
		if err != nil {
			t.Fatal(err)
		}
		if kept := len(out) == 1; kept != step.kept {
			t.Fatalf("%s after the last commit: kept %v, want %v", step.at, kept, step.kept)
		}
	}
}

func TestOnlyGroupsAreDecided(t *testing.T) {
	t.Parallel()
	f := mustNew(t, Config{MaxIdle: time.Nanosecond})
	if info := f.Info(); info.Name != Name || !slices.Equal(info.Kinds, []filter.Kind{filter.Groups}) || info.ProtocolMinor < 1 || info.Validate() != nil {
		t.Fatalf("Info = %+v, want %s deciding groups only, protocol 1.1 or later", info, Name)
	}
	topics := filtertest.SampleTopics()
	if out, err := f.FilterTopics(t.Context(), "m", topics); err != nil || len(out) != len(topics) {
		t.Fatalf("topics: %d of %d pass, %v; want every one", len(out), len(topics), err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	filtertest.Run(t, mustNew(t, Config{MaxIdle: 30 * time.Minute, IncludeAlways: []string{"billing.*"}}))
}

func TestNewRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"no max_idle":       {Config{}, "max_idle must be above zero"},
		"negative max_idle": {Config{MaxIdle: -time.Second}, "max_idle must be above zero"},
		"bad pattern":       {Config{MaxIdle: time.Hour, IncludeAlways: []string{"ok", "a(b"}}, "groups.include_always[1]"},
	} {
		if _, err := New(c.cfg); !errors.Is(err, filter.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig mentioning %q", name, err, c.want)
		}
	}
}

func TestConfigFromPlugin(t *testing.T) {
	t.Parallel()
	c, err := ConfigFromPlugin(plugin.Config{"max_idle": "168h", "groups.include_always": []any{"audit-.*"}})
	if err != nil || c.MaxIdle != 168*time.Hour || !slices.Equal(c.IncludeAlways, []string{"audit-.*"}) {
		t.Fatalf("ConfigFromPlugin = %+v, %v", c, err)
	}
	for name, tc := range map[string]struct {
		cfg plugin.Config
		key string
	}{
		"missing max_idle":  {plugin.Config{}, KeyMaxIdle},
		"zero max_idle":     {plugin.Config{"max_idle": "0s"}, KeyMaxIdle},
		"negative max_idle": {plugin.Config{"max_idle": "-1h"}, KeyMaxIdle},
		"not a duration":    {plugin.Config{"max_idle": "a week"}, KeyMaxIdle},
		"a number":          {plugin.Config{"max_idle": 3600}, KeyMaxIdle},
		"bad pattern":       {plugin.Config{"max_idle": "1h", "groups.include_always": []any{"a(b"}}, KeyIncludeAlways},
		"not a list":        {plugin.Config{"max_idle": "1h", "groups.include_always": "audit"}, KeyIncludeAlways},
		"unknown key":       {plugin.Config{"max_idle": "1h", "max_age": "1h"}, "max_age"},
	} {
		_, err := ConfigFromPlugin(tc.cfg)
		var ce *plugin.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, plugin.ErrInvalidConfig) || len(ce.Problems) != 1 || ce.Problems[0].Key != tc.key {
			t.Errorf("%s: %v; want a *plugin.ConfigError naming %s only", name, err, tc.key)
		}
	}
	if err := Schema.Check(); err != nil {
		t.Fatal(err)
	}
}

// serve serves cfg as a filter plugin over go-plugin's gRPC transport and
// returns the host's client.
func serve(t *testing.T, cfg plugin.ServeConfig) *goplugin.GRPCClient {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{string(plugin.KindFilter): plugin.ServerPlugin(cfg, plugin.KindFilter)})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// dispense returns the host's side of the filter, as a host gets it once
// the plugin is configured.
func dispense(t *testing.T, client *goplugin.GRPCClient) filter.Filter {
	t.Helper()
	raw, err := client.Dispense(string(plugin.KindFilter))
	if err != nil {
		t.Fatal(err)
	}
	return raw.(filter.Filter)
}

// Over the RPC the filter decides exactly as in process: LastCommit crosses
// to the nanosecond (one nanosecond past max_idle is dropped, exactly
// max_idle is kept), and an unknown LastCommit stays unknown (kept).
func TestSameDecisionsOverRPC(t *testing.T) {
	t.Parallel()
	cfg := Config{MaxIdle: time.Hour, IncludeAlways: []string{"audit-.*"}}
	f := dispense(t, serve(t, plugin.ServeConfig{Filter: mustNew(t, cfg)}))
	if info := f.Info(); info.Name != Name || info.ProtocolMinor != filter.ProtocolMinor {
		t.Fatalf("Info over RPC = %+v", info)
	}
	in := sample()
	got, err := f.FilterGroups(t.Context(), "m", in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := mustNew(t, cfg).FilterGroups(t.Context(), "m", sample())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(filtertest.GroupIDs(got), filtertest.GroupIDs(want)) || !slices.Contains(filtertest.GroupIDs(got), "at-the-limit") || slices.Contains(filtertest.GroupIDs(got), "just-over") {
		t.Fatalf("over RPC kept %q, in process %q", filtertest.GroupIDs(got), filtertest.GroupIDs(want))
	}
	if err := filter.VerifyOutput(in, got); err != nil {
		t.Fatal(err)
	}
	filtertest.Run(t, f)
}

// Configured through the plugin configuration service, as the host does with
// the built-in: max_idle is required, and the configured filter drops idle
// groups.
func TestConfiguredOverRPC(t *testing.T) {
	t.Parallel()
	client := serve(t, plugin.ServeConfig{Schema: Schema, NewFilter: NewFromConfig})
	cc := plugin.NewConfigClient(client.Conn)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := cc.Configure(ctx, Name, plugin.Config{"groups.include_always": []any{"audit"}})
	var ce *plugin.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Key != KeyMaxIdle {
		t.Fatalf("Configure without max_idle = %v, want a ConfigError naming %s", err, KeyMaxIdle)
	}
	if err := cc.Configure(ctx, Name, plugin.Config{"max_idle": "1h", "groups.include_always": []any{"audit"}}); err != nil {
		t.Fatal(err)
	}
	f := dispense(t, client)
	real := time.Now()
	in := []filter.Group{
		group("active", real.Add(-time.Minute)),
		group("idle", real.Add(-2*time.Hour)),
		group("audit", real.Add(-2*time.Hour)),
		group("new", time.Time{}),
	}
	out, err := f.FilterGroups(ctx, "m", in)
	if err != nil {
		t.Fatal(err)
	}
	if got := filtertest.GroupIDs(out); !slices.Equal(got, []string{"active", "audit", "new"}) {
		t.Fatalf("kept %q, want active, audit and new", got)
	}
}
