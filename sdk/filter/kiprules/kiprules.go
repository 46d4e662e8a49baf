// Package kiprules holds KIP-1279's include/exclude rules for topics and
// groups, once: the engine's built-in scope (core/scope, fed by
// core/config) and the regex filter plugin (plugins/filters/regex) both
// decide with them.
//
// The rules:
//
//   - A pattern matches the whole name: "orders.*" matches "orders-eu" but
//     not "my-orders". A list p1, p2, … is compiled as ^(?:(?:p1)|(?:p2)|…)$,
//     so an alternation "a|b" matches "a" and "b" and nothing longer, and a
//     flag such as (?i) applies to its own pattern only.
//   - A name passes when it matches some include pattern and no exclude
//     pattern: exclude always wins over include.
//   - An empty include list includes nothing.
//   - Internal topics (flagged internal by the source, or named "__…") never
//     pass, whatever the lists say.
//
// Patterns are Go RE2 syntax (https://pkg.go.dev/regexp/syntax): Java's
// syntax without look-around and back-references. Patterns using those, and
// empty patterns, are refused when a list is compiled, rather than silently
// never matching.
package kiprules

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/kmirror/kmirror/sdk/filter"
)

// ErrEmptyPattern is the cause of a PatternError for an empty pattern.
var ErrEmptyPattern = errors.New("empty pattern (remove it, or use .* to match everything)")

// PatternError is one invalid pattern of a list.
type PatternError struct {
	Index   int    // position in the list, from 0
	Pattern string // as written
	// Err is ErrEmptyPattern or the error of regexp.Compile for the
	// pattern alone.
	Err error
}

func (e *PatternError) Error() string {
	if errors.Is(e.Err, ErrEmptyPattern) {
		return e.Err.Error()
	}
	return fmt.Sprintf("invalid pattern %q: %v", e.Pattern, e.Err)
}

// Unwrap returns Err.
func (e *PatternError) Unwrap() error { return e.Err }

// List is a compiled pattern list. The zero List is empty and matches
// nothing. It is immutable and safe for concurrent use.
type List struct {
	patterns []string
	re       *regexp.Regexp // nil for an empty list
}

// Compile compiles patterns into a List. Every invalid pattern is reported,
// in order, as a *PatternError; several are joined with errors.Join.
func Compile(patterns []string) (List, error) {
	if len(patterns) == 0 {
		return List{}, nil
	}
	var errs []error
	parts := make([]string, len(patterns))
	for i, p := range patterns {
		if p == "" {
			errs = append(errs, &PatternError{Index: i, Pattern: p, Err: ErrEmptyPattern})
			continue
		}
		// Compiling p alone gives an error about p rather than about its
		// wrapped form, and proves p balanced, so that the wrapping
		// cannot change its meaning ("a)|(b" would escape the anchors).
		if _, err := regexp.Compile(p); err != nil {
			errs = append(errs, &PatternError{Index: i, Pattern: p, Err: err})
			continue
		}
		parts[i] = "(?:" + p + ")"
	}
	if len(errs) > 0 {
		return List{}, errors.Join(errs...)
	}
	return List{patterns: append([]string(nil), patterns...), re: regexp.MustCompile(`^(?:` + strings.Join(parts, "|") + `)$`)}, nil
}

// PatternErrors returns the *PatternError values of an error of Compile, in
// order.
func PatternErrors(err error) []*PatternError {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*PatternError
		for _, e := range j.Unwrap() {
			out = append(out, PatternErrors(e)...)
		}
		return out
	}
	var pe *PatternError
	if errors.As(err, &pe) {
		return []*PatternError{pe}
	}
	return nil
}

// Match reports whether some pattern matches all of name.
func (l List) Match(name string) bool { return l.re != nil && l.re.MatchString(name) }

// Patterns returns the patterns as written.
func (l List) Patterns() []string { return append([]string(nil), l.patterns...) }

// Len returns the number of patterns.
func (l List) Len() int { return len(l.patterns) }

// String joins the patterns with commas.
func (l List) String() string { return strings.Join(l.patterns, ",") }

// Rules are a mirror's four lists (mirror.topics.include,
// mirror.topics.exclude, mirror.groups.include, mirror.groups.exclude).
// The zero Rules let nothing pass.
type Rules struct {
	TopicsInclude, TopicsExclude List
	GroupsInclude, GroupsExclude List
}

// Topic reports whether t passes: not internal, included, not excluded.
func (r *Rules) Topic(t filter.Topic) bool {
	return !t.IsInternal() && r.TopicsInclude.Match(t.Name) && !r.TopicsExclude.Match(t.Name)
}

// Group reports whether the group with id passes: included, not excluded,
// whatever its kind and state.
func (r *Rules) Group(id string) bool {
	return r.GroupsInclude.Match(id) && !r.GroupsExclude.Match(id)
}

// Keep returns, in a new slice and in input order, the items of in that
// pass; in is never modified. A done ctx returns its error and no decision.
func Keep[T filter.Item](ctx context.Context, in []T, pass func(T) bool) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]T, 0, len(in))
	for _, x := range in {
		if pass(x) {
			out = append(out, x)
		}
	}
	return out, nil
}
