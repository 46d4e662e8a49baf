package kclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/core/kclient/kclienttest"
	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
)

func mustParse(t *testing.T, yaml string, env, sets []string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "yaml", env, sets)
	if err != nil {
		t.Fatalf("Parse failed:\n%v\n--- input ---\n%s", err, yaml)
	}
	return cfg
}

func indentBy(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// handshake runs a TLS handshake between a client using cfg (with
// serverName) and a server using serverCfg over loopback TCP (kernel
// buffers: an in-memory pipe deadlocks when both sides write an alert).
func handshake(t *testing.T, cfg *tls.Config, serverName string, serverCfg *tls.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		srv := tls.Server(conn, serverCfg)
		// The server's handshake also fails when it rejects the client's
		// certificate, which in TLS 1.3 the client cannot see yet.
		srvErr <- srv.HandshakeContext(ctx)
	}()
	c := cfg.Clone()
	c.ServerName = serverName
	var d tls.Dialer
	d.Config = c
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
	}
	serr := <-srvErr
	if err != nil {
		return err
	}
	return serr
}

// newPKI makes a CA with a broker's certificate for the name broker.test
// only (a client that dials 127.0.0.1 without naming broker.test fails the
// check) and kmirror's client certificate, their files in p.Dir.
func newPKI(t *testing.T, caName string) (p *testpki.PKI, broker, client *testpki.Cert) {
	t.Helper()
	p = testpki.New(t, caName)
	return p, p.IssueServer(t, "broker", "broker.test"), p.IssueClient(t, "kmirror")
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	p, broker, client := newPKI(t, "kmirror test CA")
	other := testpki.New(t, "other CA")
	server := &tls.Config{Certificates: []tls.Certificate{broker.TLS}}
	mtlsServer := &tls.Config{Certificates: []tls.Certificate{broker.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.CA.Pool()}

	load := func(lines string) *config.Cluster {
		t.Helper()
		cfg := mustParse(t, "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: broker.test:9093\n"+lines, nil, nil)
		return &cfg.Destination
	}
	tlsOf := func(c *config.Cluster) *tls.Config {
		t.Helper()
		tc, err := kclient.TLSConfig(c)
		if err != nil {
			t.Fatalf("TLSConfig: %v", err)
		}
		return tc
	}

	if tc, err := kclient.TLSConfig(load("")); tc != nil || err != nil {
		t.Errorf("PLAINTEXT TLSConfig = %v, %v; want nil, nil", tc, err)
	}

	verified := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + p.CAFile + "\n"))
	if err := handshake(t, verified, "broker.test", server); err != nil {
		t.Errorf("handshake with the right CA and host: %v", err)
	}
	if err := handshake(t, verified, "wrong.test", server); err == nil {
		t.Error("handshake with a wrong host name succeeded; hostname verification is on by default")
	}
	if verified.MinVersion != tls.VersionTLS12 || verified.MaxVersion != tls.VersionTLS13 {
		t.Errorf("versions = %x..%x, want TLS 1.2..1.3", verified.MinVersion, verified.MaxVersion)
	}

	noHost := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + p.CAFile + "\n  ssl.endpoint.identification.algorithm: \"\"\n"))
	if err := handshake(t, noHost, "wrong.test", server); err != nil {
		t.Errorf("with identification disabled a wrong host name must pass: %v", err)
	}
	wrongCA := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + other.CAFile + "\n  ssl.endpoint.identification.algorithm: \"\"\n"))
	if err := handshake(t, wrongCA, "broker.test", server); err == nil {
		t.Error("with identification disabled an untrusted chain passed; only the host name check may be skipped")
	}

	inlineCA := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.certificates: |\n" + indentBy(string(p.CA.CertPEM), 4) + "\n"))
	if err := handshake(t, inlineCA, "broker.test", server); err != nil {
		t.Errorf("inline truststore: %v", err)
	}

	mtlsFile := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + p.CAFile + "\n  ssl.keystore.location: " + client.KeystoreFile + "\n"))
	if err := handshake(t, mtlsFile, "broker.test", mtlsServer); err != nil {
		t.Errorf("mutual TLS with a keystore file: %v", err)
	}
	if err := handshake(t, verified, "broker.test", mtlsServer); err == nil {
		t.Error("mutual TLS without a client certificate passed; the server test setup is wrong")
	}
	mtlsInline := tlsOf(load("  security.protocol: SASL_SSL\n  sasl.username: u\n  sasl.password: p\n  ssl.truststore.location: " + p.CAFile +
		"\n  ssl.keystore.certificate.chain: |\n" + indentBy(string(client.LeafPEM), 4) + "\n  ssl.keystore.key: |\n" + indentBy(string(client.KeyPEM), 4) + "\n"))
	if err := handshake(t, mtlsInline, "broker.test", mtlsServer); err != nil {
		t.Errorf("mutual TLS with inline PEM: %v", err)
	}

	only13 := tlsOf(load("  security.protocol: SSL\n  ssl.enabled.protocols: TLSv1.3\n"))
	if only13.MinVersion != tls.VersionTLS13 || only13.MaxVersion != tls.VersionTLS13 {
		t.Errorf("TLSv1.3 only: versions = %x..%x", only13.MinVersion, only13.MaxVersion)
	}
	if only13.RootCAs != nil {
		t.Error("without a truststore the system roots (nil RootCAs) must be used")
	}

	// Files are read at every call: a truststore removed after loading is
	// reported by name.
	c := load("  security.protocol: SSL\n  ssl.truststore.location: " + p.CAFile + "\n")
	if err := os.Remove(p.CAFile); err != nil {
		t.Fatal(err)
	}
	if _, err := kclient.TLSConfig(c); err == nil || !strings.Contains(err.Error(), "ssl.truststore.location: cannot read the truststore: open "+p.CAFile) {
		t.Errorf("TLSConfig after removing the truststore: %v", err)
	}
}

func TestOpts(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "kmirror test CA")
	cfg := mustParse(t, `
destination:
  bootstrap.servers: d1:9092,d2:9092
  client.id: kmirror-test
  security.protocol: SASL_SSL
  sasl.username: alice
  sasl.password: alice-pw
  ssl.truststore.location: `+p.CAFile+`
state: {dir: /tmp/s}
mirrors:
  - name: scram
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: bob
    sasl.password: bob-pw
  - name: oauth
    bootstrap.servers: s:9092
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url: https://idp/token
    sasl.oauthbearer.client.id: c
    sasl.oauthbearer.client.secret: s
  - name: plain
    bootstrap.servers: s:9092
`, nil, nil)

	client := func(c *config.Cluster) *kgo.Client {
		t.Helper()
		opts, err := kclient.Opts(context.Background(), c, keysProvider, auth.Request{Role: auth.RoleSource})
		if err != nil {
			t.Fatalf("Opts: %v", err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatalf("kgo.NewClient: %v", err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	firstMessage := func(cl *kgo.Client) (string, string) {
		t.Helper()
		mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
		if len(mechs) != 1 {
			t.Fatalf("got %d SASL mechanisms, want 1", len(mechs))
		}
		_, msg, err := mechs[0].Authenticate(context.Background(), "d1:9092")
		if err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		return mechs[0].Name(), string(msg)
	}

	dst := client(&cfg.Destination)
	if seeds, _ := dst.OptValue(kgo.SeedBrokers).([]string); strings.Join(seeds, ",") != "d1:9092,d2:9092" {
		t.Errorf("seed brokers = %v", seeds)
	}
	if id, _ := dst.OptValue(kgo.ClientID).(string); id != "kmirror-test" {
		t.Errorf("client id = %q", id)
	}
	if tc, _ := dst.OptValue(kgo.DialTLSConfig).(*tls.Config); tc == nil || tc.RootCAs == nil {
		t.Error("SASL_SSL client has no TLS config with the truststore")
	}
	if name, msg := firstMessage(dst); name != "PLAIN" || msg != "\x00alice\x00alice-pw" {
		t.Errorf("PLAIN mechanism %s sent %q", name, msg)
	}

	scramM, _ := cfg.Mirror("scram")
	sc := client(&scramM.Source)
	if tc, _ := sc.OptValue(kgo.DialTLSConfig).(*tls.Config); tc != nil {
		t.Error("SASL_PLAINTEXT client dials TLS")
	}
	if name, msg := firstMessage(sc); name != "SCRAM-SHA-512" || !strings.HasPrefix(msg, "n,,n=bob,r=") {
		t.Errorf("SCRAM mechanism %s sent %q", name, msg)
	}

	plainM, _ := cfg.Mirror("plain")
	if mechs, _ := client(&plainM.Source).OptValue(kgo.SASL).([]sasl.Mechanism); len(mechs) != 0 {
		t.Errorf("PLAINTEXT client has SASL mechanisms %v", mechs)
	}

	oauthM, _ := cfg.Mirror("oauth")
	if name, msg := firstMessage(client(&oauthM.Source)); name != "OAUTHBEARER" || !strings.Contains(msg, "auth=Bearer token-of-c") {
		t.Errorf("OAUTHBEARER mechanism %s sent %q", name, msg)
	}
	if _, err := kclient.Opts(context.Background(), &oauthM.Source, nil, auth.Request{Role: auth.RoleSource}); !errors.Is(err, kclient.ErrNoCredentials) {
		t.Errorf("Opts without credentials = %v, want ErrNoCredentials", err)
	}
	opts, err := kclient.ConnOpts(&oauthM.Source)
	if err != nil || len(opts) < 2 {
		t.Errorf("OAUTHBEARER ConnOpts = %d opts, %v", len(opts), err)
	}
}

var keysProvider = kclienttest.KeysCredentials

// TestDialerRunsTheTLSHandshake: kmirror's own dialer (used so that socket
// buffer sizes apply) verifies the broker's certificate and host name, and
// presents the client certificate, like franz-go's TLS dialing.
func TestDialerRunsTheTLSHandshake(t *testing.T) {
	t.Parallel()
	p, broker, client := newPKI(t, "kmirror test CA")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{broker.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.CA.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // serves handshakes until the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	cfg := mustParse(t, "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: broker.test:9093\n  security.protocol: SSL\n  ssl.truststore.location: "+p.CAFile+"\n  ssl.keystore.location: "+client.KeystoreFile+"\n", nil, nil)
	tc, err := kclient.TLSConfig(&cfg.Destination)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	so := kclient.SocketOptions{ReceiveBuffer: 1 << 20, DialTimeout: 5 * time.Second}
	// Dialed by address, the host name 127.0.0.1 is not in the certificate.
	if conn, err := kclient.Dialer(so, tc)(ctx, "tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("handshake succeeded although the certificate does not name 127.0.0.1")
	}
	named := tc.Clone()
	named.ServerName = "broker.test"
	conn, err := kclient.Dialer(so, named)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("handshake with the right name and a client certificate: %v", err)
	}
	defer conn.Close()
	if st := conn.(*tls.Conn).ConnectionState(); !st.HandshakeComplete || len(st.PeerCertificates) == 0 {
		t.Fatalf("connection state %+v", st)
	}
}

// TestOptsWithSockets: with WithSockets the connection is dialed by
// kmirror's dialer (which runs the TLS handshake itself), not by franz-go's
// TLS dialing; the SASL mechanism is the same.
func TestOptsWithSockets(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "kmirror test CA")
	cfg := mustParse(t, "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: d1:9092\n  security.protocol: SASL_SSL\n  sasl.username: alice\n  sasl.password: alice-pw\n  ssl.truststore.location: "+p.CAFile+"\n", nil, nil)
	opts, err := kclient.Opts(context.Background(), &cfg.Destination, keysProvider, auth.Request{Role: auth.RoleDestination}, kclient.WithSockets(kclient.SocketOptions{ReceiveBuffer: 1 << 20, DialTimeout: time.Second}))
	if err != nil {
		t.Fatalf("Opts: %v", err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	if tc, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); tc != nil {
		t.Error("with WithSockets franz-go dials TLS itself; kmirror's dialer must run the handshake")
	}
	if d, _ := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); d == nil {
		t.Error("with WithSockets the client has no dialer of kmirror's")
	}
	if mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism); len(mechs) != 1 || mechs[0].Name() != "PLAIN" {
		t.Errorf("SASL mechanisms %v, want PLAIN", mechs)
	}
}
