// Package filter defines the contract of kmirror's filters: the plugins
// that decide which topics a mirror mirrors, which consumer and share groups
// have their offsets synced and which ACL bindings are copied.
//
// A [Filter] decides over batches: each sync cycle of a mirror calls it once
// per kind with every candidate of that kind (the source cluster's topics,
// its groups, its ACL bindings), and it returns the ones that pass. One call
// per cycle rather than one per item keeps a filter behind an RPC boundary
// cheap, and lets a filter decide with the whole picture (for example "at
// most 500 topics").
//
// A filter selects; it never invents or changes items. Its output is a
// subset of its input: every returned item equal to an input item, none
// twice, in any order. [Chain] checks this and fails with
// [ErrInvalidOutput] otherwise. A filter must not modify its input (slices
// or the maps inside items).
//
// Filters combine with [Chain]: each filter sees the previous one's output.
// A filter that only decides about some kinds says so in [Info.Kinds] and
// embeds [Pass] for the others; Chain (and the RPC host) does not call a
// filter for kinds it does not handle. [Funcs] turns plain functions into a
// Filter.
//
// # Behind an RPC boundary
//
// A filter plugin (package plugin of the SDK, protocol
// kmirror.plugin.filter.v1) sees the same calls as an in-process filter:
// the host sends a large batch over several gRPC messages, but the plugin
// side puts them back together and calls the filter once with the whole
// batch. What travels back is one flag per input item, so the host receives
// a subset of what it sent by construction; the host still checks it with
// VerifyOutput. The host does not call a plugin for kinds its Info does not
// list; a plugin asked anyway fails with [ErrUnsupportedKind].
//
// # What an error means
//
// An error means "no decision": the host skips that kind for the cycle of
// that mirror and leaves everything as it was; it never reads a failed call
// as "nothing passes", which would stop mirroring. A canceled or expired
// context makes a call fail with an error wrapping ctx.Err().
//
// Implementations: plugins/filters/regex (KIP-1279's include/exclude
// lists), plugins/filters/groupage (groups idle for longer than an age). Package filtertest holds the conformance suite and test helpers.
//
// # Protocol versions
//
// As for every kmirror plugin kind: [ProtocolMajor] travels in the plugin
// handshake and must match; [ProtocolMinor] and the kinds a filter handles
// travel in [Info], read once at launch.
package filter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Protocol version of the filter plugin contract.
const (
	ProtocolMajor = 1
	// ProtocolMinor 1 added Group.LastCommit.
	ProtocolMinor = 1
)

// Sentinel errors; callers branch with errors.Is.
var (
	// ErrInvalidOutput: a filter returned an item that was not in its
	// input, a changed item, or an item twice. A bug in the filter.
	ErrInvalidOutput = errors.New("filter: output is not a subset of the input")
	// ErrUnavailable: the filter cannot decide right now (a service it
	// consults is down); the host retries in the next cycle.
	ErrUnavailable = errors.New("filter: temporarily unable to decide")
	// ErrInvalidConfig: a filter's configuration is invalid; returned by
	// constructors and configuration checks.
	ErrInvalidConfig = errors.New("filter: invalid configuration")
	// ErrIncompatible: a filter speaks another major protocol version or
	// announces an invalid Info; the host does not use it.
	ErrIncompatible = errors.New("filter: incompatible filter")
	// ErrUnsupportedKind: a filter was asked about a kind its Info does not
	// list. A host never does this; a plugin answers it if asked anyway.
	ErrUnsupportedKind = errors.New("filter: kind not handled by this filter")
)

// Kind is a kind of item a filter decides about.
type Kind string

// The kinds of items.
const (
	Topics Kind = "topics"
	Groups Kind = "groups"
	ACLs   Kind = "acls"
)

// AllKinds returns every kind, in a fixed order.
func AllKinds() []Kind { return []Kind{Topics, Groups, ACLs} }

// Topic is a topic of the source cluster.
type Topic struct {
	Name       string
	Partitions int32
	// Internal is the source cluster's internal flag
	// (__consumer_offsets, __transaction_state, ...).
	Internal bool
	// Configs are the topic's configuration entries that are set on the
	// topic (not broker defaults).
	Configs map[string]string
}

// IsInternal reports whether the topic is internal to Kafka: flagged
// internal by the source, or named with the "__" prefix Kafka reserves for
// internal topics. KIP-1279: internal topics are never mirrored.
func (t Topic) IsInternal() bool { return t.Internal || strings.HasPrefix(t.Name, "__") }

// Group kinds, as Kafka's ListGroups reports them (KIP-848, KIP-932,
// KIP-1071).
const (
	GroupClassic  = "classic"
	GroupConsumer = "consumer"
	GroupShare    = "share"
	GroupStreams  = "streams"
)

// Group is a consumer or share group of the source cluster.
type Group struct {
	ID string
	// Kind is GroupClassic, GroupConsumer, GroupShare or GroupStreams.
	Kind string
	// State is the group's state on the source as Kafka names it
	// ("Empty", "Stable", "Dead", ...).
	State string
	// LastCommit is the last time the host saw the group's committed
	// offsets (a share group's share-partition start offsets) change on the
	// source; zero when unknown. Kafka does not record when a group
	// committed, so this is what the host observed over its sync cycles
	// (kept in its state store across restarts): a group it sees for the
	// first time gets the time it was first seen, and so counts as active
	// until it has stayed unchanged for a while. Since protocol 1.1: a 1.0
	// host never sets it, so a filter must read zero as "unknown", never
	// as "idle for ever".
	LastCommit time.Time
}

// ACLBinding is an ACL of the source cluster, with Kafka's enum names in
// upper case: ResourceType "TOPIC", PatternType "LITERAL" or "PREFIXED",
// Operation "READ", Permission "ALLOW" or "DENY".
type ACLBinding struct {
	ResourceType string
	ResourceName string
	PatternType  string
	Principal    string
	Host         string
	Operation    string
	Permission   string
}

// String describes the binding for messages:
// "TOPIC:LITERAL:orders User:alice@* READ ALLOW".
func (b ACLBinding) String() string {
	return fmt.Sprintf("%s:%s:%s %s@%s %s %s", b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// Info describes a filter. The host reads it once, at launch.
type Info struct {
	// Name identifies the filter in logs, metrics and errors
	// (plugin.filter.<name>): lower-case letters, digits, '-' and '_'.
	Name string
	// Version is the filter's own version, free-form, for logs.
	Version string
	// ProtocolMajor and ProtocolMinor are the protocol version the filter
	// implements: set them to this package's constants.
	ProtocolMajor int
	ProtocolMinor int
	// Kinds the filter decides about. For any other kind it passes every
	// item through, and is not called.
	Kinds []Kind
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Handles reports whether the filter decides about kind.
func (i Info) Handles(kind Kind) bool { return slices.Contains(i.Kinds, kind) }

// Validate checks what a host relies on: a valid name, ProtocolMajor equal
// to this package's, and a non-empty list of distinct known kinds. The
// error wraps ErrIncompatible.
func (i Info) Validate() error {
	switch {
	case !nameRE.MatchString(i.Name):
		return fmt.Errorf("%w: name %q: use lower-case letters, digits, '-' and '_', starting with a letter or digit", ErrIncompatible, i.Name)
	case i.ProtocolMajor != ProtocolMajor:
		return fmt.Errorf("%w: filter %q speaks filter protocol %d.%d, this host speaks %d.x", ErrIncompatible, i.Name, i.ProtocolMajor, i.ProtocolMinor, ProtocolMajor)
	case i.ProtocolMinor < 0:
		return fmt.Errorf("%w: filter %q: negative protocol minor version %d", ErrIncompatible, i.Name, i.ProtocolMinor)
	case len(i.Kinds) == 0:
		return fmt.Errorf("%w: filter %q handles no kind", ErrIncompatible, i.Name)
	}
	for n, k := range i.Kinds {
		if !slices.Contains(AllKinds(), k) {
			return fmt.Errorf("%w: filter %q announces unknown kind %q", ErrIncompatible, i.Name, k)
		}
		if slices.Contains(i.Kinds[:n], k) {
			return fmt.Errorf("%w: filter %q announces kind %q twice", ErrIncompatible, i.Name, k)
		}
	}
	return nil
}

// Filter decides which items of a batch pass. All methods are safe for
// concurrent use. mirror is the name of the mirror whose sync cycle asks.
// Each method returns the items of in that pass (see the package
// documentation for the rules an output follows, and for errors).
type Filter interface {
	// Info describes the filter; it does not change over its life.
	Info() Info
	FilterTopics(ctx context.Context, mirror string, in []Topic) ([]Topic, error)
	FilterGroups(ctx context.Context, mirror string, in []Group) ([]Group, error)
	FilterACLs(ctx context.Context, mirror string, in []ACLBinding) ([]ACLBinding, error)
}

// Pass passes every item through. Embed it in a filter that decides only
// about some kinds, for the methods of the others:
//
//	type onlyTopics struct{ filter.Pass }
//	func (onlyTopics) Info() filter.Info { ... Kinds: []filter.Kind{filter.Topics} }
//	func (onlyTopics) FilterTopics(...) { ... }
//
// Its methods return in itself, or ctx.Err() when the context has ended.
type Pass struct{}

// FilterTopics returns in.
func (Pass) FilterTopics(ctx context.Context, _ string, in []Topic) ([]Topic, error) {
	return passThrough(ctx, in)
}

// FilterGroups returns in.
func (Pass) FilterGroups(ctx context.Context, _ string, in []Group) ([]Group, error) {
	return passThrough(ctx, in)
}

// FilterACLs returns in.
func (Pass) FilterACLs(ctx context.Context, _ string, in []ACLBinding) ([]ACLBinding, error) {
	return passThrough(ctx, in)
}

func passThrough[T any](ctx context.Context, in []T) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return in, nil
}

// Funcs is a Filter made of functions, for filters written in a few lines.
// A nil function passes its kind through; Info lists the kinds whose
// function is set.
//
//	f := filter.Funcs{Name: "no-tmp", Topics: func(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
//		var out []filter.Topic
//		for _, t := range in {
//			if !strings.HasSuffix(t.Name, ".tmp") {
//				out = append(out, t)
//			}
//		}
//		return out, nil
//	}}
type Funcs struct {
	Name   string
	Topics func(ctx context.Context, mirror string, in []Topic) ([]Topic, error)
	Groups func(ctx context.Context, mirror string, in []Group) ([]Group, error)
	ACLs   func(ctx context.Context, mirror string, in []ACLBinding) ([]ACLBinding, error)
}

// Info implements Filter.
func (f Funcs) Info() Info {
	i := Info{Name: f.Name, ProtocolMajor: ProtocolMajor, ProtocolMinor: ProtocolMinor}
	if f.Topics != nil {
		i.Kinds = append(i.Kinds, Topics)
	}
	if f.Groups != nil {
		i.Kinds = append(i.Kinds, Groups)
	}
	if f.ACLs != nil {
		i.Kinds = append(i.Kinds, ACLs)
	}
	return i
}

// FilterTopics implements Filter.
func (f Funcs) FilterTopics(ctx context.Context, mirror string, in []Topic) ([]Topic, error) {
	return callFunc(ctx, f.Topics, mirror, in)
}

// FilterGroups implements Filter.
func (f Funcs) FilterGroups(ctx context.Context, mirror string, in []Group) ([]Group, error) {
	return callFunc(ctx, f.Groups, mirror, in)
}

// FilterACLs implements Filter.
func (f Funcs) FilterACLs(ctx context.Context, mirror string, in []ACLBinding) ([]ACLBinding, error) {
	return callFunc(ctx, f.ACLs, mirror, in)
}

func callFunc[T any](ctx context.Context, fn func(context.Context, string, []T) ([]T, error), mirror string, in []T) ([]T, error) {
	if fn == nil {
		return passThrough(ctx, in)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return fn(ctx, mirror, in)
}

// Item is the type of every kind of item.
type Item interface {
	Topic | Group | ACLBinding
}

// VerifyOutput checks that out is a subset of in: every item of out equal
// to an item of in (Topic configs compared entry by entry), no input item
// returned twice. The error wraps ErrInvalidOutput and names the first
// offending item. Chain calls it after every filter; an RPC host calls it
// on what a plugin returned.
func VerifyOutput[T Item](in, out []T) error {
	return match(in, out, nil)
}

// Kept returns, for each item of in, whether out holds it: out as one flag
// per input item, the form in which the RPC protocol carries a filter's
// output. It fails like VerifyOutput when out is not a subset of in. When
// in holds equal items several times, the first ones are marked.
func Kept[T Item](in, out []T) ([]bool, error) {
	kept := make([]bool, len(in))
	if err := match(in, out, kept); err != nil {
		return nil, err
	}
	return kept, nil
}

// match checks that out is a subset of in (see VerifyOutput) and, when kept
// is not nil (len(in) flags), sets the flag of every input item out holds.
func match[T Item](in, out []T, kept []bool) error {
	if len(out) > len(in) {
		return fmt.Errorf("%w: %d items out of %d in", ErrInvalidOutput, len(out), len(in))
	}
	// Items are looked up by key. Keys are distinct in almost every batch,
	// so the first index of each key is kept apart from the rare repeats:
	// no slice per key.
	first := make(map[string]int, len(in))
	var repeats map[string][]int
	for i, x := range in {
		k := itemKey(x)
		if _, ok := first[k]; !ok {
			first[k] = i
			continue
		}
		if repeats == nil {
			repeats = map[string][]int{}
		}
		repeats[k] = append(repeats[k], i)
	}
	used := kept
	if used == nil {
		used = make([]bool, len(in))
	}
	for _, x := range out {
		k := itemKey(x)
		i, ok := first[k]
		if !ok {
			return fmt.Errorf("%w: %s was not in the input, or is returned twice", ErrInvalidOutput, describe(x))
		}
		rest := repeats[k]
		found, changed := -1, false
		for n := -1; n < len(rest); n++ {
			c := i
			if n >= 0 {
				c = rest[n]
			}
			if used[c] {
				continue
			}
			if itemEqual(in[c], x) {
				found = c
				break
			}
			changed = true // an unused item of that key differs
		}
		switch {
		case found >= 0:
			used[found] = true
		case changed:
			return fmt.Errorf("%w: %s was changed", ErrInvalidOutput, describe(x))
		default:
			return fmt.Errorf("%w: %s was not in the input, or is returned twice", ErrInvalidOutput, describe(x))
		}
	}
	return nil
}

func itemKey(x any) string {
	switch v := x.(type) {
	case Topic:
		return v.Name
	case Group:
		return v.ID
	case ACLBinding:
		return strings.Join([]string{v.ResourceType, v.ResourceName, v.PatternType, v.Principal, v.Host, v.Operation, v.Permission}, "\x00")
	}
	panic(fmt.Sprintf("filter: unknown item type %T", x))
}

func itemEqual[T Item](a, b T) bool {
	if ta, ok := any(a).(Topic); ok {
		tb := any(b).(Topic)
		return ta.Name == tb.Name && ta.Partitions == tb.Partitions && ta.Internal == tb.Internal && maps.Equal(ta.Configs, tb.Configs)
	}
	if ga, ok := any(a).(Group); ok {
		// The same instant in another location or without a monotonic
		// reading (after an RPC) is the same LastCommit.
		gb := any(b).(Group)
		return ga.ID == gb.ID && ga.Kind == gb.Kind && ga.State == gb.State && ga.LastCommit.Equal(gb.LastCommit)
	}
	return any(a) == any(b)
}

func describe(x any) string {
	switch v := x.(type) {
	case Topic:
		return fmt.Sprintf("topic %q", v.Name)
	case Group:
		return fmt.Sprintf("group %q", v.ID)
	case ACLBinding:
		return fmt.Sprintf("ACL binding %s", v)
	}
	return fmt.Sprint(x)
}
