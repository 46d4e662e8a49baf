package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// aclBinding is one ACL binding, every field compared.
type aclBinding struct {
	ResourceType kmsg.ACLResourceType
	Name         string
	Pattern      kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

func (b aclBinding) String() string {
	return fmt.Sprintf("%s:%s:%s %s@%s %s %s", b.ResourceType, b.Pattern, b.Name, b.Principal, b.Host, b.Permission, b.Operation)
}

// aclRequest sends req as the harness's super user of c and fails the test
// on a request error or a top-level error code.
func aclRequest[R kmsg.Response](t testing.TB, ctx context.Context, c *kafkatest.Cluster, req kmsg.Request) R {
	t.Helper()
	resp, err := newClient(t, c, c.AdminIdentity()).Request(ctx, req)
	if err != nil {
		t.Fatalf("%s on cluster %s: %v", kmsg.NameForKey(req.Key()), c.Name(), err)
	}
	return resp.(R)
}

// createACLs creates bindings on c.
func createACLs(t testing.TB, ctx context.Context, c *kafkatest.Cluster, bs ...aclBinding) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = b.ResourceType, b.Name, b.Pattern
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, cr)
	}
	resp := aclRequest[*kmsg.CreateACLsResponse](t, ctx, c, req)
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("creating ACL %s on cluster %s: %v", bs[i], c.Name(), err)
		}
	}
}

// deleteACLs deletes bindings from c, each with an exact filter.
func deleteACLs(t testing.TB, ctx context.Context, c *kafkatest.Cluster, bs ...aclBinding) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, b := range bs {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = b.ResourceType, kmsg.StringPtr(b.Name), b.Pattern
		f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(b.Principal), kmsg.StringPtr(b.Host), b.Operation, b.Permission
		req.Filters = append(req.Filters, f)
	}
	resp := aclRequest[*kmsg.DeleteACLsResponse](t, ctx, c, req)
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("deleting ACL %s from cluster %s: %v", bs[i], c.Name(), err)
		}
	}
}

// listACLs returns every binding of c.
func listACLs(t testing.TB, ctx context.Context, c *kafkatest.Cluster) []aclBinding {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp := aclRequest[*kmsg.DescribeACLsResponse](t, ctx, c, req)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("describing the ACLs of cluster %s: %v", c.Name(), err)
	}
	var out []aclBinding
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, aclBinding{r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType})
		}
	}
	return out
}

func sortedACLs(bs []aclBinding) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.String()
	}
	slices.Sort(out)
	return out
}

// waitACLs waits until c holds exactly want.
func waitACLs(t testing.TB, ctx context.Context, c *kafkatest.Cluster, want []aclBinding, what string) {
	t.Helper()
	w := sortedACLs(want)
	var got []string
	for {
		if got = sortedACLs(listACLs(t, ctx, c)); slices.Equal(got, w) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: cluster %s holds\n  %s\nwant exactly\n  %s", what, c.Name(), strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// TestACLSyncCopiesExactlyTheBindingsTheRulesMatch: with mirror.acl.include
// rules TOPIC;orders.*, GROUP;consumer-.*;READ;ALLOW;User:bob and
// *;*;*;*;User:alice, every source binding that some rule matches — pattern
// type and host kept — is created on the destination and nothing else; an
// in-scope destination binding the source lacks is deleted; a binding
// removed on the source disappears from the destination; a destination
// binding outside the rules survives throughout. The source is the secured
// cluster, the destination a second cluster with an authorizer.
func TestACLSyncCopiesExactlyTheBindingsTheRulesMatch(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	dst := aclDestinationCluster(t)
	s := topicName(t, "")
	s = s[strings.LastIndexByte(s, '-')+1:] // unique to this run

	const (
		topic, group, txn          = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId
		literal, prefixed          = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		allow, deny                = kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
		read, write, describe, all = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationAll
	)
	b := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclBinding {
		return aclBinding{rt, name, pt, principal, host, op, perm}
	}
	// Source bindings inside the rules' scope, one rule or more each.
	ordersCarol := b(topic, "orders-"+s, literal, "User:carol", "*", read, allow)                   // rule 1
	ordersPrefixBob := b(topic, "orders-"+s+"-", prefixed, "User:bob", "127.0.0.1", write, deny)    // rule 1: pattern type and host kept
	consumerBob := b(group, "consumer-"+s, literal, "User:bob", "*", read, allow)                   // rule 2
	consumerPrefixBob := b(group, "consumer-"+s+"-", prefixed, "User:bob", "10.1.2.3", read, allow) // rule 2
	txnAlice := b(txn, "tx-"+s, prefixed, "User:alice", "*", write, allow)                          // rule 3
	groupAlice := b(group, "g-"+s, literal, "User:alice", "*", describe, deny)                      // rule 3
	ordersAlice := b(topic, "orders-"+s, literal, "User:alice", "*", all, allow)                    // rules 1 and 3
	inScope := []aclBinding{ordersCarol, ordersPrefixBob, consumerBob, consumerPrefixBob, txnAlice, groupAlice, ordersAlice}
	// Source bindings no rule matches.
	outOfScope := []aclBinding{
		b(topic, "payments-"+s, literal, "User:carol", "*", read, allow),   // not orders.*, not alice
		b(topic, "my-orders-"+s, literal, "User:carol", "*", read, allow),  // rule names match whole names
		b(group, "consumer-"+s, literal, "User:bob", "*", describe, allow), // rule 2 wants READ
		b(group, "consumer-"+s, literal, "User:bob", "*", read, deny),      // rule 2 wants ALLOW
		b(group, "consumer-"+s, literal, "User:carol", "*", read, allow),   // rule 2 wants bob
		b(group, "other-"+s, literal, "User:bob", "*", read, allow),        // rule 2 wants consumer-.*
		b(txn, "tx-"+s, prefixed, "User:alice2", "*", write, allow),        // rule 3: principals match whole
		b(topic, "payments-"+s, literal, "User:bob", "*", describe, allow), // rule 1 is for orders.* only
	}
	// Destination bindings before the sync: one outside the scope (kept),
	// one inside it that the source lacks (deleted).
	dstOutside := b(topic, "payments-"+s, literal, "User:dave", "*", read, allow)
	dstStale := b(topic, "orders-stale-"+s, literal, "User:carol", "*", read, allow)

	createACLs(t, ctx, secured, append(slices.Clone(inScope), outOfScope...)...)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		deleteACLs(t, cctx, secured, append(slices.Clone(inScope), outOfScope...)...)
	})
	// The ACL destination belongs to the ACL tests: start from no binding
	// (an earlier run in this process may have left some).
	if before := listACLs(t, ctx, dst); len(before) > 0 {
		deleteACLs(t, ctx, dst, before...)
	}
	createACLs(t, ctx, dst, dstOutside, dstStale)

	alice := securedUsers["alice"]
	dest := fmt.Sprintf("destination:\n  bootstrap.servers: %s\n  security.protocol: SASL_PLAINTEXT\n  sasl.mechanism: SCRAM-SHA-512\n  sasl.username: alice\n  sasl.password: %s",
		dst.BootstrapServers(kafkatest.SASLPlaintext), alice)
	d := startKmirrorWith(t, topicName(t, "no-such-topic"), []string{dest},
		"bootstrap.servers: "+secured.BootstrapServers(kafkatest.SASLPlaintext),
		"security.protocol: SASL_PLAINTEXT",
		"sasl.mechanism: SCRAM-SHA-512",
		"sasl.username: alice",
		"sasl.password: "+alice,
		`mirror.acl.include: "TOPIC;orders.*,GROUP;consumer-.*;READ;ALLOW;User:bob,*;*;*;*;User:alice"`,
	)
	waitACLs(t, ctx, dst, append(slices.Clone(inScope), dstOutside), "after the first sync")

	// Bindings removed on the source disappear from the destination; the
	// binding outside the scope stays.
	deleteACLs(t, ctx, secured, consumerBob, txnAlice, ordersCarol)
	waitACLs(t, ctx, dst, []aclBinding{ordersPrefixBob, consumerPrefixBob, groupAlice, ordersAlice, dstOutside}, "after bindings were removed on the source")

	// A binding added on the source later is created too.
	later := b(group, "consumer-"+s+"-later", literal, "User:bob", "*", read, allow)
	createACLs(t, ctx, secured, later)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		deleteACLs(t, cctx, secured, later)
	})
	waitACLs(t, ctx, dst, []aclBinding{ordersPrefixBob, consumerPrefixBob, groupAlice, ordersAlice, dstOutside, later}, "after a binding was added on the source")

	if v, ok := d.metric("kmirror_acl_sync_error_total"); ok && v != 0 {
		t.Errorf("kmirror_acl_sync_error_total = %v, want 0", v)
	}
	if strings.Contains(d.log(), alice) {
		t.Fatal("the SASL password appears in kmirror's log")
	}
}
