package control

import "testing"

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
