package scope

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
)

// rules is a mirror's include/exclude keys as written in a configuration.
type rules struct {
	topicsInclude, topicsExclude []string
	groupsInclude, groupsExclude []string
	acls                         string
}

func newFilter(t testing.TB, r rules) *Builtin {
	t.Helper()
	var m config.Mirror
	for _, l := range []struct {
		into     *config.RegexList
		patterns []string
	}{
		{&m.TopicsInclude, r.topicsInclude}, {&m.TopicsExclude, r.topicsExclude},
		{&m.GroupsInclude, r.groupsInclude}, {&m.GroupsExclude, r.groupsExclude},
	} {
		rl, err := config.CompileRegexList(l.patterns)
		if err != nil {
			t.Fatal(err)
		}
		*l.into = rl
	}
	acls, err := aclrule.Parse(r.acls)
	if err != nil {
		t.Fatal(err)
	}
	m.ACLInclude = acls
	return New(&m)
}

// defaults are the configuration's defaults with every topic included.
var defaults = rules{topicsInclude: []string{".*"}, topicsExclude: []string{"__.*"}, groupsInclude: []string{".*"}}

func TestConformance(t *testing.T) {
	t.Parallel()
	filtertest.Run(t, newFilter(t, defaults))
	filtertest.Run(t, newFilter(t, rules{
		topicsInclude: []string{"app-0.*", "orders"}, topicsExclude: []string{"app-00.*"},
		groupsInclude: []string{"consumer-.*"}, groupsExclude: []string{"consumer-1.*"},
		acls: "TOPIC;orders.*,GROUP;billing;READ;ALLOW;User:bob",
	}))
	filtertest.Run(t, newFilter(t, rules{})) // nothing passes
}

func TestTopicsIncludeExcludeWinsInternalNever(t *testing.T) {
	t.Parallel()
	f := newFilter(t, rules{topicsInclude: []string{"orders.*", "__.*", "flagged", "pay"}, topicsExclude: []string{"orders-tmp.*"}})
	in := append(filtertest.Topics("orders", "orders-eu", "my-orders", "orders-tmp", "orders-tmp-2", "__consumer_offsets", "__custom", "pay", "payments"),
		filter.Topic{Name: "flagged", Internal: true})
	out, err := f.FilterTopics(t.Context(), "m", in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filtertest.TopicNames(out), []string{"orders", "orders-eu", "pay"}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if f.Topic(filter.Topic{Name: "orders-tmp"}) || !f.Topic(filter.Topic{Name: "orders-x"}) {
		t.Fatal("Topic disagrees with FilterTopics")
	}
}

func TestTopicsEmptyIncludeKeepsNothing(t *testing.T) {
	t.Parallel()
	out, err := newFilter(t, rules{}).FilterTopics(t.Context(), "m", filtertest.Topics("orders", "a"))
	if err != nil || len(out) != 0 {
		t.Fatalf("an empty include list kept %v (%v)", filtertest.TopicNames(out), err)
	}
}

func TestGroupsIncludeMinusExclude(t *testing.T) {
	t.Parallel()
	f := newFilter(t, rules{groupsInclude: []string{"app-.*"}, groupsExclude: []string{"app-test.*"}})
	in := filtertest.Groups("app-orders", "app-test", "app-test-1", "app-tester", "my-app-x", "app-", "billing")
	in = append(in, filter.Group{ID: "app-share", Kind: filter.GroupShare, State: "Stable"})
	out, err := f.FilterGroups(t.Context(), "m", in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filtertest.GroupIDs(out), []string{"app-orders", "app-", "app-share"}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if err := filter.VerifyOutput(in, out); err != nil {
		t.Fatal(err)
	}
}

func TestACLsMatchAnyRule(t *testing.T) {
	t.Parallel()
	f := newFilter(t, rules{acls: "TOPIC;orders.*,GROUP;consumer-.*;READ;ALLOW;User:bob,*;*;*;*;User:alice"})
	group := func(name, principal, op, perm string) filter.ACLBinding {
		return filter.ACLBinding{ResourceType: "GROUP", ResourceName: name, PatternType: "LITERAL", Principal: principal, Host: "*", Operation: op, Permission: perm}
	}
	kept := []filter.ACLBinding{
		filtertest.TopicACL("orders", "User:carol", "WRITE"),
		{ResourceType: "TOPIC", ResourceName: "orders-", PatternType: "PREFIXED", Principal: "User:bob", Host: "10.0.0.1", Operation: "READ", Permission: "DENY"},
		group("consumer-1", "User:bob", "READ", "ALLOW"),
		group("payments", "User:alice", "DESCRIBE", "DENY"),
		{ResourceType: "CLUSTER", ResourceName: "kafka-cluster", PatternType: "LITERAL", Principal: "User:alice", Host: "*", Operation: "ALTER", Permission: "ALLOW"},
	}
	dropped := []filter.ACLBinding{
		filtertest.TopicACL("my-orders", "User:carol", "READ"),
		group("consumer-1", "User:bob", "WRITE", "ALLOW"),
		group("consumer-1", "User:bob", "READ", "DENY"),
		group("consumer-1", "User:carol", "READ", "ALLOW"),
		group("other", "User:bob", "READ", "ALLOW"),
		group("consumer-1", "User:alice2", "READ", "DENY"),
	}
	in := append(slices.Clone(dropped), kept...)
	out, err := f.FilterACLs(t.Context(), "m", in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, kept) {
		t.Fatalf("kept %v\nwant %v", out, kept)
	}
	if !f.HasACLRules() || newFilter(t, rules{}).HasACLRules() {
		t.Fatal("HasACLRules is wrong")
	}
	none, err := newFilter(t, rules{}).FilterACLs(t.Context(), "m", in)
	if err != nil || len(none) != 0 {
		t.Fatalf("no rules kept %v (%v)", none, err)
	}
}

// The filter copies the rules: a mirror configuration changed afterwards
// does not change its decisions.
func TestNewCopiesTheRules(t *testing.T) {
	t.Parallel()
	var m config.Mirror
	var err error
	if m.GroupsInclude, err = config.CompileRegexList([]string{"a.*"}); err != nil {
		t.Fatal(err)
	}
	f := New(&m)
	m.GroupsInclude = config.RegexList{}
	if !f.Group("abc") {
		t.Fatal("the filter followed a later change of the configuration")
	}
}

func TestCanceledContextIsNoDecision(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	f := newFilter(t, defaults)
	if _, err := f.FilterGroups(ctx, "m", filtertest.Groups("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// Chained after the built-in filter, another filter sees only what the
// built-in kept (the way a plugin filter will be added).
func TestChainsWithAPluginFilter(t *testing.T) {
	t.Parallel()
	var seen []string
	plugin := filter.Funcs{Name: "no-v1", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for _, tp := range in {
			seen = append(seen, tp.Name)
			if tp.Name != "orders-v1" {
				out = append(out, tp)
			}
		}
		return out, nil
	}}
	c := filter.Chain(newFilter(t, rules{topicsInclude: []string{"orders.*"}}), plugin)
	out, err := c.FilterTopics(t.Context(), "m", filtertest.Topics("orders-v1", "orders-v2", "payments", "__consumer_offsets"))
	if err != nil {
		t.Fatal(err)
	}
	if got := filtertest.TopicNames(out); !slices.Equal(got, []string{"orders-v2"}) {
		t.Fatalf("chain kept %v", got)
	}
	if !slices.Equal(seen, []string{"orders-v1", "orders-v2"}) {
		t.Fatalf("the plugin saw %v, want only the built-in's output", seen)
	}
}
