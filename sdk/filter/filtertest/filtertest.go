// Package filtertest is the conformance suite of filter.Filter, and helpers
// for tests of filters and of code that uses them.
//
// Every filter runs the suite from its own tests:
//
//	func TestConformance(t *testing.T) {
//		f, err := myfilter.New(myfilter.Config{...})
//		if err != nil {
//			t.Fatal(err)
//		}
//		filtertest.Run(t, f)
//	}
//
// The suite feeds the filter sample batches (Sample*) and checks what every
// filter must do whatever its configuration: a valid Info, outputs that are
// subsets of the inputs, inputs left unmodified, kinds the filter does not
// handle passed through, empty batches, concurrent calls and canceled
// contexts. What a filter decides is for its own tests, which the helpers
// here (Topics, Groups, TopicNames, ...) keep short.
package filtertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/filter"
)

// Mirror is the mirror name the suite passes to filters.
const Mirror = "dc1-to-dc2"

// Run runs the conformance suite against f.
func Run(t *testing.T, f filter.Filter) {
	t.Helper()
	info := f.Info()
	if err := info.Validate(); err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.ProtocolMinor > filter.ProtocolMinor {
		t.Fatalf("Info announces protocol %d.%d, newer than this SDK's %d.%d", info.ProtocolMajor, info.ProtocolMinor, filter.ProtocolMajor, filter.ProtocolMinor)
	}
	kinds := []struct {
		kind filter.Kind
		run  func(t *testing.T, f filter.Filter, info filter.Info)
	}{
		{filter.Topics, func(t *testing.T, f filter.Filter, info filter.Info) {
			runKind(t, info.Handles(filter.Topics), f.FilterTopics, SampleTopics(), cloneTopics)
		}},
		{filter.Groups, func(t *testing.T, f filter.Filter, info filter.Info) {
			runKind(t, info.Handles(filter.Groups), f.FilterGroups, SampleGroups(), slices.Clone)
		}},
		{filter.ACLs, func(t *testing.T, f filter.Filter, info filter.Info) {
			runKind(t, info.Handles(filter.ACLs), f.FilterACLs, SampleACLs(), slices.Clone)
		}},
	}
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) { k.run(t, f, info) })
	}
	t.Run("InfoStable", func(t *testing.T) {
		want := info
		want.Kinds = slices.Clone(info.Kinds)
		a := f.Info()
		a.Kinds[0] = "mutated"
		if b := f.Info(); !reflect.DeepEqual(b, want) {
			t.Fatalf("Info changed (or modifying its Kinds changed the filter's): %+v, was %+v", b, info)
		}
	})
}

type filterFunc[T filter.Item] func(ctx context.Context, mirror string, in []T) ([]T, error)

func runKind[T filter.Item](t *testing.T, handles bool, call filterFunc[T], sample []T, clone func([]T) []T) {
	t.Run("OutputIsSubset", func(t *testing.T) {
		in := clone(sample)
		out, err := call(t.Context(), Mirror, in)
		if err != nil {
			t.Fatalf("on %d sample items: %v", len(in), err)
		}
		if err := filter.VerifyOutput(sample, out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, sample) {
			t.Fatalf("the filter modified its input")
		}
	})
	t.Run("UnhandledKindPassesThrough", func(t *testing.T) {
		if handles {
			// The filter decides about this kind; passing through is
			// not required. What it decides is for its own tests.
			return
		}
		out, err := call(t.Context(), Mirror, clone(sample))
		if err != nil {
			t.Fatal(err)
		}
		if !sameItems(out, sample) {
			t.Fatalf("Info does not list this kind, yet the filter dropped items: %d of %d passed", len(out), len(sample))
		}
	})
	t.Run("EmptyBatch", func(t *testing.T) {
		for _, in := range [][]T{nil, {}} {
			out, err := call(t.Context(), Mirror, in)
			if err != nil {
				t.Fatalf("on an empty batch: %v", err)
			}
			if len(out) != 0 {
				t.Fatalf("on an empty batch returned %d items", len(out))
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		const workers = 8
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				out, err := call(t.Context(), Mirror, clone(sample))
				if err == nil {
					err = filter.VerifyOutput(sample, out)
				}
				errs[w] = err
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("worker %d: %v", w, err)
			}
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := call(ctx, Mirror, clone(sample))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("with a canceled context: got %v, want an error wrapping context.Canceled", err)
		}
	})
}

// sameItems reports whether a and b hold the same items, in any order.
func sameItems[T filter.Item](a, b []T) bool {
	return len(a) == len(b) && filter.VerifyOutput(b, a) == nil
}

func cloneTopics(in []filter.Topic) []filter.Topic {
	out := slices.Clone(in)
	for i := range out {
		out[i].Configs = maps.Clone(out[i].Configs)
	}
	return out
}

// Topics returns topics with the given names, 3 partitions each, a
// cleanup.policy config, and Internal set for the names Kafka uses for its
// own internal topics (__consumer_offsets, __transaction_state,
// __share_group_state).
func Topics(names ...string) []filter.Topic {
	out := make([]filter.Topic, len(names))
	for i, n := range names {
		out[i] = filter.Topic{Name: n, Partitions: 3, Configs: map[string]string{"cleanup.policy": "delete"},
			Internal: n == "__consumer_offsets" || n == "__transaction_state" || n == "__share_group_state"}
	}
	return out
}

// Groups returns Empty classic groups with the given IDs.
func Groups(ids ...string) []filter.Group {
	out := make([]filter.Group, len(ids))
	for i, id := range ids {
		out[i] = filter.Group{ID: id, Kind: filter.GroupClassic, State: "Empty"}
	}
	return out
}

// TopicACL returns an ACL binding allowing principal op on the literal
// topic name from any host.
func TopicACL(name, principal, op string) filter.ACLBinding {
	return filter.ACLBinding{ResourceType: "TOPIC", ResourceName: name, PatternType: "LITERAL",
		Principal: principal, Host: "*", Operation: op, Permission: "ALLOW"}
}

// TopicNames returns the names of topics, in order.
func TopicNames(topics []filter.Topic) []string {
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = t.Name
	}
	return out
}

// GroupIDs returns the IDs of groups, in order.
func GroupIDs(groups []filter.Group) []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = g.ID
	}
	return out
}

// SampleTopics is the topic batch of the suite: Kafka's internal topics,
// topics with a "__" prefix, every character Kafka allows in a name, names
// that differ only in case or by a prefix, and a thousand ordinary topics.
func SampleTopics() []filter.Topic {
	names := []string{
		"__consumer_offsets", "__transaction_state", "__share_group_state", "__mirror_state", "__x",
		"_single-underscore", "orders", "orders-eu", "Orders", "my-orders", "orders.v2", "orders_v2",
		"a", "A.b-C_d.0", strings.Repeat("y", 249), // the longest name Kafka allows
	}
	for i := range 1000 {
		names = append(names, fmt.Sprintf("app-%03d.events", i))
	}
	ts := Topics(names...)
	ts[3].Configs = nil
	ts[6].Configs = map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"}
	return ts
}

// SampleGroups is the group batch of the suite: every group kind and
// several states, and a thousand ordinary groups.
func SampleGroups() []filter.Group {
	gs := []filter.Group{
		{ID: "billing", Kind: filter.GroupClassic, State: "Empty"},
		{ID: "billing-v2", Kind: filter.GroupConsumer, State: "Stable"},
		{ID: "share-readers", Kind: filter.GroupShare, State: "Empty"},
		{ID: "streams-app", Kind: filter.GroupStreams, State: "Dead"},
		{ID: "connect-mm2", Kind: filter.GroupClassic, State: "PreparingRebalance"},
		{ID: "", Kind: filter.GroupClassic, State: "Empty"},
		{ID: "with space", Kind: filter.GroupClassic, State: "Empty"},
	}
	// Every other group has a LastCommit (protocol 1.1), some with
	// nanoseconds and a location other than UTC; the others have none.
	base := time.Date(2026, 3, 1, 12, 0, 0, 123456789, sampleZone)
	for i := range 1000 {
		g := filter.Group{ID: fmt.Sprintf("consumer-%03d", i), Kind: filter.GroupConsumer, State: "Empty"}
		if i%2 == 0 {
			g.LastCommit = base.Add(-time.Duration(i) * time.Minute)
		}
		gs = append(gs, g)
	}
	return gs
}

// sampleZone is one location for every call of SampleGroups, so that two
// calls return groups equal under ==.
var sampleZone = time.FixedZone("CET", 3600)

// SampleACLs is the ACL binding batch of the suite.
func SampleACLs() []filter.ACLBinding {
	as := []filter.ACLBinding{
		TopicACL("orders", "User:alice", "READ"),
		TopicACL("orders", "User:alice", "WRITE"),
		{ResourceType: "TOPIC", ResourceName: "orders-", PatternType: "PREFIXED", Principal: "User:bob", Host: "10.0.0.1", Operation: "DESCRIBE", Permission: "DENY"},
		{ResourceType: "GROUP", ResourceName: "billing", PatternType: "LITERAL", Principal: "User:bob", Host: "*", Operation: "READ", Permission: "ALLOW"},
		{ResourceType: "CLUSTER", ResourceName: "kafka-cluster", PatternType: "LITERAL", Principal: "User:admin", Host: "*", Operation: "ALTER", Permission: "ALLOW"},
		{ResourceType: "TRANSACTIONAL_ID", ResourceName: "*", PatternType: "LITERAL", Principal: "User:*", Host: "*", Operation: "WRITE", Permission: "ALLOW"},
	}
	for i := range 500 {
		as = append(as, TopicACL(fmt.Sprintf("app-%03d.events", i), fmt.Sprintf("User:svc-%d", i%7), "READ"))
	}
	return as
}
