// Package testpki gives config's and kclient's tests internal/testpki's
// certificates under the names they use: a CA with one server certificate
// (for broker.test only) and one client certificate, as PEM in memory and in
// files. It is imported by tests only.
//
// It makes no certificate itself. Once those tests call internal/testpki
// directly (ca.IssueServer("broker", ServerName), ca.IssueClient("kmirror")),
// this package can go.
package testpki

import (
	"testing"

	"github.com/kmirror/kmirror/internal/testpki"
)

// ServerName is the DNS name in the server certificate, its only name: a
// client that dials 127.0.0.1 without naming broker.test fails the check.
const ServerName = "broker.test"

// PKI is a throw-away CA with one server and one client certificate, as PEM.
type PKI struct {
	CAPEM                  []byte
	ServerCert, ServerKey  []byte // the leaf alone, and its key
	ClientCert, ClientKey  []byte // the leaf alone, and its key
	CAFile, ClientPairFile string // files in Dir: the CA, and the client certificate followed by its key
	Dir                    string // a temporary directory of the test
}

// New makes a PKI valid for a day from an hour ago, its files in a
// temporary directory of t.
func New(t testing.TB) *PKI {
	t.Helper()
	ca, err := testpki.NewCA("kmirror test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer("broker", ServerName)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("kmirror")
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{
		CAPEM:      ca.CertPEM,
		ServerCert: server.LeafPEM, ServerKey: server.KeyPEM,
		ClientCert: client.LeafPEM, ClientKey: client.KeyPEM,
		Dir: t.TempDir(),
	}
	p.CAFile = WriteFile(t, p.Dir, "ca.pem", string(p.CAPEM))
	p.ClientPairFile = WriteFile(t, p.Dir, "client.pem", string(p.ClientCert)+string(p.ClientKey))
	return p
}

// WriteFile writes content to dir/name (mode 0600) and returns the path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	return testpki.WriteFile(t, dir, name, content)
}
