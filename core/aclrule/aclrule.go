// Package aclrule owns the grammar of KIP-1279's `mirror.acl.include` key: it
// parses include rules and decides whether a source ACL binding falls inside
// them. The ACL sync loop keeps only the bindings some rule matches.
//
// Grammar (one or more rules separated by commas):
//
//	rule := resourceType [ ";" resourceName [ ";" operation [ ";" permissionType [ ";" principal ]]]]
//
// Every field may be "*" (any value); omitted trailing fields are "*".
// resourceType, operation and permissionType are case-insensitive Kafka enum
// names. resourceName and principal are Go (RE2) regular expressions that
// must match the whole value: "orders.*" matches "orders-eu" but not
// "my-orders". A binding is included when it matches any rule.
//
// Fields are trimmed of surrounding white space. An empty field or an empty
// rule is an error rather than a silent wildcard: "TOPIC;orders," with its
// stray comma would otherwise include every ACL of the source cluster.
package aclrule

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// ErrInvalid is wrapped by every error Parse and ParseRule return, so callers
// can tell a malformed rule from other failures with errors.Is.
var ErrInvalid = errors.New("invalid ACL include rule")

// Wildcard is the field value that matches anything.
const Wildcard = "*"

// Field names, in rule order, as they appear in error messages.
const (
	FieldResourceType   = "resourceType"
	FieldResourceName   = "resourceName"
	FieldOperation      = "operation"
	FieldPermissionType = "permissionType"
	FieldPrincipal      = "principal"
)

var fieldNames = [5]string{FieldResourceType, FieldResourceName, FieldOperation, FieldPermissionType, FieldPrincipal}

// ResourceTypes are the accepted resourceType values besides "*".
var ResourceTypes = []string{"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

// Operations are the accepted operation values besides "*" (Kafka's
// AclOperation names without the filter-only ANY and UNKNOWN).
var Operations = []string{
	"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
	"DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
	"DESCRIBE_TOKENS", "TWO_PHASE_COMMIT",
}

// PermissionTypes are the accepted permissionType values besides "*".
var PermissionTypes = []string{"ALLOW", "DENY"}

// Binding is one ACL as read from a cluster, in Kafka's string forms
// (for example ResourceType "TOPIC", Operation "READ", Permission "ALLOW",
// Principal "User:alice"). Enum fields are compared ignoring case,
// underscores, dashes and dots, so both "TRANSACTIONAL_ID" and
// "TransactionalId" work. PatternType and Host are carried for the caller;
// no rule field filters on them.
type Binding struct {
	ResourceType string
	ResourceName string
	PatternType  string
	Principal    string
	Host         string
	Operation    string
	Permission   string
}

// Rule is one parsed include rule. The zero Rule is not valid; build rules
// with Parse or ParseRule. Enum fields hold canonical upper-case names or
// Wildcard; ResourceName and Principal hold the regular expression source or
// Wildcard.
type Rule struct {
	ResourceType string
	ResourceName string
	Operation    string
	Permission   string
	Principal    string

	name      *regexp.Regexp // nil for Wildcard
	principal *regexp.Regexp // nil for Wildcard
}

// Rules is a list of rules; a binding is included if any rule matches it.
// An empty list includes nothing.
type Rules []Rule

// ParseError says which rule and which field of an include list is invalid.
type ParseError struct {
	Rule   int    // 1-based position of the rule in the list
	Text   string // the rule as written (trimmed)
	Field  string // one of the Field* names, or "" when the rule as a whole is wrong
	Reason string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %d %q: ", e.Rule, e.Text)
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap lets errors.Is(err, ErrInvalid) hold.
func (e *ParseError) Unwrap() error { return ErrInvalid }

// Parse parses a comma-separated list of rules. An empty or all-blank string
// yields an empty list, which matches no binding (ACL sync then mirrors
// nothing). The first invalid rule is reported as a *ParseError.
func Parse(s string) (Rules, error) {
	if strings.TrimSpace(s) == "" {
		return Rules{}, nil
	}
	parts := strings.Split(s, ",")
	rules := make(Rules, 0, len(parts))
	for i, p := range parts {
		r, err := parseRule(i+1, p)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ParseRule parses a single rule; commas are not separators here, so a
// regular expression may contain one (for example "TOPIC;a{1,3}").
func ParseRule(s string) (Rule, error) {
	return parseRule(1, s)
}

func parseRule(pos int, s string) (Rule, error) {
	text := strings.TrimSpace(s)
	fail := func(field, format string, args ...any) (Rule, error) {
		return Rule{}, &ParseError{Rule: pos, Text: text, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if text == "" {
		return fail("", "empty rule (remove the extra comma, or write * for every ACL)")
	}
	fields := strings.Split(text, ";")
	if len(fields) > len(fieldNames) {
		return fail("", "%d fields, at most %d are allowed (resourceType;resourceName;operation;permissionType;principal)", len(fields), len(fieldNames))
	}
	var v [5]string
	for i := range v {
		v[i] = Wildcard
		if i < len(fields) {
			v[i] = strings.TrimSpace(fields[i])
			if v[i] == "" {
				return fail(fieldNames[i], "empty field (write * for any value, or omit trailing fields)")
			}
		}
	}
	r := Rule{}
	var err error
	if r.ResourceType, err = enumField(v[0], ResourceTypes); err != nil {
		return fail(FieldResourceType, "%v", err)
	}
	if r.ResourceName, r.name, err = regexField(v[1]); err != nil {
		return fail(FieldResourceName, "%v", err)
	}
	if r.Operation, err = enumField(v[2], Operations); err != nil {
		return fail(FieldOperation, "%v", err)
	}
	if r.Permission, err = enumField(v[3], PermissionTypes); err != nil {
		return fail(FieldPermissionType, "%v", err)
	}
	if r.Principal, r.principal, err = regexField(v[4]); err != nil {
		return fail(FieldPrincipal, "%v", err)
	}
	if r.Principal != Wildcard && !canMatchColon(r.Principal) {
		return fail(FieldPrincipal, "%q can never match: Kafka principals are Type:name (User:%s, Group:ops, or .* for any); write the type too", r.Principal, r.Principal)
	}
	return r, nil
}

func enumField(v string, valid []string) (string, error) {
	if v == Wildcard {
		return Wildcard, nil
	}
	up := strings.ToUpper(v)
	for _, s := range valid {
		if up == s {
			return s, nil
		}
	}
	return "", fmt.Errorf("unknown value %q; valid: %s or *", v, strings.Join(valid, ", "))
}

// regexField compiles a full-match regular expression. The expression is
// compiled alone first: only an expression that is valid by itself can be
// wrapped in \A(?:…)\z without its own parentheses changing the anchoring.
func regexField(v string) (string, *regexp.Regexp, error) {
	if v == Wildcard {
		return Wildcard, nil, nil
	}
	if _, err := regexp.Compile(v); err != nil {
		return "", nil, fmt.Errorf("invalid regex %q: %v", v, err)
	}
	re, err := regexp.Compile(`\A(?:` + v + `)\z`)
	if err != nil {
		return "", nil, fmt.Errorf("invalid regex %q: %v", v, err)
	}
	return v, re, nil
}

// Match reports whether b is inside the rule.
func (r Rule) Match(b Binding) bool {
	return enumMatch(r.ResourceType, b.ResourceType) &&
		regexMatch(r.ResourceName, r.name, b.ResourceName) &&
		enumMatch(r.Operation, b.Operation) &&
		enumMatch(r.Permission, b.Permission) &&
		regexMatch(r.Principal, r.principal, b.Principal)
}

// Match reports whether any rule matches b.
func (rs Rules) Match(b Binding) bool {
	for _, r := range rs {
		if r.Match(b) {
			return true
		}
	}
	return false
}

// enumMatch compares a rule's enum with a binding's exactly, as Kafka's ACL
// filters do: a rule operation READ does not match a binding whose operation
// is ALL, and a rule operation ALL matches only bindings with ALL.
func enumMatch(rule, value string) bool {
	return rule == Wildcard || norm(rule) == norm(value)
}

func regexMatch(src string, re *regexp.Regexp, value string) bool {
	if src == Wildcard {
		return true
	}
	return re != nil && re.MatchString(value)
}

func norm(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', ' ':
			return -1
		}
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// String returns the rule in its shortest canonical form: enum names in
// upper case and trailing wildcard fields omitted ("*" for a rule that
// matches everything). ParseRule(r.String()) yields an equal rule.
func (r Rule) String() string {
	v := []string{r.ResourceType, r.ResourceName, r.Operation, r.Permission, r.Principal}
	n := len(v)
	for n > 1 && v[n-1] == Wildcard {
		n--
	}
	return strings.Join(v[:n], ";")
}

// Equal reports whether two rules have the same fields.
func (r Rule) Equal(o Rule) bool {
	return r.ResourceType == o.ResourceType && r.ResourceName == o.ResourceName &&
		r.Operation == o.Operation && r.Permission == o.Permission && r.Principal == o.Principal
}

// String joins the rules' canonical forms with commas.
func (rs Rules) String() string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// Equal reports whether two lists hold equal rules in the same order.
func (rs Rules) Equal(o Rules) bool {
	if len(rs) != len(o) {
		return false
	}
	for i := range rs {
		if !rs[i].Equal(o[i]) {
			return false
		}
	}
	return true
}

// canMatchColon reports whether the pattern could match a string holding
// a ':'. Every Kafka principal is Type:name, so a principal pattern that
// cannot (alice, bob|carol) can never match: a mistake, not a rule.
func canMatchColon(pattern string) bool {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return true // regexField reported it
	}
	var walk func(*syntax.Regexp) bool
	walk = func(re *syntax.Regexp) bool {
		switch re.Op {
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			return true
		case syntax.OpLiteral:
			for _, r := range re.Rune {
				if r == ':' {
					return true
				}
			}
		case syntax.OpCharClass:
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if re.Rune[i] <= ':' && ':' <= re.Rune[i+1] {
					return true
				}
			}
		}
		for _, sub := range re.Sub {
			if walk(sub) {
				return true
			}
		}
		return false
	}
	return walk(re)
}
