package control

import (
	"context"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func TestControlRulesLastMatchWins(t *testing.T) {
	t.Parallel()
	var rules []Rule
	rules = AppendRule(rules, Rule{Topics: []string{".*"}, On: true})
	rules = AppendRule(rules, Rule{Topics: []string{"orders.*"}, Exclude: []string{"orders-tmp"}, On: false})
	rules = AppendRule(rules, Rule{Topics: []string{"orders-eu"}, On: true})
	c, err := compileRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{"payments": true, "orders-us": false, "orders-tmp": true, "orders-eu": true} {
		if got := decide(c, topic); got != want {
			t.Errorf("%s: stopped %v, want %v (rules %+v)", topic, got, want, rules)
		}
	}
	if rules = AppendRule(rules, Rule{Topics: []string{".*"}, On: false}); rules != nil {
		t.Fatalf("a rule over every topic replaces the others: %+v", rules)
	}
	rules = AppendRule(nil, Rule{Topics: []string{"a"}, On: true})
	if rules = AppendRule(rules, Rule{Topics: []string{"a"}, On: false}); rules != nil {
		t.Fatalf("turning off the only rule leaves nothing: %+v", rules)
	}
}

// Pause, Stop and Start record rules that Paused and Stopped answer from,
// and a new holder reads them back from the store.
func TestHolderRecordsPauseStopAndStart(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	c := New(store, "dc1")
	if err := c.Pause(ctx, []string{"orders"}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, []string{".*"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, []string{"pay.*"}, []string{"payments-tmp"}); err != nil {
		t.Fatal(err)
	}
	again := New(store, "dc1")
	for _, h := range []*Holder{c, again} {
		for topic, want := range map[string][2]bool{"orders": {true, true}, "payments": {false, false}, "payments-tmp": {false, true}} {
			p, err := h.Paused(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			s, err := h.Stopped(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if p != want[0] || s != want[1] {
				t.Errorf("%s: paused %v stopped %v, want %v", topic, p, s, want)
			}
		}
	}
	if pats, res, err := Patterns(nil); err != nil || len(pats) != 1 || pats[0] != ".*" || !MatchAny(res, "anything") {
		t.Fatalf("Patterns(nil) = %v, %v, %v; want every topic", pats, res, err)
	}
}

// Stop and Start need topics, and refuse a bad pattern, before they record
// anything.
func TestStopAndStartRefuseInvalidRequestsBeforeRecordingAnything(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	m := Mirror{Name: "dc1", Rules: New(store, "dc1")}
	for name, err := range map[string]error{
		"stop without topics":  func() error { _, err := Stop(ctx, m, nil); return err }(),
		"start without topics": func() error { _, err := Start(ctx, m, nil, nil); return err }(),
		"start with a bad one": func() error { _, err := Start(ctx, m, []string{"("}, nil); return err }(),
		"pause with a bad one": func() error { _, err := SetPaused(ctx, m, []string{"("}, true); return err }(),
	} {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err %v, want ErrInvalidRequest", name, err)
		}
	}
	if ents, err := store.List(ctx, ""); err != nil || len(ents) != 0 {
		t.Fatalf("refused requests recorded %v (%v)", ents, err)
	}
}
