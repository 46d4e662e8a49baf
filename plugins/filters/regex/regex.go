// Package regex is kmirror's built-in topic and group filter: KIP-1279's
// include/exclude regex lists (mirror.topics.include, mirror.topics.exclude,
// mirror.groups.include, mirror.groups.exclude) as a filter.Filter.
//
// The rules are sdk/filter/kiprules, the one implementation that the
// engine's own scope (core/scope) uses too:
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
//
// As a plugin (`kmirror plugin serve filter regex`, or a binary of its own
// calling plugin.Serve) it is configured with the keys of Schema, decoded by
// NewFromConfig.
package regex

import (
	"context"
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/kiprules"
	"github.com/kmirror/kmirror/sdk/plugin"
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
	rules       kiprules.Rules
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
	for _, l := range c.lists(&f.rules) {
		list, err := kiprules.Compile(l.patterns)
		*l.dst = list
		for _, pe := range kiprules.PatternErrors(err) {
			probs = append(probs, fmt.Sprintf("%s[%d]: %v", l.key, pe.Index, pe))
		}
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("regex filter: %w: %s", filter.ErrInvalidConfig, strings.Join(probs, "; "))
	}
	return &f, nil
}

// list is one of the four pattern lists: its KIP key, its plugin key, its
// patterns, and where its compiled form goes.
type list struct {
	key, pluginKey string
	patterns       []string
	dst            *kiprules.List
}

func (c Config) lists(r *kiprules.Rules) []list {
	return []list{
		{"mirror.topics.include", KeyTopicsInclude, c.TopicsInclude, &r.TopicsInclude},
		{"mirror.topics.exclude", KeyTopicsExclude, c.TopicsExclude, &r.TopicsExclude},
		{"mirror.groups.include", KeyGroupsInclude, c.GroupsInclude, &r.GroupsInclude},
		{"mirror.groups.exclude", KeyGroupsExclude, c.GroupsExclude, &r.GroupsExclude},
	}
}

// Info implements filter.Filter: the filter decides about topics and groups.
func (f *Filter) Info() filter.Info {
	return filter.Info{Name: "regex", ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor,
		Kinds: []filter.Kind{filter.Topics, filter.Groups}}
}

// TopicPasses reports whether t passes: not internal, included, not
// excluded.
func (f *Filter) TopicPasses(t filter.Topic) bool { return f.rules.Topic(t) }

// GroupPasses reports whether the group id passes: included, not excluded.
func (f *Filter) GroupPasses(id string) bool { return f.rules.Group(id) }

// FilterTopics implements filter.Filter. It keeps the input order.
func (f *Filter) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	return keep(ctx, in, f.TopicPasses)
}

// FilterGroups implements filter.Filter. It keeps the input order.
func (f *Filter) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	return keep(ctx, in, func(g filter.Group) bool { return f.GroupPasses(g.ID) })
}

func keep[T filter.Item](ctx context.Context, in []T, pass func(T) bool) ([]T, error) {
	out, err := kiprules.Keep(ctx, in, pass)
	if err != nil {
		return nil, fmt.Errorf("regex filter: %w", err)
	}
	return out, nil
}

// The configuration keys of the regex filter as a plugin (Schema).
const (
	KeyTopicsInclude = "topics.include"
	KeyTopicsExclude = "topics.exclude"
	KeyGroupsInclude = "groups.include"
	KeyGroupsExclude = "groups.exclude"
)

// Schema declares the regex filter's configuration as a plugin: the four
// lists, each defaulting to DefaultConfig's value when absent (an empty
// list given explicitly is empty).
var Schema = plugin.Schema{
	{Name: KeyTopicsInclude, Type: plugin.FieldStringList, Default: "[]", Description: "topics to mirror (KIP-1279 mirror.topics.include); whole-name RE2 patterns; empty: none"},
	{Name: KeyTopicsExclude, Type: plugin.FieldStringList, Default: `["__.*"]`, Description: "topics never to mirror, even if included (mirror.topics.exclude); internal topics never pass anyway"},
	{Name: KeyGroupsInclude, Type: plugin.FieldStringList, Default: `[".*"]`, Description: "groups whose offsets are synced (mirror.groups.include)"},
	{Name: KeyGroupsExclude, Type: plugin.FieldStringList, Default: "[]", Description: "groups never synced, even if included (mirror.groups.exclude)"},
}

// NewFromConfig builds the filter from a plugin configuration block (the
// keys of Schema); it is the constructor of plugin.ServeConfig.NewFilter.
// An invalid block or pattern is refused with a *plugin.ConfigError naming
// the key and the position of each bad pattern.
func NewFromConfig(_ context.Context, _ string, cfg plugin.Config) (filter.Filter, error) {
	c, err := ConfigFromPlugin(cfg)
	if err != nil {
		return nil, err
	}
	return New(c)
}

// ConfigFromPlugin decodes and checks a plugin configuration block into a
// Config. Errors are *plugin.ConfigError values naming each key.
func ConfigFromPlugin(cfg plugin.Config) (Config, error) {
	if err := Schema.Validate(cfg); err != nil {
		return Config{}, err
	}
	var raw struct {
		TopicsInclude *[]string `json:"topics.include"`
		TopicsExclude *[]string `json:"topics.exclude"`
		GroupsInclude *[]string `json:"groups.include"`
		GroupsExclude *[]string `json:"groups.exclude"`
	}
	if err := cfg.Decode(&raw); err != nil {
		return Config{}, err
	}
	c := DefaultConfig()
	for _, f := range []struct {
		from *[]string
		to   *[]string
	}{{raw.TopicsInclude, &c.TopicsInclude}, {raw.TopicsExclude, &c.TopicsExclude}, {raw.GroupsInclude, &c.GroupsInclude}, {raw.GroupsExclude, &c.GroupsExclude}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	ce := &plugin.ConfigError{}
	var r kiprules.Rules
	for _, l := range c.lists(&r) {
		for _, pe := range kiprules.PatternErrors(compileErr(l.patterns)) {
			ce.Problems = append(ce.Problems, plugin.Problem{Key: l.pluginKey, Reason: fmt.Sprintf("item %d: %s", pe.Index, patternProblem(pe))})
		}
	}
	if len(ce.Problems) > 0 {
		return Config{}, ce
	}
	return c, nil
}

func compileErr(patterns []string) error {
	_, err := kiprules.Compile(patterns)
	return err
}

// patternProblem says what is wrong with a pattern without quoting it (a
// ConfigError holds no values).
func patternProblem(pe *kiprules.PatternError) string {
	var se *syntax.Error
	if errors.As(pe.Err, &se) {
		return "invalid pattern: " + se.Code.String()
	}
	return pe.Error()
}
