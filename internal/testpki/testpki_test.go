package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// handshake runs a TLS handshake between a server presenting server and
// requiring a client certificate from serverCA, and a client trusting
// clientCA and presenting client; it returns the server's and client's errors.
func handshake(t *testing.T, server *Cert, serverCA *CA, clientCA *CA, client *Cert) (srvErr, cliErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    serverCA.Pool(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvDone := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvDone <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		srvDone <- c.(*tls.Conn).Handshake()
	}()
	cfg := &tls.Config{RootCAs: clientCA.Pool()}
	if client != nil {
		cfg.Certificates = []tls.Certificate{client.TLS}
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err == nil {
		// TLS 1.3 reports a rejected client certificate on the first read.
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			err = nil
		}
		c.Close()
	}
	return <-srvDone, err
}

func TestCertificatesAuthenticateBothWays(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer("broker")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := ca.IssueClient("alice")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.IssueClient("alice")
	if err != nil {
		t.Fatal(err)
	}

	if srv, cli := handshake(t, server, ca, ca, alice); srv != nil || cli != nil {
		t.Fatalf("valid client certificate: server %v, client %v", srv, cli)
	}
	if srv, _ := handshake(t, server, ca, ca, nil); srv == nil {
		t.Fatal("server accepted a client without a certificate")
	}
	if srv, _ := handshake(t, server, ca, ca, forged); srv == nil {
		t.Fatal("server accepted a client certificate from another CA")
	}
	if _, cli := handshake(t, server, ca, other, alice); cli == nil {
		t.Fatal("client trusted a server whose CA it does not know")
	}

	if got := alice.Leaf().Subject.String(); got != "CN=alice" {
		t.Errorf("client subject %q, want CN=alice (the principal mapping rule expects only a CN)", got)
	}
	if err := server.Leaf().VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("server certificate: %v", err)
	}
	if err := server.Leaf().VerifyHostname("localhost"); err != nil {
		t.Errorf("server certificate: %v", err)
	}
}

func TestCertWriteFilesMakesAPEMKeystore(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("files-ca")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.IssueClient("bob")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := c.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	ks, err := os.ReadFile(c.KeystoreFile)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for rest := ks; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		types = append(types, b.Type)
		if b.Type == "PRIVATE KEY" {
			if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
				t.Fatalf("keystore key is not unencrypted PKCS#8: %v", err)
			}
		}
	}
	// Kafka's PEM keystore: the key, then the chain from the leaf up.
	if got := strings.Join(types, ","); got != "PRIVATE KEY,CERTIFICATE,CERTIFICATE" {
		t.Fatalf("keystore blocks %s", got)
	}
	if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
		t.Fatalf("cert and key files do not pair: %v", err)
	}
	caFile, err := ca.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(caFile); string(b) != string(ca.CertPEM) {
		t.Fatal("CA file does not hold the CA certificate")
	}
}

func TestIssueServerNamesTheHostsGivenOnly(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("hosts-ca")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.IssueServer("broker", "broker.test", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"broker.test", "10.0.0.1"} {
		if err := c.Leaf().VerifyHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if err := c.Leaf().VerifyHostname("127.0.0.1"); err == nil {
		t.Error("a certificate for broker.test and 10.0.0.1 also names 127.0.0.1")
	}
	if b, _ := pem.Decode(c.LeafPEM); b == nil || string(b.Bytes) != string(c.Leaf().Raw) || len(c.LeafPEM) >= len(c.CertPEM) {
		t.Error("LeafPEM is not the leaf alone")
	}
}

func TestNewWritesTheCAAndAServerAndClientsThatPair(t *testing.T) {
	t.Parallel()
	p := New(t, "new-ca")
	alice := p.IssueClient(t, "alice")
	if b, err := os.ReadFile(p.CAFile); err != nil || string(b) != string(p.CA.CertPEM) {
		t.Fatalf("CA file: %v", err)
	}
	for _, c := range []*Cert{p.Server, alice} {
		if filepath.Dir(c.CertFile) != p.Dir {
			t.Errorf("%s's files are in %s, want %s", c.Name, filepath.Dir(c.CertFile), p.Dir)
		}
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			t.Errorf("%s: cert and key files do not pair: %v", c.Name, err)
		}
	}
	if srv, cli := handshake(t, p.Server, p.CA, p.CA, alice); srv != nil || cli != nil {
		t.Fatalf("server %v, client %v", srv, cli)
	}
}

func TestPKIIssueServerWritesACertificateForTheHostsGiven(t *testing.T) {
	t.Parallel()
	p := New(t, "named-ca")
	broker := p.IssueServer(t, "broker", "broker.test")
	if filepath.Dir(broker.CertFile) != p.Dir {
		t.Errorf("files are in %s, want %s", filepath.Dir(broker.CertFile), p.Dir)
	}
	if _, err := tls.LoadX509KeyPair(broker.CertFile, broker.KeyFile); err != nil {
		t.Errorf("cert and key files do not pair: %v", err)
	}
	if err := broker.Leaf().VerifyHostname("broker.test"); err != nil {
		t.Error(err)
	}
	if err := broker.Leaf().VerifyHostname("127.0.0.1"); err == nil {
		t.Error("a certificate for broker.test also names 127.0.0.1")
	}
	if _, err := broker.Leaf().Verify(x509.VerifyOptions{Roots: p.CA.Pool(), DNSName: "broker.test"}); err != nil {
		t.Errorf("not verified by the PKI's CA: %v", err)
	}
}
