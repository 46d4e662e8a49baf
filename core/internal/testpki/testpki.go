// Package testpki makes throw-away certificate authorities for tests: a CA
// with one server certificate (for broker.test) and one client certificate,
// as PEM in memory and in files. It is imported by tests only.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerName is the DNS name in the server certificate.
const ServerName = "broker.test"

// PKI is a throw-away CA with one server and one client certificate, as PEM.
type PKI struct {
	CAPEM                  []byte
	ServerCert, ServerKey  []byte
	ClientCert, ClientKey  []byte
	CAFile, ClientPairFile string // files in Dir: the CA, and the client certificate followed by its key
	Dir                    string // a temporary directory of the test
}

// New makes a PKI valid for an hour around now, its files in a temporary
// directory of t.
func New(t testing.TB) *PKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kmirror test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	}
	p := &PKI{Dir: t.TempDir()}
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	p.ServerCert, p.ServerKey = issue(2, "broker", x509.ExtKeyUsageServerAuth, []string{ServerName})
	p.ClientCert, p.ClientKey = issue(3, "kmirror", x509.ExtKeyUsageClientAuth, nil)
	p.CAFile = WriteFile(t, p.Dir, "ca.pem", string(p.CAPEM))
	p.ClientPairFile = WriteFile(t, p.Dir, "client.pem", string(p.ClientCert)+string(p.ClientKey))
	return p
}

// WriteFile writes content to dir/name (mode 0600) and returns the path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
