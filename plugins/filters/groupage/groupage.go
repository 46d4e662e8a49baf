// Package groupage is kmirror's built-in "idle-groups" filter: consumer and
// share groups that have not committed for longer than a given age are not
// synced.
//
// Kafka does not tell when a group last committed (OffsetFetch returns
// offsets, not times), so the age is what kmirror observed: each group's
// filter.Group.LastCommit, the last time the engine's group sync saw the
// group's committed offsets (a share group's start offsets) change on the
// source. A group kmirror sees for the first time has LastCommit = the time
// it was first seen, so it is synced until it has stayed unchanged for
// max_idle. The engine keeps LastCommit in its state store, so a restart does
// not make idle groups fresh again.
//
// The rules:
//
//   - A group whose LastCommit is set and older than now - max_idle is not
//     synced. One whose LastCommit is exactly now - max_idle is still synced.
//   - A group whose LastCommit is zero (unknown: its offsets could not be
//     read yet, or the host speaks filter protocol 1.0 and sends none) is
//     always synced: an unknown age never drops a group.
//   - A group matching a groups.include_always pattern (whole-id RE2
//     patterns, as for mirror.groups.include) is always synced.
//   - A group dropped for its age is still watched by the engine: once it
//     commits again its LastCommit is fresh and it is synced again.
//
// Its offsets on the destination are left as they were: dropping a group
// from the sync never deletes anything. The filter decides about groups
// only; topics and ACL bindings pass through.
//
// As a plugin (`kmirror plugin serve filter idle-groups`, or a binary of its
// own calling plugin.Serve) it is configured with the keys of Schema, decoded
// by NewFromConfig.
package groupage

import (
	"context"
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/kiprules"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// Name is the filter's name (Info.Name) and its built-in name.
const Name = "idle-groups"

// Config configures the filter.
type Config struct {
	// MaxIdle: a group whose offsets have not changed for longer than this
	// is not synced. Required, > 0.
	MaxIdle time.Duration
	// IncludeAlways: whole-id RE2 patterns of groups synced whatever their
	// age. Default: none.
	IncludeAlways []string
	// Now is the clock. Nil uses time.Now.
	Now func() time.Time
}

// Filter is the idle-groups filter. It is immutable and safe for concurrent
// use.
type Filter struct {
	filter.Pass // topics, ACLs
	maxIdle     time.Duration
	always      kiprules.List
	now         func() time.Time
}

var _ filter.Filter = (*Filter)(nil)

// New builds a Filter. An invalid Config is refused with an error wrapping
// filter.ErrInvalidConfig that names each problem.
func New(cfg Config) (*Filter, error) {
	var probs []string
	if cfg.MaxIdle <= 0 {
		probs = append(probs, fmt.Sprintf("max_idle must be above zero (is %s)", cfg.MaxIdle))
	}
	always, err := kiprules.Compile(cfg.IncludeAlways)
	for _, pe := range kiprules.PatternErrors(err) {
		probs = append(probs, fmt.Sprintf("%s[%d]: %v", KeyIncludeAlways, pe.Index, pe))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s filter: %w: %s", Name, filter.ErrInvalidConfig, strings.Join(probs, "; "))
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Filter{maxIdle: cfg.MaxIdle, always: always, now: now}, nil
}

// Info implements filter.Filter: the filter decides about groups, and needs
// Group.LastCommit (filter protocol 1.1).
func (f *Filter) Info() filter.Info {
	return filter.Info{Name: Name, ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor,
		Kinds: []filter.Kind{filter.Groups}}
}

// GroupPasses reports whether g is synced at now: its LastCommit unknown or
// no older than now - max_idle, or its id matches groups.include_always.
func (f *Filter) GroupPasses(g filter.Group, now time.Time) bool {
	if g.LastCommit.IsZero() || !g.LastCommit.Before(now.Add(-f.maxIdle)) {
		return true
	}
	return f.always.Match(g.ID)
}

// FilterGroups implements filter.Filter. It reads the clock once per call
// and keeps the input order.
func (f *Filter) FilterGroups(ctx context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
	now := f.now()
	out, err := kiprules.Keep(ctx, in, func(g filter.Group) bool { return f.GroupPasses(g, now) })
	if err != nil {
		return nil, fmt.Errorf("%s filter: %w", Name, err)
	}
	return out, nil
}

// The configuration keys of the filter as a plugin (Schema).
const (
	KeyMaxIdle       = "max_idle"
	KeyIncludeAlways = "groups.include_always"
)

// Schema declares the filter's configuration as a plugin.
var Schema = plugin.Schema{
	{Name: KeyMaxIdle, Type: plugin.FieldDuration, Required: true, Description: `groups whose committed offsets have not changed for longer than this (as kmirror observed them) are not synced; above zero, e.g. "168h"`},
	{Name: KeyIncludeAlways, Type: plugin.FieldStringList, Default: "[]", Description: "groups synced whatever their age: whole-id RE2 patterns, as mirror.groups.include"},
}

// NewFromConfig builds the filter from a plugin configuration block (the
// keys of Schema); it is the constructor of plugin.ServeConfig.NewFilter.
// An invalid block is refused with a *plugin.ConfigError naming each key.
func NewFromConfig(_ context.Context, _ string, cfg plugin.Config) (filter.Filter, error) {
	c, err := ConfigFromPlugin(cfg)
	if err != nil {
		return nil, err
	}
	return New(c)
}

// ConfigFromPlugin decodes and checks a plugin configuration block into a
// Config (with the real clock). Errors are *plugin.ConfigError values naming
// each key.
func ConfigFromPlugin(cfg plugin.Config) (Config, error) {
	if err := Schema.Validate(cfg); err != nil {
		return Config{}, err
	}
	var raw struct {
		MaxIdle       string   `json:"max_idle"`
		IncludeAlways []string `json:"groups.include_always"`
	}
	if err := cfg.Decode(&raw); err != nil {
		return Config{}, err
	}
	ce := &plugin.ConfigError{}
	// Schema.Validate checked the key is present and a duration.
	d, _ := time.ParseDuration(raw.MaxIdle)
	if d <= 0 {
		ce.Problems = append(ce.Problems, plugin.Problem{Key: KeyMaxIdle, Reason: "must be above zero"})
	}
	_, err := kiprules.Compile(raw.IncludeAlways)
	for _, pe := range kiprules.PatternErrors(err) {
		ce.Problems = append(ce.Problems, plugin.Problem{Key: KeyIncludeAlways, Reason: fmt.Sprintf("item %d: %s", pe.Index, patternProblem(pe))})
	}
	if len(ce.Problems) > 0 {
		return Config{}, ce
	}
	return Config{MaxIdle: d, IncludeAlways: raw.IncludeAlways}, nil
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
