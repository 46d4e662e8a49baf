package config

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

const secretValue = "S3cr3t-Value-4242"

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret(secretValue)
	outs := []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v|%+v|%#v|%s|%q|%x|%X|%d", s, s, s, s, s, s, s, s),
		fmt.Sprintf("%v", struct{ P Secret }{s}), fmt.Sprintf("%+v", &struct{ P Secret }{s}), fmt.Sprintf("%#v", struct{ P Secret }{s}),
	}
	j, _ := json.Marshal(map[string]any{"p": s})
	txt, _ := s.MarshalText()
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "password", s)
	outs = append(outs, string(j), string(txt), logged.String())
	for _, o := range outs {
		if strings.Contains(o, secretValue) {
			t.Errorf("secret printed: %s", o)
		}
		if !strings.Contains(o, Redacted) {
			t.Errorf("output %q does not show that a secret is set", o)
		}
	}
	if s.Reveal() != secretValue || !s.IsSet() {
		t.Error("Reveal does not return the value")
	}
	if (Secret{}).String() != "" || (Secret{}).IsSet() {
		t.Error("an empty secret should print empty")
	}
}

// TestSecretsNotInErrors puts the secret in every secret key (and in places a
// careless parser might echo) of a configuration full of mistakes.
func TestSecretsNotInErrors(t *testing.T) {
	var secretLines, mirrorSecretLines strings.Builder
	n := 0
	for _, k := range Keys {
		if k.Secret {
			if k.Scope != ScopeCluster {
				t.Fatalf("secret key %s is not a cluster key; extend this test", k.Name)
			}
			fmt.Fprintf(&secretLines, "  %s: %q\n", k.Name, secretValue)
			fmt.Fprintf(&mirrorSecretLines, "    %s: %q\n", k.Name, secretValue)
			n++
		}
	}
	if n < 5 {
		t.Fatalf("only %d secret keys found", n)
	}
	yaml := `
log.level: loud
destination:
  bootstrap.servers: d:9092
  security.protocol: SASL_SSL
  sasl.mechanism: SCRAM-SHA-256
` + secretLines.String() + `
state: {dir: /tmp/x}
mirrors:
  - name: m1
    bootstrap.servers: s:9092
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
` + mirrorSecretLines.String() + `  - name: m2
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.password: 42424242
    sasl.pasword: "` + secretValue + `"
  - name: m3
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: "` + secretValue + `"
  - name: m4
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required ` + secretValue + `;'
  - name: m5
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secretValue + `"'
  - name: m6
    bootstrap.servers: s:9092
    security.protocol: SSL
    ssl.keystore.certificate.chain: nope
`
	env := []string{"KMIRROR_MIRRORS__M3__SASL_USERNAME=u", "KMIRROR_MIRRORS__M1__SASL_PASSWORD=" + secretValue}
	sets := []string{secretValue, "mirrors.m2.sasl.oauthbearer.client.secret=" + secretValue, "mirrors.m6.ssl.keystore.key=" + secretValue}
	_, err := Parse([]byte(yaml), "yaml", env, sets)
	if err == nil {
		t.Fatal("the configuration is full of mistakes but parsed")
	}
	msg := err.Error()
	for _, leak := range []string{secretValue, "42424242"} {
		if strings.Contains(msg, leak) {
			t.Errorf("error message contains the secret %q:\n%s", leak, msg)
		}
	}
	// The errors are still useful: they name the keys.
	var errs *Errors
	errors.As(err, &errs)
	for _, want := range []struct{ path, reason string }{
		{"log.level", "unknown value"},
		{"mirrors[m2].sasl.password", "expected a string, got a number"},
		{"mirrors[m2].sasl.pasword", "did you mean sasl.password?"},
		{"mirrors[m3].sasl.jaas.config", "the login module is not supported"},
		{"mirrors[m4].sasl.jaas.config", "expected '=' after an option"},
		{"mirrors[m5].sasl.jaas.config", "missing the terminating ';'"},
		{"--set", "flag 1: expected key=value"},
		{"destination.ssl.key.password", "encrypted private keys are not supported"},
		{"destination.sasl.jaas.config", ""},
	} {
		if !errs.Has(want.path, want.reason) {
			t.Errorf("missing error %s: %s", want.path, want.reason)
		}
	}
}

func TestSecretsNotInOutput(t *testing.T) {
	p := newPKI(t)
	pwFile := writeFile(t, p.dir, "pw", secretValue+"-file\n")
	yaml := fmt.Sprintf(`
destination:
  bootstrap.servers: d:9092
  security.protocol: SASL_SSL
  sasl.username: kmirror
  sasl.password: %q
  ssl.truststore.certificates: |
%s
state: {dir: /tmp/x}
mirrors:
  - name: oauth
    bootstrap.servers: s:9092
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url: https://idp.example.com/token
    sasl.oauthbearer.client.id: kmirror
    sasl.oauthbearer.client.secret: %q
  - name: jaas
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.jaas.config: 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="%s";'
  - name: file
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.username: u
    sasl.password.file: %s
  - name: mtls
    bootstrap.servers: s:9092
    security.protocol: SSL
    ssl.keystore.certificate.chain: |
%s
    ssl.keystore.key: |
%s
`, secretValue, indentBy(string(p.caPEM), 6), secretValue, secretValue, pwFile, indentBy(string(p.clientCert), 6), indentBy(string(p.clientKey), 6))
	cfg := mustParse(t, yaml, nil, nil)
	keyBody := strings.Split(string(p.clientKey), "\n")[1] // a line of the key's base64

	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]string{
		"Summary": cfg.Summary(),
		"%v":      fmt.Sprintf("%v", cfg),
		"%+v":     fmt.Sprintf("%+v", *cfg),
		"%#v":     fmt.Sprintf("%#v", cfg),
		"JSON":    string(j),
		"Effective": func() string {
			var b strings.Builder
			for _, s := range cfg.Effective() {
				b.WriteString(s.Path + "=" + s.Value + "\n")
			}
			return b.String()
		}(),
	}
	for i := range cfg.Mirrors {
		s, err := cfg.Mirrors[i].Source.SASL()
		if err != nil {
			t.Fatalf("SASL of %s: %v", cfg.Mirrors[i].Name, err)
		}
		outs["SASL "+cfg.Mirrors[i].Name] = fmt.Sprintf("%+v %#v", s, s)
	}
	for name, out := range outs {
		for _, leak := range []string{secretValue, keyBody} {
			if strings.Contains(out, leak) {
				t.Errorf("%s output contains a secret (%.12s…):\n%s", name, leak, out)
			}
		}
	}
	if !strings.Contains(outs["Summary"], "oauth: source s:9092 (SASL_SSL, OAUTHBEARER client kmirror") ||
		!strings.Contains(outs["Summary"], "SCRAM-SHA-512 user mirror") {
		t.Errorf("Summary lacks the non-secret facts:\n%s", outs["Summary"])
	}
}

func indentBy(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

func TestSASLResolution(t *testing.T) {
	dir := t.TempDir()
	pwFile := writeFile(t, dir, "pw", "first\n")
	cfg := mustParse(t, minimal+`
mirrors:
  - name: plain
    bootstrap.servers: s:1
    security.protocol: SASL_PLAINTEXT
    sasl.username: alice
    sasl.password: alice-pw
  - name: file
    bootstrap.servers: s:1
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-256
    sasl.username: bob
    sasl.password.file: `+pwFile+`
  - name: jaas
    bootstrap.servers: s:1
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: scram-sha-512
    sasl.jaas.config: >-
      org.apache.kafka.common.security.scram.ScramLoginModule required
      username="carol" password="p\"w;x" ;
  - name: jaasplain
    bootstrap.servers: s:1
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=dave password="d";'
  - name: oauth
    bootstrap.servers: s:1
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url: https://idp/token
    sasl.jaas.config: 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="cid" clientSecret="csec" scope="kafka";'
`, nil, nil)
	want := map[string]SASL{
		"plain":     {Mechanism: MechanismPlain, Username: "alice", Password: NewSecret("alice-pw")},
		"file":      {Mechanism: MechanismSCRAMSHA256, Username: "bob", Password: NewSecret("first")},
		"jaas":      {Mechanism: MechanismSCRAMSHA512, Username: "carol", Password: NewSecret(`p"w;x`)},
		"jaasplain": {Mechanism: MechanismPlain, Username: "dave", Password: NewSecret("d")},
		"oauth":     {Mechanism: MechanismOAuthBearer, OAuth: OAuth{TokenEndpointURL: "https://idp/token", ClientID: "cid", ClientSecret: NewSecret("csec"), Scope: "kafka"}},
	}
	for name, w := range want {
		m, _ := cfg.Mirror(name)
		got, err := m.Source.SASL()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got.Mechanism != w.Mechanism || got.Username != w.Username || got.Password.Reveal() != w.Password.Reveal() ||
			got.OAuth.TokenEndpointURL != w.OAuth.TokenEndpointURL || got.OAuth.ClientID != w.OAuth.ClientID ||
			got.OAuth.ClientSecret.Reveal() != w.OAuth.ClientSecret.Reveal() || got.OAuth.Scope != w.OAuth.Scope {
			t.Errorf("%s: SASL() = %+v (password %q), want %+v", name, got, got.Password.Reveal(), w)
		}
	}
	// A rotated password file is read again.
	if err := os.WriteFile(pwFile, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := cfg.Mirror("file")
	if got, _ := m.Source.SASL(); got.Password.Reveal() != "second" {
		t.Errorf("after rotation password = %q, want second", got.Password.Reveal())
	}
	// No SASL for PLAINTEXT.
	if got, err := cfg.Destination.SASL(); err != nil || got.Mechanism != "" {
		t.Errorf("PLAINTEXT destination SASL() = %+v, %v", got, err)
	}
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

func TestTLSConfig(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	serverPair, err := tls.X509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(p.caPEM)
	server := &tls.Config{Certificates: []tls.Certificate{serverPair}}
	mtlsServer := &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}

	load := func(lines string) *Cluster {
		t.Helper()
		cfg := mustParse(t, "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: broker.test:9093\n"+lines, nil, nil)
		return &cfg.Destination
	}
	tlsOf := func(c *Cluster) *tls.Config {
		t.Helper()
		tc, err := c.TLSConfig()
		if err != nil {
			t.Fatalf("TLSConfig: %v", err)
		}
		return tc
	}

	if tc, err := load("").TLSConfig(); tc != nil || err != nil {
		t.Errorf("PLAINTEXT TLSConfig = %v, %v; want nil, nil", tc, err)
	}

	verified := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + p.caFile + "\n"))
	if err := handshake(t, verified, "broker.test", server); err != nil {
		t.Errorf("handshake with the right CA and host: %v", err)
	}
	if err := handshake(t, verified, "wrong.test", server); err == nil {
		t.Error("handshake with a wrong host name succeeded; hostname verification is on by default")
	}
	if verified.MinVersion != tls.VersionTLS12 || verified.MaxVersion != tls.VersionTLS13 {
		t.Errorf("versions = %x..%x, want TLS 1.2..1.3", verified.MinVersion, verified.MaxVersion)
	}

	noHost := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + p.caFile + "\n  ssl.endpoint.identification.algorithm: \"\"\n"))
	if err := handshake(t, noHost, "wrong.test", server); err != nil {
		t.Errorf("with identification disabled a wrong host name must pass: %v", err)
	}
	wrongCA := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + other.caFile + "\n  ssl.endpoint.identification.algorithm: \"\"\n"))
	if err := handshake(t, wrongCA, "broker.test", server); err == nil {
		t.Error("with identification disabled an untrusted chain passed; only the host name check may be skipped")
	}

	inlineCA := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.certificates: |\n" + indentBy(string(p.caPEM), 4) + "\n"))
	if err := handshake(t, inlineCA, "broker.test", server); err != nil {
		t.Errorf("inline truststore: %v", err)
	}

	mtlsFile := tlsOf(load("  security.protocol: SSL\n  ssl.truststore.location: " + p.caFile + "\n  ssl.keystore.location: " + p.clientPairFile + "\n"))
	if err := handshake(t, mtlsFile, "broker.test", mtlsServer); err != nil {
		t.Errorf("mutual TLS with a keystore file: %v", err)
	}
	if err := handshake(t, verified, "broker.test", mtlsServer); err == nil {
		t.Error("mutual TLS without a client certificate passed; the server test setup is wrong")
	}
	mtlsInline := tlsOf(load("  security.protocol: SASL_SSL\n  sasl.username: u\n  sasl.password: p\n  ssl.truststore.location: " + p.caFile +
		"\n  ssl.keystore.certificate.chain: |\n" + indentBy(string(p.clientCert), 4) + "\n  ssl.keystore.key: |\n" + indentBy(string(p.clientKey), 4) + "\n"))
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
	c := load("  security.protocol: SSL\n  ssl.truststore.location: " + p.caFile + "\n")
	if err := os.Remove(p.caFile); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TLSConfig(); err == nil || !strings.Contains(err.Error(), "ssl.truststore.location: cannot read the truststore: open "+p.caFile) {
		t.Errorf("TLSConfig after removing the truststore: %v", err)
	}
}

func TestKgoOpts(t *testing.T) {
	p := newPKI(t)
	cfg := mustParse(t, `
destination:
  bootstrap.servers: d1:9092,d2:9092
  client.id: kmirror-test
  security.protocol: SASL_SSL
  sasl.username: alice
  sasl.password: alice-pw
  ssl.truststore.location: `+p.caFile+`
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

	client := func(c *Cluster) *kgo.Client {
		t.Helper()
		opts, err := c.KgoOpts()
		if err != nil {
			t.Fatalf("KgoOpts: %v", err)
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
	if _, err := oauthM.Source.KgoOpts(); !errors.Is(err, ErrTokenSourceRequired) {
		t.Errorf("OAUTHBEARER KgoOpts error = %v, want ErrTokenSourceRequired", err)
	}
	opts, err := oauthM.Source.KgoConnOpts()
	if err != nil || len(opts) < 2 {
		t.Errorf("OAUTHBEARER KgoConnOpts = %d opts, %v", len(opts), err)
	}
}

// TestDialerRunsTheTLSHandshake: kmirror's own dialer (used so that socket
// buffer sizes apply) verifies the broker's certificate and host name, and
// presents the client certificate, like franz-go's TLS dialing.
func TestDialerRunsTheTLSHandshake(t *testing.T) {
	p := newPKI(t)
	serverPair, err := tls.X509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(p.caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs})
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
	cfg := mustParse(t, "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: broker.test:9093\n  security.protocol: SSL\n  ssl.truststore.location: "+p.caFile+"\n  ssl.keystore.location: "+p.clientPairFile+"\n", nil, nil)
	tc, err := cfg.Destination.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	so := SocketOptions{ReceiveBuffer: 1 << 20, DialTimeout: 5 * time.Second}
	// Dialed by address, the host name 127.0.0.1 is not in the certificate.
	if conn, err := Dialer(so, tc)(ctx, "tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("handshake succeeded although the certificate does not name 127.0.0.1")
	}
	named := tc.Clone()
	named.ServerName = "broker.test"
	conn, err := Dialer(so, named)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("handshake with the right name and a client certificate: %v", err)
	}
	defer conn.Close()
	if st := conn.(*tls.Conn).ConnectionState(); !st.HandshakeComplete || len(st.PeerCertificates) == 0 {
		t.Fatalf("connection state %+v", st)
	}
}
