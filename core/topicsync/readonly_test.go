package topicsync

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// The ACL Protect creates is exactly ReadOnlyBinding, which ReadOnlyManaged
// recognises (so ACL sync leaves it alone); SyncReadOnly removes it from a
// released topic and keeps it on a protected one.
func TestProtectCreatesExactlyTheBindingReadOnlyManagedRecognises(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, _ := newSyncer(t, f, nil, ".*", "", "")
	ctx := context.Background()
	for _, topic := range []string{"guarded", "kept"} {
		kfaketest.CreateTopic(t, f.dstCl, topic, 1, nil)
		if err := s.Protect(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
	var got []aclrule.Binding
	for _, r := range aclBindings(t, f.dstCl) {
		for _, a := range r.ACLs {
			got = append(got, aclrule.Binding{
				ResourceType: r.ResourceType.String(), ResourceName: r.ResourceName, PatternType: r.ResourcePatternType.String(),
				Principal: a.Principal, Host: a.Host, Operation: a.Operation.String(), Permission: a.PermissionType.String(),
			})
		}
	}
	if len(got) != 2 {
		t.Fatalf("destination ACLs %+v, want one per protected topic", got)
	}
	managed := ReadOnlyManaged(func(topic string) bool { return topic == "guarded" || topic == "kept" })
	for _, b := range got {
		if b != ReadOnlyBinding(b.ResourceName) {
			t.Fatalf("created %+v, want %+v", b, ReadOnlyBinding(b.ResourceName))
		}
		if !managed(b) {
			t.Fatalf("ReadOnlyManaged does not recognise %+v", b)
		}
	}
	if err := s.SyncReadOnly(ctx, []string{"kept"}, []string{"guarded"}); err != nil {
		t.Fatal(err)
	}
	rs := aclBindings(t, f.dstCl)
	if len(rs) != 1 || rs[0].ResourceName != "kept" || len(rs[0].ACLs) != 1 {
		t.Fatalf("ACLs after releasing guarded: %+v, want kept's only", rs)
	}
}

// A destination without an authorizer takes no ACL: Protect succeeds, and
// the Syncer notes, once, that mirror topics are writable by anyone.
func TestProtectOnADestinationWithoutAnAuthorizerNotesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.dst.ControlKey(kmsg.CreateACLs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		req := kr.(*kmsg.CreateACLsRequest)
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode = kerr.SecurityDisabled.Code
			resp.Results = append(resp.Results, r)
		}
		return resp, nil, true
	})
	s, _ := newSyncer(t, f, nil, ".*", "", "")
	for _, topic := range []string{"a", "b"} {
		if err := s.Protect(context.Background(), topic); err != nil {
			t.Fatalf("Protect(%s) = %v, want nil without an authorizer", topic, err)
		}
	}
	if n := s.Notes(); len(n) != 1 || !strings.Contains(n[0], "no authorizer") {
		t.Fatalf("notes %q, want one saying the destination has no authorizer", n)
	}
}

// kmirror running as bob, who may write by an ALLOW ACL but is no super
// user, is bound by the DENY WRITE for User:*: Protect fails with
// ErrCannotWrite naming bob and super.users, without the password. As
// admin (a super user) it passes.
func TestProtectFailsWhenKmirrorIsNotASuperUser(t *testing.T) {
	t.Parallel()
	all := func(rt kmsg.ACLResourceType, name string) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	f := newFixture(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin-pw"),
		kfake.User("PLAIN", "bob", "bob-pw", all(kmsg.ACLResourceTypeCluster, "kafka-cluster"), all(kmsg.ACLResourceTypeTopic, "*")))
	bob := kfaketest.NewClient(t, f.dst, kgo.SASL(plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()))
	admin := kfaketest.NewClient(t, f.dst, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-pw"}.AsMechanism()))
	kfaketest.CreateTopic(t, admin, "guarded", 1, nil)
	ctx := context.Background()

	s, _ := newSyncer(t, f, bob, ".*", "", "")
	s.opts.DestinationUser = "bob"
	err := s.Protect(ctx, "guarded")
	if !errors.Is(err, ErrCannotWrite) {
		t.Fatalf("Protect as bob = %v, want ErrCannotWrite", err)
	}
	for _, want := range []string{"mirror test", "User:bob", "super.users", "guarded", "DENY WRITE"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "bob-pw") {
		t.Fatal("the error shows the password")
	}

	s, _ = newSyncer(t, f, admin, ".*", "", "")
	if err := s.Protect(ctx, "guarded"); err != nil {
		t.Fatalf("Protect as a super user = %v", err)
	}
}
