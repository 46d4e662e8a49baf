package aclsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/scope"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/filter"
)

func TestSyncCopiesExactlyTheBindingsTheRulesMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rules string
		want  []acl
	}{
		// Whole-match regex: my-orders and payments stay out.
		{"TOPIC;orders.*", []acl{ordersEU, ordersPrefix, ordersUSDeny}},
		// Operation, permission and principal all filter: no DENY, no
		// DESCRIBE, no carol, no other-group.
		{"GROUP;consumer-.*;READ;ALLOW;User:bob", []acl{consumerA, consumerPfx}},
		// Every resource type of one principal.
		{"*;*;*;*;User:alice", []acl{ordersEU, payments, clusterAlice, txnAlice}},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.rules, nil)
			add(t, e.srcCl, sourceSet...)

			rep := e.sync(t)
			if rep.Created != len(tc.want) || rep.InScope != len(tc.want) || rep.Deleted != 0 || len(rep.Errors) != 0 {
				t.Fatalf("report %+v, want %d created and in scope, nothing deleted, no errors", rep, len(tc.want))
			}
			assertACLs(t, "destination", list(t, e.dstCl), sorted(tc.want...))
			assertACLs(t, "source (untouched)", list(t, e.srcCl), sorted(sourceSet...))
		})
	}
}

func TestSyncPreservesPatternTypeAndHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "TRANSACTIONAL_ID", nil)
	add(t, e.srcCl, txnAlice, txnDave)
	e.sync(t)
	got := list(t, e.dstCl)
	assertACLs(t, "destination", got, sorted(txnAlice, txnDave))
	for _, a := range got {
		if a.ResourceName == "tx-" && (a.PatternType != prefixed || a.Host != "192.168.1.1") {
			t.Fatalf("prefixed binding copied as %s, want pattern PREFIXED and host 192.168.1.1", a)
		}
	}
}

func TestSyncDeletesWhatTheSourceNoLongerHasAndNothingElse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "TOPIC;orders.*", nil)
	add(t, e.srcCl, sourceSet...)
	e.sync(t)

	// Bindings that differ from a kept source binding in one field only:
	// the sync must tell them apart and delete them alone.
	stalePattern := ordersEU
	stalePattern.PatternType = prefixed
	staleHost := ordersEU
	staleHost.Host = "10.9.9.9"
	staleOp := ordersEU
	staleOp.Operation = kmsg.ACLOperationAll
	add(t, e.dstCl, stalePattern, staleHost, staleOp)
	remove(t, e.srcCl, ordersPrefix)

	obs := observe(e.dst, kmsg.DeleteACLs)
	rep := e.sync(t)
	if rep.Deleted != 4 || rep.Created != 0 || rep.InScope != 2 || len(rep.Errors) != 0 {
		t.Fatalf("report %+v, want 4 deleted, 0 created, 2 in scope, no errors", rep)
	}
	assertACLs(t, "destination", list(t, e.dstCl), sorted(ordersEU, ordersUSDeny))

	filters := obs.deleteFilters()
	if len(filters) != 4 {
		t.Fatalf("destination saw %d delete filters, want one per deleted binding (4)", len(filters))
	}
	for _, f := range filters {
		if f.ResourceName == nil || f.Principal == nil || f.Host == nil ||
			f.ResourceType == kmsg.ACLResourceTypeAny || f.Operation == kmsg.ACLOperationAny || f.PermissionType == kmsg.ACLPermissionTypeAny ||
			(f.ResourcePatternType != literal && f.ResourcePatternType != prefixed) {
			t.Fatalf("delete filter %+v is not exact: every field must be set and the pattern type LITERAL or PREFIXED", f)
		}
	}
}

func TestSyncLeavesOutOfScopeAndManagedBindingsAlone(t *testing.T) {
	t.Parallel()
	// kmirror's own read-only ACL on its mirror topics.
	managed := topicsync.ReadOnlyManaged(func(topic string) bool { return topic == "orders-eu" || topic == "orders-us" })
	readOnlyEU := bind(topic, "orders-eu", literal, "User:*", "*", write, deny)
	readOnlyUS := bind(topic, "orders-us", literal, "User:*", "*", write, deny)
	outside := bind(topic, "billing", literal, "User:erin", "*", read, allow)
	staleInside := bind(topic, "orders-old", literal, "User:erin", "*", read, allow)

	e := newEnv(t, "TOPIC;orders.*", managed)
	// The source has a read-only ACL of its own on orders-us: in the rules'
	// scope but managed, so it is not copied either.
	add(t, e.srcCl, append([]acl{readOnlyUS}, sourceSet...)...)
	add(t, e.dstCl, readOnlyEU, outside, staleInside)

	rep := e.sync(t)
	if rep.Created != 3 || rep.Deleted != 1 || rep.InScope != 3 || len(rep.Errors) != 0 {
		t.Fatalf("report %+v, want 3 created, 1 deleted (the stale in-scope binding), 3 in scope", rep)
	}
	assertACLs(t, "destination", list(t, e.dstCl), sorted(ordersEU, ordersPrefix, ordersUSDeny, readOnlyEU, outside))
}

func TestSyncIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "TOPIC;orders.*,GROUP;consumer-.*;READ;ALLOW;User:bob,*;*;*;*;User:alice", nil)
	add(t, e.srcCl, sourceSet...)
	obs := observe(e.dst, kmsg.CreateACLs, kmsg.DeleteACLs)
	first := e.sync(t)
	// 3 topic + 2 group + 4 of alice's, orders-eu counted once.
	if first.Created != 8 {
		t.Fatalf("first cycle created %d, want 8 (%+v)", first.Created, first)
	}
	before := list(t, e.dstCl)
	firstHits := obs.h.Hits()
	if firstHits == 0 {
		t.Fatal("the observer saw no create request in the first cycle; it cannot prove the second sends none")
	}

	rep := e.sync(t)
	if rep.Created != 0 || rep.Deleted != 0 || rep.InScope != 8 || len(rep.Errors) != 0 {
		t.Fatalf("second cycle report %+v, want nothing created or deleted, 8 in scope", rep)
	}
	if n := obs.h.Hits() - firstHits; n != 0 {
		t.Fatalf("second cycle sent %d create/delete requests, want none", n)
	}
	assertACLs(t, "destination after second cycle", list(t, e.dstCl), before)
}

func TestSyncReportsAndCountsFailedBindingsAndGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "TOPIC;orders.*", nil)
	add(t, e.srcCl, sourceSet...)
	h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateACLs}, Resource: "orders-us", Err: kerr.PolicyViolation, Count: -1})

	rep := e.sync(t)
	if rep.Created != 2 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "orders-us") {
		t.Fatalf("report %+v, want 2 created and one error naming orders-us", rep)
	}
	assertACLs(t, "destination", list(t, e.dstCl), sorted(ordersEU, ordersPrefix))
	if v := e.metric(t, "kmirror_acl_sync_error_total"); v != 1 {
		t.Fatalf("acl sync errors = %v, want 1", v)
	}
	if v := e.metric(t, "kmirror_acls_synced"); v != 2 {
		t.Fatalf("acls synced = %v, want 2", v)
	}

	h.Remove()
	rep = e.sync(t)
	if rep.Created != 1 || len(rep.Errors) != 0 {
		t.Fatalf("retry report %+v, want the failed binding created", rep)
	}
	if v := e.metric(t, "kmirror_acls_synced"); v != 3 {
		t.Fatalf("acls synced = %v, want 3", v)
	}
	if v := e.metric(t, "kmirror_acl_sync_created_total"); v != 3 {
		t.Fatalf("acls created = %v, want 3", v)
	}
	if v := e.metric(t, "kmirror_acl_sync_error_total"); v != 1 {
		t.Fatalf("acl sync errors = %v after a clean cycle, want still 1", v)
	}
}

func TestSyncChangesNothingWhenTheSourceCannotBeRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "TOPIC;orders.*", nil)
	stale := bind(topic, "orders-old", literal, "User:erin", "*", read, allow)
	add(t, e.dstCl, stale)
	e.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeACLs}, TopLevel: true, Err: kerr.SecurityDisabled, Count: -1})

	rep, err := e.syncer.Sync(kfaketest.Context(t))
	if !errors.Is(err, ErrNoAuthorizer) || !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("Sync error %v, want ErrNoAuthorizer wrapping SECURITY_DISABLED", err)
	}
	if rep.Created != 0 || rep.Deleted != 0 {
		t.Fatalf("report %+v of a failed cycle, want no changes", rep)
	}
	assertACLs(t, "destination", list(t, e.dstCl), []acl{stale})
	if v := e.metric(t, "kmirror_acl_sync_error_total"); v != 1 {
		t.Fatalf("acl sync errors = %v, want 1", v)
	}
}

func TestSyncWithNoRulesContactsNoCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "", nil)
	add(t, e.srcCl, sourceSet...)
	src, dst := observe(e.src, kmsg.DescribeACLs), observe(e.dst, kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs)
	if rep := e.sync(t); rep.InScope != 0 || rep.Created != 0 {
		t.Fatalf("report %+v, want an empty cycle", rep)
	}
	if src.h.Hits()+dst.h.Hits() != 0 {
		t.Fatalf("an empty include list sent %d ACL requests, want none", src.h.Hits()+dst.h.Hits())
	}
}

func TestNewRejectsMissingClients(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Mirror: "m1"})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Source, Destination") {
		t.Fatalf("New without clients: %v, want ErrInvalidOptions naming Source, Destination", err)
	}
}

// The read-only ACL's shape is core/topicsync's; this proves that the
// bindings this package reads from a cluster meet it exactly.
func TestReadOnlyManagedMatchesOnlyTheReadOnlyACLOfMirrorTopics(t *testing.T) {
	t.Parallel()
	managed := topicsync.ReadOnlyManaged(func(topic string) bool { return topic == "orders" })
	ro := bind(topic, "orders", literal, topicsync.ReadOnlyPrincipal, "*", write, deny)
	if !managed(ro.Binding()) {
		t.Fatalf("%s not reported managed", ro)
	}
	for _, a := range []acl{
		bind(topic, "payments", literal, topicsync.ReadOnlyPrincipal, "*", write, deny), // not a mirror topic
		bind(topic, "orders", prefixed, topicsync.ReadOnlyPrincipal, "*", write, deny),
		bind(topic, "orders", literal, "User:bob", "*", write, deny),
		bind(topic, "orders", literal, topicsync.ReadOnlyPrincipal, "10.0.0.1", write, deny),
		bind(topic, "orders", literal, topicsync.ReadOnlyPrincipal, "*", read, deny),
		bind(topic, "orders", literal, topicsync.ReadOnlyPrincipal, "*", write, allow),
		bind(group, "orders", literal, topicsync.ReadOnlyPrincipal, "*", write, deny),
	} {
		if managed(a.Binding()) {
			t.Errorf("%s reported managed; only the exact read-only ACL of a mirror topic is", a)
		}
	}
	if !topicsync.ReadOnlyManaged(nil)(bind(topic, "any", literal, topicsync.ReadOnlyPrincipal, "*", write, deny).Binding()) {
		t.Error("ReadOnlyManaged(nil) must match the read-only ACL of any topic")
	}
}

// The filter is asked once for the source's bindings and once for the
// destination's, never sees kmirror's own read-only ACLs, and what it keeps
// is the scope: a plugin chained after the built-in rules narrows it.
func TestFilterDecidesTheScopeOncePerSide(t *testing.T) {
	t.Parallel()
	managed := topicsync.ReadOnlyManaged(nil)
	readOnly := bind(topic, "orders-eu", literal, topicsync.ReadOnlyPrincipal, "*", write, deny)
	var seen [][]filter.ACLBinding
	noCarol := filter.Funcs{Name: "no-carol", ACLs: func(_ context.Context, _ string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
		seen = append(seen, slices.Clone(in))
		var out []filter.ACLBinding
		for _, b := range in {
			if b.Principal != "User:carol" {
				out = append(out, b)
			}
		}
		return out, nil
	}}
	e := newEnv(t, "", managed)
	f := filter.Chain(scope.New(&config.Mirror{ACLInclude: mustRules(t, "TOPIC;orders.*")}), noCarol)
	s, err := e.newSyncer(f, managed)
	if err != nil {
		t.Fatal(err)
	}
	e.syncer = s
	add(t, e.srcCl, sourceSet...)
	add(t, e.dstCl, readOnly, ordersUSDeny) // carol's binding: in the rules' scope, not in the chain's

	rep := e.sync(t)
	if rep.Created != 2 || rep.Deleted != 0 || rep.InScope != 2 {
		t.Fatalf("report %+v, want 2 created, nothing deleted, 2 in scope", rep)
	}
	assertACLs(t, "destination", list(t, e.dstCl), sorted(ordersEU, ordersPrefix, ordersUSDeny, readOnly))
	if len(seen) != 2 {
		t.Fatalf("the chained filter was called %d times, want twice (source, destination)", len(seen))
	}
	for _, call := range seen {
		for _, b := range call {
			if !strings.HasPrefix(b.ResourceName, "orders") || b.ResourceType != "TOPIC" {
				t.Errorf("the chained filter saw %s, which the built-in rules drop", b)
			}
			if b.Principal == topicsync.ReadOnlyPrincipal {
				t.Errorf("a filter saw kmirror's read-only ACL %s", b)
			}
		}
	}
}

// A filter that makes no decision for either side aborts the cycle before
// any change, and the failure is counted.
func TestFilterErrorChangesNothing(t *testing.T) {
	t.Parallel()
	calls := 0
	failSecond := filter.Funcs{Name: "flaky", ACLs: func(_ context.Context, _ string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
		calls++
		if calls == 2 {
			return nil, filter.ErrUnavailable
		}
		return in, nil
	}}
	e := newEnv(t, "", nil)
	s, err := e.newSyncer(failSecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.syncer = s
	add(t, e.srcCl, ordersEU)
	stale := bind(topic, "stale", literal, "User:erin", "*", read, allow)
	add(t, e.dstCl, stale)
	obs := observe(e.dst, kmsg.CreateACLs, kmsg.DeleteACLs)
	_, err = e.syncer.Sync(kfaketest.Context(t))
	if !errors.Is(err, filter.ErrUnavailable) || !strings.Contains(err.Error(), "destination ACLs made no decision") {
		t.Fatalf("Sync = %v, want the destination filter's ErrUnavailable", err)
	}
	if obs.h.Hits() != 0 {
		t.Fatalf("%d create/delete requests after a failed filter, want none", obs.h.Hits())
	}
	assertACLs(t, "destination", list(t, e.dstCl), []acl{stale})
	if v := e.metric(t, "kmirror_acl_sync_error_total"); v != 1 {
		t.Fatalf("acl sync errors = %v, want 1", v)
	}
}

func mustRules(t *testing.T, s string) aclrule.Rules {
	t.Helper()
	rs, err := aclrule.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestDescribeHintOnlyForAMissingPermission: a source that refuses
// DescribeAcls as unauthorized gets the "needs DESCRIBE" hint; a source
// that cannot be reached (connection refused) does not: that is no matter
// of ACLs.
func TestDescribeHintOnlyForAMissingPermission(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "TOPIC;orders.*", nil)
	e.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeACLs}, TopLevel: true, Err: kerr.ClusterAuthorizationFailed, Count: -1})
	_, err := e.syncer.Sync(kfaketest.Context(t))
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) || !strings.Contains(err.Error(), "needs DESCRIBE on the cluster resource") {
		t.Fatalf("unauthorized: %v; want the DESCRIBE hint", err)
	}

	dead, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RetryTimeout(time.Second), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	s, err := New(Options{Mirror: "m1", Source: dead, Destination: e.dstCl, Filter: scope.New(&config.Mirror{ACLInclude: mustRules(t, "TOPIC;orders.*")})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(kfaketest.Context(t), 5*time.Second)
	defer cancel()
	_, err = s.Sync(ctx)
	if err == nil || !strings.Contains(err.Error(), "dial") || strings.Contains(err.Error(), "needs DESCRIBE") {
		t.Fatalf("unreachable source: %v; want an error without the DESCRIBE hint", err)
	}
}
