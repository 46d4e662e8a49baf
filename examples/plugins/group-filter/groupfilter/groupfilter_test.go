package groupfilter_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
	"github.com/kmirror/kmirror/sdk/plugin"

	"example.com/group-filter/groupfilter"
)

func newFilter(t *testing.T, cfg groupfilter.Config) *groupfilter.Filter {
	t.Helper()
	f, err := groupfilter.New("teams", cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// What every filter must do: the SDK's conformance suite.
func TestConformance(t *testing.T) {
	t.Run("groups", func(t *testing.T) {
		filtertest.Run(t, newFilter(t, groupfilter.Config{GroupPrefixes: []string{"billing"}}))
	})
	t.Run("groups-and-topics", func(t *testing.T) {
		filtertest.Run(t, newFilter(t, groupfilter.Config{GroupPrefixes: []string{"billing"}, TopicPrefixes: []string{"orders"}}))
	})
}

// What this filter decides.
func TestKeepsGroupsAndTopicsByPrefix(t *testing.T) {
	f := newFilter(t, groupfilter.Config{GroupPrefixes: []string{"billing-", "search-"}, TopicPrefixes: []string{"billing."}})
	groups, err := f.FilterGroups(t.Context(), "dc1-to-dc2", filtertest.Groups("billing-app", "search-indexer", "payments", "billing"))
	if got := filtertest.GroupIDs(groups); err != nil || !slices.Equal(got, []string{"billing-app", "search-indexer"}) {
		t.Fatalf("FilterGroups = %v, %v", got, err)
	}
	topics, err := f.FilterTopics(t.Context(), "dc1-to-dc2", filtertest.Topics("billing.invoices", "search.docs"))
	if got := filtertest.TopicNames(topics); err != nil || !slices.Equal(got, []string{"billing.invoices"}) {
		t.Fatalf("FilterTopics = %v, %v", got, err)
	}
	if kinds := f.Info().Kinds; !slices.Equal(kinds, []filter.Kind{filter.Groups, filter.Topics}) {
		t.Fatalf("Info().Kinds = %v", kinds)
	}
}

// A configuration that would sync nothing, or everything, is refused,
// naming the key.
func TestRefusesEmptyPrefixes(t *testing.T) {
	_, err := groupfilter.New("teams", groupfilter.Config{GroupPrefixes: []string{"billing-", ""}}, hclog.NewNullLogger())
	var ce *plugin.ConfigError
	if !errors.As(err, &ce) || ce.Problems[0].Key != "group_prefixes" {
		t.Fatalf("New = %v, want a *plugin.ConfigError naming group_prefixes", err)
	}
}

// The plugin as kmirror sees it: served over gRPC in this process, read
// its Schema, Configure it, then ask it.
func TestThroughTheConfigurationService(t *testing.T) {
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		string(plugin.KindFilter): plugin.ServerPlugin(groupfilter.ServeConfig(hclog.NewNullLogger()), plugin.KindFilter),
	})
	t.Cleanup(func() { _ = client.Close() })
	cc := plugin.NewConfigClient(client.Conn)

	schema, err := cc.Schema(t.Context())
	if err != nil || len(schema) != 2 || schema[0].Name != "group_prefixes" || !schema[0].Required {
		t.Fatalf("Schema = %+v, %v", schema, err)
	}
	err = cc.Configure(t.Context(), "teams", plugin.Config{"group_prefixes": []any{}})
	if !errors.Is(err, plugin.ErrInvalidConfig) {
		t.Fatalf("Configure with no prefix = %v, want ErrInvalidConfig", err)
	}
	if err := cc.Configure(t.Context(), "teams", plugin.Config{"group_prefixes": []any{"billing-"}}); err != nil {
		t.Fatal(err)
	}

	raw, err := client.Dispense(string(plugin.KindFilter))
	if err != nil {
		t.Fatal(err)
	}
	f := raw.(filter.Filter)
	if info := f.Info(); info.Name != "teams" || !slices.Equal(info.Kinds, []filter.Kind{filter.Groups}) {
		t.Fatalf("Info = %+v", info)
	}
	groups, err := f.FilterGroups(t.Context(), "dc1-to-dc2", filtertest.Groups("billing-app", "payments"))
	if got := filtertest.GroupIDs(groups); err != nil || !slices.Equal(got, []string{"billing-app"}) {
		t.Fatalf("FilterGroups = %v, %v", got, err)
	}
	filtertest.Run(t, f)
}
