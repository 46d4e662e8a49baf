package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

func saslUser(l kafkatest.Listener, m kafkatest.Mechanism, user string) kafkatest.Identity {
	return kafkatest.Identity{Listener: l, Mechanism: m, User: user, Password: securedUsers[user]}
}

func certUser(name string) kafkatest.Identity {
	return kafkatest.Identity{Listener: kafkatest.SSL, Cert: secured.ClientCert(name)}
}

// roundTrip creates a topic as id, produces one record to it and reads it
// back, all as id: it proves that id authenticates and is authorized.
func roundTrip(t testing.TB, ctx context.Context, id kafkatest.Identity) {
	t.Helper()
	topic := topicName(t, "")
	createTopic(t, ctx, kadm.NewClient(newClient(t, secured, id)), topic, 1, 1, nil)
	produceSync(t, ctx, newClient(t, secured, id), &kgo.Record{Topic: topic, Value: []byte("as " + id.String())})
	got := consumeN(t, ctx, secured, id, topic, 1)
	if want := "as " + id.String(); string(got[0].Value) != want {
		t.Fatalf("read %q back, want %q", got[0].Value, want)
	}
}

// Every SASL mechanism logs a user in with the right password, over plaintext
// and over TLS; alice is a super user, so she can create, write and read.
func TestSASLUserWithRightPasswordIsServed(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	for _, l := range []kafkatest.Listener{kafkatest.SASLPlaintext, kafkatest.SASLSSL} {
		for _, m := range kafkatest.AllMechanisms {
			t.Run(fmt.Sprintf("%s/%s", l, m), func(t *testing.T) {
				roundTrip(t, ctx, saslUser(l, m, "alice"))
				// bob has no ACLs, but logging in needs none.
				if err := newClient(t, secured, saslUser(l, m, "bob")).Ping(ctx); err != nil {
					t.Fatalf("bob with the right password: %v", err)
				}
			})
		}
	}
}

// A wrong password, or a user the broker does not know, fails SASL
// authentication with SASL_AUTHENTICATION_FAILED, for every mechanism.
func TestSASLWrongPasswordIsRefused(t *testing.T) {
	ctx := testContext(t, time.Minute)
	for _, m := range kafkatest.AllMechanisms {
		for _, id := range []kafkatest.Identity{
			{Listener: kafkatest.SASLPlaintext, Mechanism: m, User: "alice", Password: "not-" + securedUsers["alice"]},
			{Listener: kafkatest.SASLPlaintext, Mechanism: m, User: "mallory", Password: securedUsers["alice"]},
			{Listener: kafkatest.SASLSSL, Mechanism: m, User: "bob", Password: securedUsers["alice"]},
		} {
			t.Run(strings.ReplaceAll(id.String(), " ", "/"), func(t *testing.T) {
				err := newClient(t, secured, id).Ping(ctx)
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("ping with a bad login: got %v, want %v", err, kerr.SaslAuthenticationFailed)
				}
				t.Logf("refused as expected: %v", err)
			})
		}
	}
}

// isTLSRefusal reports whether err is the broker ending the TLS handshake
// with an alert (for a missing or untrusted client certificate).
func isTLSRefusal(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" && strings.Contains(op.Err.Error(), "tls:")
}

// The SSL listener requires a client certificate from the cluster's CA: a
// valid one logs in (as User:<CN>), none or one from another CA is refused.
func TestSSLClientCertificateAuth(t *testing.T) {
	ctx := testContext(t, time.Minute)

	t.Run("valid certificate", func(t *testing.T) {
		roundTrip(t, ctx, certUser("alice"))
	})

	t.Run("no certificate", func(t *testing.T) {
		err := newClient(t, secured, kafkatest.Identity{Listener: kafkatest.SSL}).Ping(ctx)
		if !isTLSRefusal(err) {
			t.Fatalf("ping without a client certificate: got %v, want a TLS alert from the broker", err)
		}
		t.Logf("refused as expected: %v", err)
	})

	t.Run("certificate from another CA", func(t *testing.T) {
		other, err := kafkatest.NewCA("another-ca")
		if err != nil {
			t.Fatal(err)
		}
		// Same name as a super user, so only the issuer can be the reason.
		forged, err := other.IssueClient("alice")
		if err != nil {
			t.Fatal(err)
		}
		err = newClient(t, secured, kafkatest.Identity{Listener: kafkatest.SSL, Cert: forged}).Ping(ctx)
		if !isTLSRefusal(err) {
			t.Fatalf("ping with a certificate from another CA: got %v, want a TLS alert from the broker", err)
		}
		t.Logf("refused as expected: %v", err)
	})
}

// produceErr produces one record to topic as id on a fresh client (no cached
// metadata) and returns the error.
func produceErr(t testing.TB, ctx context.Context, id kafkatest.Identity, topic string) error {
	t.Helper()
	cl, err := secured.NewClient(id, kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("from " + id.String())}).FirstErr()
}

// With the StandardAuthorizer, a super user may do anything; a user without
// ACLs is refused until an ACL allows it, whichever way it authenticates.
func TestAuthorizerRefusesUntilACLAllows(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	alice := saslUser(kafkatest.SASLPlaintext, kafkatest.ScramSHA256, "alice")
	bob := saslUser(kafkatest.SASLPlaintext, kafkatest.ScramSHA256, "bob")
	bobCert := certUser("bob")
	carol := saslUser(kafkatest.SASLSSL, kafkatest.Plain, "carol")

	adm := kadm.NewClient(newClient(t, secured, alice))
	topic := topicName(t, "")
	createTopic(t, ctx, adm, topic, 1, 1, nil) // alice is a super user

	resp, err := kadm.NewClient(newClient(t, secured, bob)).CreateTopic(ctx, 1, 1, nil, topicName(t, "bob"))
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob creating a topic: got %v, want %v", err, kerr.TopicAuthorizationFailed)
	}
	for _, id := range []kafkatest.Identity{bob, bobCert, carol} {
		if err := produceErr(t, ctx, id, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s producing without ACLs: got %v, want %v", id, err, kerr.TopicAuthorizationFailed)
		}
		t.Logf("%s refused as expected: %v", id, err)
	}

	acl := kadm.NewACLs().
		Allow("User:bob").AllowHosts().
		Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpWrite, kadm.OpDescribe)
	results, err := adm.CreateACLs(ctx, acl)
	if err != nil {
		t.Fatalf("create ACL for bob: %v", err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("create ACL %s %s for bob: %v", r.Operation, r.Name, r.Err)
		}
	}

	// The broker's authorizer learns of the ACL through the metadata log,
	// a moment after CreateAcls returns.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := produceErr(t, ctx, bob, topic)
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAuthorizationFailed) || time.Now().After(deadline) {
			t.Fatalf("bob producing after the ACL was created: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := produceErr(t, ctx, bobCert, topic); err != nil {
		t.Fatalf("bob (client certificate, same principal) producing after the ACL was created: %v", err)
	}
	if err := produceErr(t, ctx, carol, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("carol producing with only bob's ACL: got %v, want %v", err, kerr.TopicAuthorizationFailed)
	}
}
