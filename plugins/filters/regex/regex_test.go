package regex

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
	"github.com/kmirror/kmirror/sdk/plugin"
)

func mustNew(t testing.TB, c Config) *Filter {
	t.Helper()
	f, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestTopics(t *testing.T) {
	t.Parallel()
	internal := filter.Topic{Name: "flagged-internal", Internal: true}
	cases := []struct {
		name   string
		cfg    Config
		topics []filter.Topic
		want   []string
	}{
		{"defaults include no topic (only explicitly added topics mirror)", DefaultConfig(),
			filtertest.Topics("orders", "a", "__consumer_offsets"), nil},
		{"include matches the whole name", Config{TopicsInclude: []string{"orders.*"}},
			filtertest.Topics("orders", "orders-eu", "my-orders", "Orders", "xorders"), []string{"orders", "orders-eu"}},
		{"a pattern without metacharacters is a literal name", Config{TopicsInclude: []string{"orders"}},
			filtertest.Topics("orders", "orders-eu", "orders2"), []string{"orders"}},
		{"dots are regex dots", Config{TopicsInclude: []string{"orders.v2"}},
			filtertest.Topics("orders.v2", "orders-v2", "orders.v22"), []string{"orders.v2", "orders-v2"}},
		{"alternation is anchored as a whole", Config{TopicsInclude: []string{"a|b"}},
			filtertest.Topics("a", "b", "ab", "xa", "bx", "a|b"), []string{"a", "b"}},
		{"several patterns: any one includes", Config{TopicsInclude: []string{"orders", "pay.*"}},
			filtertest.Topics("orders", "payments", "pay", "shipping"), []string{"orders", "payments", "pay"}},
		{"flags apply to their own pattern only", Config{TopicsInclude: []string{"(?i)orders", "payments"}},
			filtertest.Topics("ORDERS", "Orders", "orders", "PAYMENTS", "payments"), []string{"ORDERS", "Orders", "orders", "payments"}},
		{"exclude wins over include", Config{TopicsInclude: []string{".*"}, TopicsExclude: []string{".*-tmp", "scratch"}},
			filtertest.Topics("orders", "orders-tmp", "scratch", "scratch2"), []string{"orders", "scratch2"}},
		{"exclude wins over an exact include", Config{TopicsInclude: []string{"orders"}, TopicsExclude: []string{"orders"}},
			filtertest.Topics("orders"), nil},
		{"default exclude drops __ topics", Config{TopicsInclude: []string{".*"}, TopicsExclude: DefaultConfig().TopicsExclude},
			filtertest.Topics("__consumer_offsets", "__custom", "_one", "orders"), []string{"_one", "orders"}},
		{"internal topics never pass, even with no exclude list", Config{TopicsInclude: []string{".*", "__consumer_offsets", "__.*"}},
			append(filtertest.Topics("__consumer_offsets", "__transaction_state", "__x", "orders"), internal), []string{"orders"}},
		{"empty include with excludes still includes nothing", Config{TopicsExclude: []string{"nothing"}},
			filtertest.Topics("orders"), nil},
		{"the output keeps the input order", Config{TopicsInclude: []string{".*"}},
			filtertest.Topics("z", "a", "m"), []string{"z", "a", "m"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mustNew(t, c.cfg)
			out, err := f.FilterTopics(t.Context(), "m", c.topics)
			if err != nil {
				t.Fatal(err)
			}
			if got := filtertest.TopicNames(out); !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
				t.Fatalf("passed %q, want %q", got, c.want)
			}
			if err := filter.VerifyOutput(c.topics, out); err != nil {
				t.Fatal(err)
			}
			for _, tp := range c.topics {
				if got, want := f.TopicPasses(tp), slices.Contains(c.want, tp.Name); got != want {
					t.Errorf("TopicPasses(%q) = %v, want %v", tp.Name, got, want)
				}
			}
		})
	}
}

func TestGroups(t *testing.T) {
	t.Parallel()
	all := filtertest.Groups("billing", "billing-v2", "app-1", "app-2", "connect-mm2", "")
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"defaults include every group", DefaultConfig(), []string{"billing", "billing-v2", "app-1", "app-2", "connect-mm2", ""}},
		{"empty include includes nothing", Config{}, nil},
		{"include", Config{GroupsInclude: []string{"app-.*", "billing"}}, []string{"billing", "app-1", "app-2"}},
		{"exclude wins", Config{GroupsInclude: []string{".*"}, GroupsExclude: []string{"connect-.*", "app-2"}}, []string{"billing", "billing-v2", "app-1", ""}},
		{"topic lists do not apply to groups", Config{TopicsInclude: []string{"billing"}, TopicsExclude: []string{".*"}, GroupsInclude: []string{"billing"}}, []string{"billing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mustNew(t, c.cfg)
			out, err := f.FilterGroups(t.Context(), "m", all)
			if err != nil {
				t.Fatal(err)
			}
			if got := filtertest.GroupIDs(out); !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
				t.Fatalf("passed %q, want %q", got, c.want)
			}
		})
	}
}

func TestGroupListsDoNotApplyToTopics(t *testing.T) {
	t.Parallel()
	f := mustNew(t, Config{TopicsInclude: []string{"orders"}, GroupsExclude: []string{"orders"}})
	out, err := f.FilterTopics(t.Context(), "m", filtertest.Topics("orders"))
	if err != nil || len(out) != 1 {
		t.Fatalf("FilterTopics = %v, %v; want orders to pass", out, err)
	}
}

func TestACLsPassThrough(t *testing.T) {
	t.Parallel()
	f := mustNew(t, Config{})
	in := filtertest.SampleACLs()
	out, err := f.FilterACLs(t.Context(), "m", in)
	if err != nil || !slices.Equal(out, in) {
		t.Fatalf("FilterACLs changed the batch: %d of %d, %v", len(out), len(in), err)
	}
	if f.Info().Handles(filter.ACLs) {
		t.Fatal("Info claims ACLs")
	}
}

func TestInvalidPatterns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg  Config
		want []string // fragments of the error, in order
	}{
		{Config{TopicsInclude: []string{"ok", "orders("}}, []string{`mirror.topics.include[1]: invalid pattern "orders("`, "missing closing )"}},
		{Config{TopicsExclude: []string{"(?!internal).*"}}, []string{`mirror.topics.exclude[0]: invalid pattern "(?!internal).*"`}},
		{Config{GroupsInclude: []string{"a)|(b"}}, []string{`mirror.groups.include[0]: invalid pattern "a)|(b"`}},
		{Config{GroupsExclude: []string{""}}, []string{"mirror.groups.exclude[0]: empty pattern"}},
		{Config{TopicsInclude: []string{"[z-a]"}, GroupsExclude: []string{"x", "*"}}, []string{
			`mirror.topics.include[0]: invalid pattern "[z-a]"`, `; mirror.groups.exclude[1]: invalid pattern "*"`}},
	}
	for _, c := range cases {
		f, err := New(c.cfg)
		if f != nil || !errors.Is(err, filter.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig", c.cfg, f, err)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			i := strings.Index(msg, w)
			if i < 0 {
				t.Errorf("New(%+v): error %q lacks %q", c.cfg, msg, w)
				break
			}
			msg = msg[i+len(w):]
		}
		if verr := c.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
			t.Errorf("Validate = %v, want the error of New", verr)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	d := DefaultConfig()
	if len(d.TopicsInclude) != 0 || !slices.Equal(d.TopicsExclude, []string{"__.*"}) ||
		!slices.Equal(d.GroupsInclude, []string{".*"}) || len(d.GroupsExclude) != 0 {
		t.Fatalf("DefaultConfig = %+v", d)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	f := mustNew(t, DefaultConfig())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.FilterTopics(ctx, "m", filtertest.Topics("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("FilterTopics: %v", err)
	}
	if _, err := f.FilterGroups(ctx, "m", filtertest.Groups("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("FilterGroups: %v", err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	configs := map[string]Config{
		"defaults": DefaultConfig(),
		"zero":     {},
		"broad":    {TopicsInclude: []string{".*"}, TopicsExclude: []string{".*-tmp"}, GroupsInclude: []string{"consumer-.*", "billing"}, GroupsExclude: []string{"consumer-00.*"}},
	}
	for name, c := range configs {
		t.Run(name, func(t *testing.T) { filtertest.Run(t, mustNew(t, c)) })
	}
}

// The regex filter first, then a custom filter: the custom one sees only
// what the regex filter let through, and its decision is final.
func TestChainRegexThenCustom(t *testing.T) {
	t.Parallel()
	re := mustNew(t, Config{TopicsInclude: []string{"app-.*", "orders"}, TopicsExclude: []string{".*\\.tmp"}, GroupsInclude: []string{".*"}})
	var seen []string
	// A custom policy: mirror only topics with at least 3 partitions.
	minPartitions := filter.Funcs{Name: "min-partitions", Topics: func(_ context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for _, tp := range in {
			seen = append(seen, mirror+"/"+tp.Name)
			if tp.Partitions >= 3 {
				out = append(out, tp)
			}
		}
		return out, nil
	}}
	in := filtertest.Topics("app-1", "app-2", "app-3.tmp", "orders", "payments", "__consumer_offsets")
	in[1].Partitions = 1
	out, err := filter.Chain(re, minPartitions).FilterTopics(t.Context(), "dc1", in)
	if err != nil {
		t.Fatal(err)
	}
	if got := filtertest.TopicNames(out); !slices.Equal(got, []string{"app-1", "orders"}) {
		t.Fatalf("chain passed %q", got)
	}
	if want := []string{"dc1/app-1", "dc1/app-2", "dc1/orders"}; !slices.Equal(seen, want) {
		t.Fatalf("the custom filter saw %q, want %q", seen, want)
	}
	// Groups go through the regex filter only: the custom filter does
	// not handle them.
	groups, err := filter.Chain(re, minPartitions).FilterGroups(t.Context(), "dc1", filtertest.Groups("g1", "g2"))
	if err != nil || len(groups) != 2 {
		t.Fatalf("FilterGroups = %v, %v", groups, err)
	}

	// The other order: the regex filter still has the last word.
	out, err = filter.Chain(minPartitions, re).FilterTopics(t.Context(), "dc1", in)
	if err != nil {
		t.Fatal(err)
	}
	if got := filtertest.TopicNames(out); !slices.Equal(got, []string{"app-1", "orders"}) {
		t.Fatalf("reversed chain passed %q", got)
	}
}

func BenchmarkFilterTopics(b *testing.B) {
	f := mustNew(b, Config{TopicsInclude: []string{"app-.*", "orders", "payments-.*", "(?i)audit\\..*"}, TopicsExclude: []string{"__.*", ".*\\.tmp", ".*-dlq"}})
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("app-%05d.events", i)
	}
	in := filtertest.Topics(names...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.FilterTopics(context.Background(), "m", in); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	f, err := NewFromConfig(t.Context(), "re", plugin.Config{"topics.include": []any{"orders.*"}, "groups.exclude": []any{"tmp-.*"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.FilterTopics(t.Context(), "m", filtertest.Topics("orders-eu", "payments", "__orders"))
	if err != nil || !slices.Equal(filtertest.TopicNames(out), []string{"orders-eu"}) {
		t.Fatalf("FilterTopics = %v, %v", filtertest.TopicNames(out), err)
	}
	// Absent keys take DefaultConfig's lists: every group but the excluded.
	groups, err := f.FilterGroups(t.Context(), "m", filtertest.Groups("app", "tmp-1"))
	if err != nil || !slices.Equal(filtertest.GroupIDs(groups), []string{"app"}) {
		t.Fatalf("FilterGroups = %v, %v", filtertest.GroupIDs(groups), err)
	}
	// An explicitly empty list is empty.
	c, err := ConfigFromPlugin(plugin.Config{"groups.include": []any{}})
	if err != nil || len(c.GroupsInclude) != 0 || !slices.Equal(c.TopicsExclude, []string{"__.*"}) {
		t.Fatalf("ConfigFromPlugin(empty groups.include) = %+v, %v", c, err)
	}
}

func TestNewFromConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg  plugin.Config
		want map[string]string
	}{
		{plugin.Config{"topics.include": []any{"ok", "orders("}, "groups.exclude": []any{""}}, map[string]string{
			"topics.include": "item 1: invalid pattern: missing closing )",
			"groups.exclude": "item 0: empty pattern (remove it, or use .* to match everything)",
		}},
		{plugin.Config{"topics.include": "orders"}, map[string]string{"topics.include": "must be a list of strings"}},
		{plugin.Config{"mirror.topics.include": []any{"a"}}, map[string]string{"mirror.topics.include": "unknown key (known: groups.exclude, groups.include, topics.exclude, topics.include)"}},
	}
	for _, c := range cases {
		f, err := NewFromConfig(t.Context(), "re", c.cfg)
		var ce *plugin.ConfigError
		if f != nil || !errors.As(err, &ce) || !errors.Is(err, plugin.ErrInvalidConfig) {
			t.Fatalf("NewFromConfig(%v) = %v, %v; want a *plugin.ConfigError", c.cfg, f, err)
		}
		got := map[string]string{}
		for _, p := range ce.Problems {
			got[p.Key] = p.Reason
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("NewFromConfig(%v): problems %v, want %v", c.cfg, got, c.want)
		}
		if strings.Contains(err.Error(), "orders(") {
			t.Errorf("the error quotes a value: %v", err)
		}
	}
}
