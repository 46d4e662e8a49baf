package groupfilter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/kmirror/kmirror/sdk/filter"
)

// Filter decides about groups, and about topics when TopicPrefixes is set.
// It embeds filter.Pass for the kinds it does not decide about (ACLs).
type Filter struct {
	filter.Pass
	name string
	cfg  Config
	log  hclog.Logger
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
