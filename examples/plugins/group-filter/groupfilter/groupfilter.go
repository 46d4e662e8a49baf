// Package groupfilter is a kmirror filter plugin: a mirror syncs the
// offsets of the consumer groups whose ID starts with one of the configured
// prefixes and, when topic prefixes are configured, mirrors only the topics
// whose name starts with one of those.
package groupfilter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// Version is the plugin's own version, reported in its Info.
const Version = "0.1.0"

// Config is the plugin's config block in kmirror's configuration.
type Config struct {
	// GroupPrefixes: a group is synced when its ID starts with one of them.
	GroupPrefixes []string `json:"group_prefixes"`
	// TopicPrefixes: when set, a topic is mirrored only when its name
	// starts with one of them. When empty, the filter leaves topics alone.
	TopicPrefixes []string `json:"topic_prefixes"`
}

// Schema declares Config's keys. kmirror checks the config block against
// it before the plugin sees it, and names the key in every error.
var Schema = plugin.Schema{
	{Name: "group_prefixes", Type: plugin.FieldStringList, Required: true,
		Description: "a consumer group is synced when its ID starts with one of these"},
	{Name: "topic_prefixes", Type: plugin.FieldStringList,
		Description: "when set, a topic is mirrored only when its name starts with one of these"},
}

// Filter decides about groups, and about topics when TopicPrefixes is set.
// It embeds filter.Pass for the kinds it does not decide about (ACLs).
type Filter struct {
	filter.Pass
	name string
	cfg  Config
	log  hclog.Logger
}

// New returns the filter called name in kmirror's configuration. It
// refuses an empty group_prefixes list and empty prefixes (which would
// match everything) with a *plugin.ConfigError naming the key.
func New(name string, cfg Config, log hclog.Logger) (*Filter, error) {
	var problems []plugin.Problem
	if len(cfg.GroupPrefixes) == 0 {
		problems = append(problems, plugin.Problem{Key: "group_prefixes", Reason: "list at least one prefix"})
	}
	problems = append(problems, emptyItems("group_prefixes", cfg.GroupPrefixes)...)
	problems = append(problems, emptyItems("topic_prefixes", cfg.TopicPrefixes)...)
	if len(problems) > 0 {
		return nil, &plugin.ConfigError{Problems: problems}
	}
	return &Filter{name: name, cfg: cfg, log: log}, nil
}

func emptyItems(key string, prefixes []string) []plugin.Problem {
	var problems []plugin.Problem
	for i, p := range prefixes {
		if p == "" {
			problems = append(problems, plugin.Problem{Key: key, Reason: fmt.Sprintf("item %d is empty, which would match everything", i)})
		}
	}
	return problems
}

// Info tells kmirror the filter's name and version, the protocol it
// speaks and the kinds it decides about. kmirror reads it once, after
// configuring the plugin, and calls the filter only for those kinds.
func (f *Filter) Info() filter.Info {
	kinds := []filter.Kind{filter.Groups}
	if len(f.cfg.TopicPrefixes) > 0 {
		kinds = append(kinds, filter.Topics)
	}
	return filter.Info{Name: f.name, Version: Version,
		ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor, Kinds: kinds}
}

// FilterGroups keeps the groups whose ID starts with a group prefix.
func (f *Filter) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	out, err := keep(ctx, in, f.cfg.GroupPrefixes, func(g filter.Group) string { return g.ID })
	if err == nil {
		f.log.Debug("groups filtered", "mirror", mirror, "in", len(in), "kept", len(out))
	}
	return out, err
}

// FilterTopics keeps the topics whose name starts with a topic prefix, or
// every topic when there are none.
func (f *Filter) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	if len(f.cfg.TopicPrefixes) == 0 {
		return f.Pass.FilterTopics(ctx, mirror, in)
	}
	out, err := keep(ctx, in, f.cfg.TopicPrefixes, func(t filter.Topic) string { return t.Name })
	if err == nil {
		f.log.Debug("topics filtered", "mirror", mirror, "in", len(in), "kept", len(out))
	}
	return out, err
}

// keep returns, in a new slice, the items whose name starts with one of
// prefixes. A filter returns a subset of its input and never modifies it.
func keep[T any](ctx context.Context, in []T, prefixes []string, name func(T) string) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("group-filter: %w", err)
	}
	var out []T
	for _, x := range in {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name(x), p) }) {
			out = append(out, x)
		}
	}
	return out, nil
}
