// Package scope owns kmirror's built-in filter, a mirror's scope: the include and exclude
// rules of a mirror's configuration, as a filter.Filter of the SDK
// (github.com/kmirror/kmirror/sdk/filter) that decides over batches.
//
//   - Topics: a topic passes when it matches some mirror.topics.include
//     pattern and no mirror.topics.exclude pattern (exclude always wins), and
//     is not internal (flagged internal by the source, or named "__…"):
//     internal topics never mirror, whatever the lists say.
//   - Groups: a group passes when its id matches some mirror.groups.include
//     pattern and no mirror.groups.exclude pattern, whatever its kind
//     (classic, consumer, share, streams) and state.
//   - ACL bindings: a binding passes when some mirror.acl.include rule
//     (core/aclrule) matches it. An empty rule list lets none pass.
//
// The topic and group rules are sdk/filter/kiprules, the one implementation
// of KIP-1279's rules, which the regex filter plugin uses too; patterns match
// whole names (config.RegexList compiles them into kiprules lists). The
// engine builds one
// Builtin per mirror from its configuration and calls it once per sync cycle
// and kind, with every candidate of the source; filter plugins chain after
// it with filter.Chain. Its per-item predicates (Topic, Group, ACL) serve the
// engine's checks of a single name.
package scope

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/kiprules"
)

// Name is the name of the built-in filter in Info, logs and errors.
const Name = "builtin"

// Builtin is the built-in filter of one mirror. It is immutable and safe for
// concurrent use.
type Builtin struct {
	rules kiprules.Rules
	acls  aclrule.Rules
}

var _ filter.Filter = (*Builtin)(nil)

// New returns the built-in filter of mirror m's include and exclude keys
// (mirror.topics.include, mirror.topics.exclude, mirror.groups.include,
// mirror.groups.exclude, mirror.acl.include), already validated and compiled
// by core/config. Later changes to m do not affect the filter.
func New(m *config.Mirror) *Builtin {
	return &Builtin{
		rules: kiprules.Rules{
			TopicsInclude: m.TopicsInclude.List(), TopicsExclude: m.TopicsExclude.List(),
			GroupsInclude: m.GroupsInclude.List(), GroupsExclude: m.GroupsExclude.List(),
		},
		acls: m.ACLInclude,
	}
}

// Info implements filter.Filter: the filter decides about every kind.
func (*Builtin) Info() filter.Info {
	return filter.Info{
		Name: Name, ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor,
		Kinds: filter.AllKinds(),
	}
}

// Topic reports whether t is in the mirror's topic scope.
func (b *Builtin) Topic(t filter.Topic) bool { return b.rules.Topic(t) }

// Group reports whether the group with id is synced.
func (b *Builtin) Group(id string) bool { return b.rules.Group(id) }

// ACL reports whether some mirror.acl.include rule matches a.
func (b *Builtin) ACL(a filter.ACLBinding) bool {
	return b.acls.Match(aclrule.Binding(a))
}

// HasACLRules reports whether mirror.acl.include holds any rule; without
// one no binding passes, and the ACL sync need not read any cluster.
func (b *Builtin) HasACLRules() bool { return len(b.acls) > 0 }

// FilterTopics implements filter.Filter with Topic.
func (b *Builtin) FilterTopics(ctx context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
	return keep(ctx, filter.Topics, in, b.Topic)
}

// FilterGroups implements filter.Filter with Group.
func (b *Builtin) FilterGroups(ctx context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
	return keep(ctx, filter.Groups, in, func(g filter.Group) bool { return b.Group(g.ID) })
}

// FilterACLs implements filter.Filter with ACL.
func (b *Builtin) FilterACLs(ctx context.Context, _ string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
	return keep(ctx, filter.ACLs, in, b.ACL)
}

// keep is kiprules.Keep with an error naming the filter and the kind.
func keep[T filter.Item](ctx context.Context, kind filter.Kind, in []T, pass func(T) bool) ([]T, error) {
	out, err := kiprules.Keep(ctx, in, pass)
	if err != nil {
		return nil, fmt.Errorf("filter %q: %s: %w", Name, kind, err)
	}
	return out, nil
}
