package kiprules

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/sdk/filter"
)

func mustCompile(t *testing.T, patterns ...string) List {
	t.Helper()
	l, err := Compile(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestListMatchesWholeNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		patterns []string
		match    []string
		noMatch  []string
	}{
		{[]string{"orders.*"}, []string{"orders", "orders-eu"}, []string{"my-orders", "Orders"}},
		{[]string{"a|b"}, []string{"a", "b"}, []string{"ab", "xa", "bx", "a|b"}},
		{[]string{"(?i)orders", "payments"}, []string{"ORDERS", "orders", "payments"}, []string{"PAYMENTS"}},
		{nil, nil, []string{"", "a"}},
	}
	for _, c := range cases {
		l := mustCompile(t, c.patterns...)
		for _, n := range c.match {
			if !l.Match(n) {
				t.Errorf("%q does not match %q", c.patterns, n)
			}
		}
		for _, n := range c.noMatch {
			if l.Match(n) {
				t.Errorf("%q matches %q", c.patterns, n)
			}
		}
	}
	if l := mustCompile(t, "a", "b.*"); l.Len() != 2 || l.String() != "a,b.*" || !slices.Equal(l.Patterns(), []string{"a", "b.*"}) {
		t.Fatalf("List %v: Len %d, String %q", l.Patterns(), l.Len(), l.String())
	}
}

func TestCompileReportsEveryInvalidPattern(t *testing.T) {
	t.Parallel()
	_, err := Compile([]string{"ok", "orders(", "", "(?!x).*"})
	pes := PatternErrors(err)
	if len(pes) != 3 || pes[0].Index != 1 || pes[1].Index != 2 || pes[2].Index != 3 {
		t.Fatalf("PatternErrors = %v (from %v)", pes, err)
	}
	if !errors.Is(pes[1], ErrEmptyPattern) || pes[0].Error() != "invalid pattern \"orders(\": error parsing regexp: missing closing ): `orders(`" {
		t.Fatalf("errors: %q, %q", pes[0], pes[1])
	}
	// Balanced alone, so the wrapping cannot change what a pattern means.
	if _, err := Compile([]string{"a)|(b"}); len(PatternErrors(err)) != 1 {
		t.Fatalf("a)|(b: %v", err)
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	r := Rules{
		TopicsInclude: mustCompile(t, ".*"), TopicsExclude: mustCompile(t, ".*-tmp"),
		GroupsInclude: mustCompile(t, "app-.*"), GroupsExclude: mustCompile(t, "app-test.*"),
	}
	for name, want := range map[string]bool{"orders": true, "orders-tmp": false, "__consumer_offsets": false, "__x": false} {
		if got := r.Topic(filter.Topic{Name: name}); got != want {
			t.Errorf("Topic(%q) = %v", name, got)
		}
	}
	if r.Topic(filter.Topic{Name: "flagged", Internal: true}) {
		t.Error("an internal topic passed")
	}
	for id, want := range map[string]bool{"app-1": true, "app-test": false, "my-app": false} {
		if got := r.Group(id); got != want {
			t.Errorf("Group(%q) = %v", id, got)
		}
	}
	var zero Rules
	if zero.Topic(filter.Topic{Name: "a"}) || zero.Group("a") {
		t.Error("the zero Rules let something pass")
	}
}

func TestKeep(t *testing.T) {
	t.Parallel()
	in := []filter.Group{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	out, err := Keep(t.Context(), in, func(g filter.Group) bool { return g.ID != "b" })
	if err != nil || len(out) != 2 || out[0].ID != "a" || out[1].ID != "c" || in[1].ID != "b" {
		t.Fatalf("Keep = %v, %v", out, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Keep(ctx, in, func(filter.Group) bool { return true }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Keep(canceled) = %v", err)
	}
}
