package aclrule

import (
	"errors"
	"strings"
	"testing"
)

func topicRead(name, principal string) Binding {
	return Binding{ResourceType: "TOPIC", ResourceName: name, PatternType: "LITERAL", Principal: principal, Host: "*", Operation: "READ", Permission: "ALLOW"}
}

// The examples are the ones KIP-1279 gives for mirror.acl.include.
func TestKIPExamples(t *testing.T) {
	t.Parallel()
	alice := topicRead("orders-eu", "User:alice")
	bobGroup := Binding{ResourceType: "GROUP", ResourceName: "consumer-billing", Principal: "User:bob", Operation: "READ", Permission: "ALLOW"}
	carolWrite := Binding{ResourceType: "TOPIC", ResourceName: "payments", Principal: "User:carol", Operation: "WRITE", Permission: "ALLOW"}
	appDeny := Binding{ResourceType: "CLUSTER", ResourceName: "kafka-cluster", Principal: "User:app-7", Operation: "ALTER", Permission: "DENY"}
	aliceCluster := Binding{ResourceType: "CLUSTER", ResourceName: "kafka-cluster", Principal: "User:alice", Operation: "DESCRIBE", Permission: "ALLOW"}

	cases := []struct {
		rules string
		in    []Binding
		out   []Binding
	}{
		{"*", []Binding{alice, bobGroup, carolWrite, appDeny}, nil},
		{"TOPIC;orders.*", []Binding{alice}, []Binding{bobGroup, carolWrite, appDeny}},
		{"*;*;*;*;User:alice", []Binding{alice, aliceCluster}, []Binding{bobGroup, carolWrite}},
		{"*;*;*;*;User:app-.*", []Binding{appDeny}, []Binding{alice, bobGroup}},
		{"TOPIC;*;READ;ALLOW", []Binding{alice}, []Binding{carolWrite, bobGroup, appDeny}},
		{"GROUP;consumer-.*;READ;ALLOW;User:bob", []Binding{bobGroup}, []Binding{alice, carolWrite}},
		{"TOPIC;orders.*,*;*;*;*;User:alice", []Binding{alice, aliceCluster}, []Binding{carolWrite, bobGroup, appDeny}},
		{"TOPIC;orders.*, *;*;*;*;User:alice", []Binding{alice, aliceCluster}, []Binding{carolWrite, bobGroup}},
	}
	for _, c := range cases {
		rs, err := Parse(c.rules)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.rules, err)
		}
		for _, b := range c.in {
			if !rs.Match(b) {
				t.Errorf("%q does not match %+v, want match", c.rules, b)
			}
		}
		for _, b := range c.out {
			if rs.Match(b) {
				t.Errorf("%q matches %+v, want no match", c.rules, b)
			}
		}
	}
}

func TestRegexIsAnchored(t *testing.T) {
	t.Parallel()
	rs, err := Parse("TOPIC;orders;*;*;User:a.*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"my-orders", "orders-eu", "xorders"} {
		if rs.Match(topicRead(name, "User:alice")) {
			t.Errorf("resource %q matched regex orders; the match must cover the whole name", name)
		}
	}
	if !rs.Match(topicRead("orders", "User:alice")) {
		t.Error("exact name did not match")
	}
	if rs.Match(topicRead("orders", "xUser:alice")) {
		t.Error("principal regex matched a value with a prefix")
	}
	// An alternation must not escape the anchors.
	rs, err = Parse("TOPIC;a|b")
	if err != nil {
		t.Fatal(err)
	}
	if rs.Match(topicRead("ab", "User:x")) || rs.Match(topicRead("xa", "User:x")) || !rs.Match(topicRead("b", "User:x")) {
		t.Error("alternation a|b is not anchored as a whole")
	}
}

func TestCaseInsensitiveEnums(t *testing.T) {
	t.Parallel()
	rs, err := Parse("topic;*;read;allow")
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.String(); got != "TOPIC;*;READ;ALLOW" {
		t.Errorf("String() = %q, want canonical upper case", got)
	}
	b := Binding{ResourceType: "TransactionalId", Operation: "idempotent-write", Permission: "allow"}
	rs, err = Parse("transactional_id;*;IDEMPOTENT_WRITE;ALLOW")
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Match(b) {
		t.Error("binding enums in other spellings did not match")
	}
}

func TestOperationAllIsExact(t *testing.T) {
	t.Parallel()
	all := topicRead("t", "User:u")
	all.Operation = "ALL"
	read, _ := Parse("TOPIC;*;READ")
	if read.Match(all) {
		t.Error("rule READ matched binding ALL; filters compare operations exactly")
	}
	allRule, _ := Parse("TOPIC;*;ALL")
	if allRule.Match(topicRead("t", "User:u")) {
		t.Error("rule ALL matched binding READ")
	}
	if !allRule.Match(all) {
		t.Error("rule ALL did not match binding ALL")
	}
}

func TestEmptyMatchesNothing(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "   "} {
		rs, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if len(rs) != 0 || rs.Match(topicRead("t", "User:u")) {
			t.Errorf("Parse(%q) = %v; want an empty list that matches nothing", s, rs)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in    string
		rule  int
		field string
		want  string
	}{
		{"TOPIC;orders.(", 1, FieldResourceName, `invalid regex "orders.(": error parsing regexp: missing closing )`},
		{"*,TOPCI", 2, FieldResourceType, `unknown value "TOPCI"; valid: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER or *`},
		{"TOPIC;x;REED", 1, FieldOperation, `unknown value "REED"; valid: ALL, READ`},
		{"TOPIC;x;READ;MAYBE", 1, FieldPermissionType, `unknown value "MAYBE"; valid: ALLOW, DENY or *`},
		{"TOPIC;x;READ;ALLOW;User:(", 1, FieldPrincipal, `invalid regex "User:("`},
		{"TOPIC;x;READ;ALLOW;User:a;extra", 1, "", "6 fields, at most 5 are allowed"},
		{"TOPIC;orders,", 2, "", "empty rule"},
		{"TOPIC;;READ", 1, FieldResourceName, "empty field"},
		{"TOPIC;", 1, FieldResourceName, "empty field"},
		{"ANY", 1, FieldResourceType, `unknown value "ANY"`},
		{"TOPIC;*;ANY", 1, FieldOperation, `unknown value "ANY"`},
		{"TOPIC;(?=x)", 1, FieldResourceName, "invalid or unsupported Perl syntax"},
		{"TOPIC;a)|(b", 1, FieldResourceName, "unexpected )"},
		{"*;*;*;*;alice", 1, FieldPrincipal, `"alice" can never match: Kafka principals are Type:name (User:alice`},
		{"*;*;*;*;bob|carol", 1, FieldPrincipal, "can never match"},
		{"*;*;*;*;[a-z]+", 1, FieldPrincipal, "can never match"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error", c.in)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) error %T %v is not a *ParseError wrapping ErrInvalid", c.in, err, err)
			continue
		}
		if pe.Rule != c.rule || pe.Field != c.field || !strings.Contains(pe.Reason, c.want) {
			t.Errorf("Parse(%q) = rule %d field %q reason %q; want rule %d field %q reason containing %q", c.in, pe.Rule, pe.Field, pe.Reason, c.rule, c.field, c.want)
		}
		if !strings.Contains(err.Error(), "rule ") || (c.field != "" && !strings.Contains(err.Error(), c.field)) {
			t.Errorf("Error() = %q does not name the rule and field", err)
		}
	}
}

func TestParseRuleAllowsCommaInRegex(t *testing.T) {
	t.Parallel()
	r, err := ParseRule("TOPIC;a{1,3}")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Match(topicRead("aaa", "User:x")) || r.Match(topicRead("aaaa", "User:x")) {
		t.Error("a{1,3} did not match as a bounded repetition")
	}
	if _, err := Parse("TOPIC;a{1,3}"); err == nil {
		t.Error("Parse split on the comma and still succeeded; want an error for rule 2")
	}
}

func TestStringOmitsTrailingWildcards(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"*":                       "*",
		"*;*;*;*;*":               "*",
		"TOPIC;*;*":               "TOPIC",
		"*;*;*;*;User:alice":      "*;*;*;*;User:alice",
		" group ; g.* ; read ":    "GROUP;g.*;READ",
		"TOPIC;orders.*;*;DENY;*": "TOPIC;orders.*;*;DENY",
	}
	for in, want := range cases {
		r, err := ParseRule(in)
		if err != nil {
			t.Fatalf("ParseRule(%q): %v", in, err)
		}
		if got := r.String(); got != want {
			t.Errorf("ParseRule(%q).String() = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*", "TOPIC;orders.*", "*;*;*;*;User:alice", "TOPIC;*;READ;ALLOW",
		"GROUP;consumer-.*;READ;ALLOW;User:bob", "TOPIC;orders.*,*;*;*;*;User:alice",
		"", " , ", "TOPIC;(", "user;a|b;two_phase_commit;deny;User:.*", "TOPIC;;", "a;b;c;d;e;f",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) returned %T, want *ParseError", s, err)
			}
			return
		}
		for _, r := range rs {
			back, err := ParseRule(r.String())
			if err != nil {
				t.Fatalf("ParseRule(%q) of parsed rule from %q: %v", r.String(), s, err)
			}
			if !back.Equal(r) {
				t.Fatalf("round trip of %q: got %#v, want %#v", s, back, r)
			}
		}
		back, err := Parse(rs.String())
		if err != nil {
			t.Fatalf("Parse(%q) of Rules.String() from %q: %v", rs.String(), s, err)
		}
		if !back.Equal(rs) {
			t.Fatalf("round trip of list %q: got %v, want %v", s, back, rs)
		}
		// Matching must never panic, whatever the binding.
		rs.Match(Binding{ResourceType: s, ResourceName: s, Principal: s, Operation: s, Permission: s})
	})
}
