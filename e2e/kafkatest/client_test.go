package kafkatest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeCluster is a Cluster that was never started: enough for the client
// helpers, which only read ports and credentials.
func fakeCluster(t *testing.T, o Options) *Cluster {
	t.Helper()
	s := specFor(t, o)
	c := &Cluster{opts: s.opts, spec: *s, dir: t.TempDir()}
	if o.TLS != nil {
		ca, err := NewCA("ca")
		if err != nil {
			t.Fatal(err)
		}
		c.ca = ca
		if c.caFile, err = ca.WriteFiles(c.dir); err != nil {
			t.Fatal(err)
		}
		alice, err := ca.IssueClient("alice")
		if err != nil {
			t.Fatal(err)
		}
		if err := alice.WriteFiles(c.dir); err != nil {
			t.Fatal(err)
		}
		c.certs = map[string]*Cert{"alice": alice}
	}
	return c
}

func TestIdentityStringHidesPassword(t *testing.T) {
	id := Identity{Listener: SASLSSL, Mechanism: ScramSHA512, User: "alice", Password: "s3cret"}
	for _, s := range []string{id.String(), fmt.Sprint(id), fmt.Sprintf("%v", id)} {
		if strings.Contains(s, "s3cret") {
			t.Fatalf("password in %q", s)
		}
	}
}

func TestClientOptsValidateTheIdentity(t *testing.T) {
	plain := fakeCluster(t, Options{Brokers: 3})
	if got := plain.Bootstrap(Plaintext); len(got) != 3 {
		t.Fatalf("bootstrap %v, want 3 addresses", got)
	}
	if _, err := plain.ClientOpts(Identity{}); err != nil {
		t.Fatalf("default identity: %v", err)
	}
	secured := fakeCluster(t, Options{SASL: &SASLOptions{}, TLS: &TLSOptions{ClientAuth: true}})
	bad := []struct {
		c  *Cluster
		id Identity
	}{
		{plain, Identity{Listener: SASLPlaintext, Mechanism: Plain}}, // no such listener
		{plain, Identity{Listener: SSL}},
		{secured, Identity{Listener: SASLPlaintext}},                    // no mechanism
		{secured, Identity{Listener: SASLPlaintext, Mechanism: "NOPE"}}, // unknown mechanism
		{secured, Identity{Listener: Plaintext, Mechanism: Plain}},      // SASL on a plaintext listener
		{secured, Identity{Listener: SASLPlaintext, Mechanism: Plain, Cert: secured.ClientCert("alice")}},
	}
	for _, b := range bad {
		if _, err := b.c.ClientOpts(b.id); !errors.Is(err, ErrBadIdentity) {
			t.Errorf("identity %s: got %v, want ErrBadIdentity", b.id, err)
		}
	}
	for _, id := range []Identity{
		{Listener: SSL, Cert: secured.ClientCert("alice")},
		{Listener: SASLSSL, Mechanism: ScramSHA256, User: "u", Password: "p"},
		secured.AdminIdentity(),
	} {
		if _, err := secured.ClientOpts(id); err != nil {
			t.Errorf("identity %s: %v", id, err)
		}
	}
}

func TestClientPropertiesForKafkaTools(t *testing.T) {
	c := fakeCluster(t, Options{SASL: &SASLOptions{}, TLS: &TLSOptions{}})
	p, err := c.ClientProperties(Identity{Listener: SASLSSL, Mechanism: ScramSHA512, User: "alice", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"bootstrap.servers":       c.BootstrapServers(SASLSSL),
		"security.protocol":       "SASL_SSL",
		"sasl.mechanism":          "SCRAM-SHA-512",
		"sasl.jaas.config":        `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";`,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": c.CAFile(),
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	p, err = c.ClientProperties(Identity{Listener: SSL, Cert: c.ClientCert("alice")})
	if err != nil {
		t.Fatal(err)
	}
	if p["ssl.keystore.type"] != "PEM" || p["ssl.keystore.location"] != c.ClientCert("alice").KeystoreFile {
		t.Errorf("SSL keystore properties %v", p)
	}
	admin, err := c.ClientProperties(c.AdminIdentity())
	if err != nil {
		t.Fatal(err)
	}
	if admin["security.protocol"] != "SASL_PLAINTEXT" || admin["bootstrap.servers"] != c.BootstrapServers(Internal) {
		t.Errorf("admin properties %v", admin)
	}
}
