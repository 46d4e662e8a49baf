package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pki is a throw-away CA with one server and one client certificate, as PEM.
type pki struct {
	caPEM                  []byte
	serverCert, serverKey  []byte
	clientCert, clientKey  []byte
	caFile, clientPairFile string // files in a temp dir
	dir                    string
}

func newPKI(t *testing.T) *pki {
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
	p := &pki{dir: t.TempDir()}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	p.serverCert, p.serverKey = issue(2, "broker", x509.ExtKeyUsageServerAuth, []string{"broker.test"})
	p.clientCert, p.clientKey = issue(3, "kmirror", x509.ExtKeyUsageClientAuth, nil)
	p.caFile = writeFile(t, p.dir, "ca.pem", string(p.caPEM))
	p.clientPairFile = writeFile(t, p.dir, "client.pem", string(p.clientCert)+string(p.clientKey))
	return p
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// minimal is the smallest valid configuration.
const minimal = `
destination:
  bootstrap.servers: dst:9092
state:
  dir: /tmp/kmirror-state-test
`

func mustParse(t *testing.T, yaml string, env, sets []string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(yaml), "yaml", env, sets)
	if err != nil {
		t.Fatalf("Parse failed:\n%v\n--- input ---\n%s", err, yaml)
	}
	return cfg
}

// parseErrs parses and returns the *Errors, failing the test if there is none.
func parseErrs(t *testing.T, yaml string, env, sets []string) *Errors {
	t.Helper()
	_, err := Parse([]byte(yaml), "yaml", env, sets)
	if err == nil {
		t.Fatalf("Parse succeeded, want errors; input:\n%s", yaml)
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T is not *Errors: %v", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) is false")
	}
	return errs
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
