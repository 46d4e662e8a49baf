package aclsync

import (
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/scope"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/filter"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	txnID    = kmsg.ACLResourceTypeTransactionalId
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
	read     = kmsg.ACLOperationRead
	write    = kmsg.ACLOperationWrite
	describe = kmsg.ACLOperationDescribe
)

func bind(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl {
	return acl{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// The varied source ACL set the rule tests select from.
var (
	ordersEU      = bind(topic, "orders-eu", literal, "User:alice", "*", read, allow)
	ordersPrefix  = bind(topic, "orders-", prefixed, "User:bob", "10.0.0.1", write, allow)
	ordersUSDeny  = bind(topic, "orders-us", literal, "User:carol", "*", write, deny)
	payments      = bind(topic, "payments", literal, "User:alice", "*", read, allow)
	myOrders      = bind(topic, "my-orders", literal, "User:bob", "*", read, allow)
	consumerA     = bind(group, "consumer-a", literal, "User:bob", "*", read, allow)
	consumerPfx   = bind(group, "consumer-", prefixed, "User:bob", "10.0.0.2", read, allow)
	consumerBDeny = bind(group, "consumer-b", literal, "User:bob", "*", read, deny)
	consumerC     = bind(group, "consumer-c", literal, "User:carol", "*", read, allow)
	consumerDDesc = bind(group, "consumer-d", literal, "User:bob", "*", describe, allow)
	otherGroup    = bind(group, "other-group", literal, "User:bob", "*", read, allow)
	clusterAlice  = bind(cluster, "kafka-cluster", literal, "User:alice", "*", describe, allow)
	txnAlice      = bind(txnID, "tx-", prefixed, "User:alice", "192.168.1.1", write, allow)
	txnDave       = bind(txnID, "tx-1", literal, "User:dave", "*", write, allow)
)

var sourceSet = []acl{
	ordersEU, ordersPrefix, ordersUSDeny, payments, myOrders,
	consumerA, consumerPfx, consumerBDeny, consumerC, consumerDDesc, otherGroup,
	clusterAlice, txnAlice, txnDave,
}

type env struct {
	src, dst     *kfake.Cluster
	srcCl, dstCl *kgo.Client
	metrics      *metrics.Provider
	syncer       *Syncer
}

// newEnv starts a source and a destination cluster and a Syncer for rules.
func newEnv(t *testing.T, rules string, managed func(aclrule.Binding) bool) *env {
	t.Helper()
	e := &env{src: kfaketest.NewCluster(t), dst: kfaketest.NewCluster(t)}
	e.srcCl, e.dstCl = kfaketest.NewClient(t, e.src), kfaketest.NewClient(t, e.dst)
	p, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = p
	rs, err := aclrule.Parse(rules)
	if err != nil {
		t.Fatalf("parsing rules %q: %v", rules, err)
	}
	var f filter.Filter // as the engine does: no rule, no filter, no ACL sync
	if len(rs) > 0 {
		f = scope.New(&config.Mirror{ACLInclude: rs})
	}
	e.syncer, err = e.newSyncer(f, managed)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func (e *env) newSyncer(f filter.Filter, managed func(aclrule.Binding) bool) (*Syncer, error) {
	return New(Options{
		Mirror: "m1", Source: e.srcCl, Destination: e.dstCl, Filter: f, Managed: managed,
		Meter: e.metrics.Meter("test"),
	})
}

func (e *env) sync(t *testing.T) Report {
	t.Helper()
	rep, err := e.syncer.Sync(kfaketest.Context(t))
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return rep
}

// add creates acls on a cluster, failing the test on any error.
func add(t *testing.T, cl *kgo.Client, acls ...acl) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(kfaketest.Context(t), cl)
	if err != nil {
		t.Fatalf("creating ACLs: %v", err)
	}
	for i, r := range resp.Results {
		if err := codeErr(r.ErrorCode, r.ErrorMessage); err != nil {
			t.Fatalf("creating ACL %s: %v", acls[i], err)
		}
	}
}

// remove deletes one binding from a cluster with an exact filter.
func remove(t *testing.T, cl *kgo.Client, a acl) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = a.ResourceType, &a.ResourceName, a.PatternType
	f.Principal, f.Host, f.Operation, f.PermissionType = &a.Principal, &a.Host, a.Operation, a.Permission
	req.Filters = append(req.Filters, f)
	resp, err := req.RequestWith(kfaketest.Context(t), cl)
	if err != nil || len(resp.Results) != 1 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("deleting ACL %s: err %v, response %+v", a, err, resp)
	}
}

// list returns every binding of a cluster, sorted.
func list(t *testing.T, cl *kgo.Client) []acl {
	t.Helper()
	acls, err := describeAll(kfaketest.Context(t), cl)
	if err != nil {
		t.Fatalf("describing ACLs: %v", err)
	}
	sortACLs(acls)
	return acls
}

func sorted(acls ...acl) []acl {
	out := append([]acl(nil), acls...)
	sortACLs(out)
	return out
}

func assertACLs(t *testing.T, what string, got, want []acl) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d ACLs, want %d\ngot:  %s\nwant: %s", what, len(got), len(want), fmtACLs(got), fmtACLs(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: ACLs differ\ngot:  %s\nwant: %s", what, fmtACLs(got), fmtACLs(want))
		}
	}
}

func fmtACLs(acls []acl) string {
	s := make([]string, len(acls))
	for i, a := range acls {
		s[i] = a.String()
	}
	sort.Strings(s)
	return strings.Join(s, "\n      ")
}

// observe counts the requests of key a cluster answers and records every
// DeleteACLs filter it receives.
type observer struct {
	h       *kfake.FaultHandle
	mu      sync.Mutex
	seen    map[*kmsg.DeleteACLsRequest]bool
	filters []kmsg.DeleteACLsRequestFilter
}

func observe(c *kfake.Cluster, keys ...kmsg.Key) *observer {
	o := &observer{seen: map[*kmsg.DeleteACLsRequest]bool{}}
	o.h = c.Fault(kfake.Fault{Keys: keys, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
		// When runs once per filter of a request: record each request once.
		if d, ok := r.(*kmsg.DeleteACLsRequest); ok {
			o.mu.Lock()
			if !o.seen[d] {
				o.seen[d] = true
				o.filters = append(o.filters, d.Filters...)
			}
			o.mu.Unlock()
		}
		return true
	}})
	return o
}

func (o *observer) deleteFilters() []kmsg.DeleteACLsRequestFilter {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]kmsg.DeleteACLsRequestFilter(nil), o.filters...)
}

func (e *env) metric(t *testing.T, name string) float64 {
	t.Helper()
	v, ok, err := e.metrics.Value(name, map[string]string{"mirror": "m1"})
	if err != nil || !ok {
		t.Fatalf("metric %s: ok %v, err %v", name, ok, err)
	}
	return v
}
