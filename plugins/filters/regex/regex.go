// Package regex is kmirror's built-in topic and group filter: KIP-1279's
// include/exclude regex lists (mirror.topics.include, mirror.topics.exclude,
// mirror.groups.include, mirror.groups.exclude) as a filter.Filter.
//
// Semantics, as KIP-1279 defines them:
//
//   - A pattern matches the whole name: "orders.*" matches "orders-eu" but
//     not "my-orders". Each pattern p is compiled as ^(?:p)$, so an
//     alternation "a|b" matches "a" and "b" and nothing longer, and flags
//     such as (?i) apply to their own pattern only.
//   - A name passes when it matches at least one include pattern and no
//     exclude pattern: exclude always wins over include.
//   - An empty include list includes nothing. For topics that is the KIP's
//     default ("only explicitly added topics are mirrored": auto-discovery
//     finds nothing); for groups the default include list is ".*".
//   - Internal topics (flagged internal by the source, or named "__...")
//     never pass, whatever the lists say.
//
// Patterns are Go RE2 syntax (https://pkg.go.dev/regexp/syntax), which is
// Java's syntax for everything except look-around and back-references;
// those are rejected at construction rather than silently never matching.
//
// The filter decides about topics and groups. ACL bindings pass through: the
// mirror.acl.include rules are applied by kmirror's ACL sync itself.
package regex

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/kmirror/kmirror/sdk/filter"
)

// Config holds the four pattern lists. Use DefaultConfig for KIP-1279's
// defaults; the zero Config lets nothing pass.
type Config struct {
	// TopicsInclude: topics to mirror (mirror.topics.include).
	// Default: empty, no topic is discovered automatically.
	TopicsInclude []string
	// TopicsExclude: topics never to mirror, even if included
	// (mirror.topics.exclude). Default: ["__.*"]. Internal topics are
	// excluded whatever this list holds.
	TopicsExclude []string
	// GroupsInclude: groups whose offsets are synced
	// (mirror.groups.include). Default: [".*"], every group.
	GroupsInclude []string
	// GroupsExclude: groups never synced, even if included
	// (mirror.groups.exclude). Default: empty.
	GroupsExclude []string
}

// DefaultConfig returns KIP-1279's defaults: no topic included, topics
// "__.*" excluded, every group included, no group excluded.
func DefaultConfig() Config {
	return Config{TopicsExclude: []string{"__.*"}, GroupsInclude: []string{".*"}}
}

// Validate compiles every pattern. The error wraps filter.ErrInvalidConfig
// and names the list, the position and the pattern of every invalid one.
func (c Config) Validate() error {
	_, err := compileAll(c)
	return err
}

// Filter is the regex filter. It is immutable and safe for concurrent use.
type Filter struct {
	filter.Pass // ACLs
	// Compiled lists; nil matches nothing.
	topicsIn, topicsEx, groupsIn, groupsEx *regexp.Regexp
}

var _ filter.Filter = (*Filter)(nil)

// New compiles cfg into a Filter. Invalid patterns are rejected with an
// error wrapping filter.ErrInvalidConfig that quotes each of them.
func New(cfg Config) (*Filter, error) {
	return compileAll(cfg)
}

func compileAll(c Config) (*Filter, error) {
	var f Filter
	var probs []string
	for _, l := range []struct {
		key      string
		patterns []string
		dst      **regexp.Regexp
	}{
		{"mirror.topics.include", c.TopicsInclude, &f.topicsIn},
		{"mirror.topics.exclude", c.TopicsExclude, &f.topicsEx},
		{"mirror.groups.include", c.GroupsInclude, &f.groupsIn},
		{"mirror.groups.exclude", c.GroupsExclude, &f.groupsEx},
	} {
		re, p := compileList(l.key, l.patterns)
		*l.dst = re
		probs = append(probs, p...)
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("regex filter: %w: %s", filter.ErrInvalidConfig, strings.Join(probs, "; "))
	}
	return &f, nil
}

// compileList compiles patterns into one whole-name regexp,
// ^(?:(?:p1)|(?:p2)|...)$, or nil for an empty list. It returns a problem
// for every invalid pattern.
func compileList(key string, patterns []string) (*regexp.Regexp, []string) {
	if len(patterns) == 0 {
		return nil, nil
	}
	var probs []string
	parts := make([]string, len(patterns))
	for i, p := range patterns {
		if p == "" {
			probs = append(probs, fmt.Sprintf("%s[%d]: empty pattern (remove it, or use .* to match everything)", key, i))
			continue
		}
		// Compiling p alone gives an error message about p rather than
		// about its wrapped form, and guarantees p is balanced, so that
		// the wrapping cannot change its meaning.
		if _, err := regexp.Compile(p); err != nil {
			probs = append(probs, fmt.Sprintf("%s[%d]: invalid pattern %q: %v", key, i, p, err))
			continue
		}
		parts[i] = "(?:" + p + ")"
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return regexp.MustCompile("^(?:" + strings.Join(parts, "|") + ")$"), nil
}

func matches(re *regexp.Regexp, s string) bool { return re != nil && re.MatchString(s) }

// Info implements filter.Filter: the filter decides about topics and groups.
func (f *Filter) Info() filter.Info {
	return filter.Info{Name: "regex", ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor,
		Kinds: []filter.Kind{filter.Topics, filter.Groups}}
}

// TopicPasses reports whether t passes: not internal, included, not
// excluded.
func (f *Filter) TopicPasses(t filter.Topic) bool {
	return !t.IsInternal() && matches(f.topicsIn, t.Name) && !matches(f.topicsEx, t.Name)
}

// GroupPasses reports whether the group id passes: included, not excluded.
func (f *Filter) GroupPasses(id string) bool {
	return matches(f.groupsIn, id) && !matches(f.groupsEx, id)
}

// FilterTopics implements filter.Filter. It keeps the input order.
func (f *Filter) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	return keep(ctx, in, f.TopicPasses)
}

// FilterGroups implements filter.Filter. It keeps the input order.
func (f *Filter) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	return keep(ctx, in, func(g filter.Group) bool { return f.GroupPasses(g.ID) })
}

func keep[T any](ctx context.Context, in []T, pass func(T) bool) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("regex filter: %w", err)
	}
	out := make([]T, 0, len(in))
	for _, x := range in {
		if pass(x) {
			out = append(out, x)
		}
	}
	return out, nil
}
