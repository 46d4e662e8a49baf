// Package testpki makes throw-away certificate authorities for kmirror's
// tests: a CA (ECDSA P-256, valid from an hour ago for a day), server and
// client certificates it issues, as crypto/tls values, PEM and files.
//
// It is the one test PKI of the module: e2e/kafkatest gives its clusters
// TLS with it, and the tests of the admin API, cmd, config and kclient use
// New. NewCA, IssueServer, IssueClient and WriteFiles return errors
// (kafkatest calls them outside a test); New, PKI.IssueServer and
// PKI.IssueClient take the test's testing.TB and fail it instead.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority generated for tests (ECDSA P-256, valid for a
// day). A cluster with TLS has its own; tests can make another one to prove
// that certificates from a foreign CA are refused.
type CA struct {
	// Name is the CA's common name.
	Name string
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert in PEM form (what a PEM truststore holds).
	CertPEM []byte

	key *ecdsa.PrivateKey
}

// Cert is a certificate with its private key, issued by a CA.
type Cert struct {
	// Name is the certificate's common name (CN=Name).
	Name string
	// TLS holds the certificate chain and key for crypto/tls.
	TLS tls.Certificate
	// CertPEM is the certificate chain (leaf, then CA) in PEM form.
	CertPEM []byte
	// LeafPEM is the leaf certificate alone in PEM form.
	LeafPEM []byte
	// KeyPEM is the private key, unencrypted PKCS#8 in PEM form.
	KeyPEM []byte
	// CertFile, KeyFile and KeystoreFile are set once the certificate is
	// written with WriteFiles; KeystoreFile holds the key and the chain, as
	// a Kafka PEM keystore (ssl.keystore.type=PEM) expects.
	CertFile, KeyFile, KeystoreFile string
}

// Leaf returns the parsed leaf certificate.
func (c *Cert) Leaf() *x509.Certificate { return c.TLS.Leaf }

// NewCA generates a CA with the given common name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generate key of CA %q: %w", name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kmirror tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testpki: self-sign CA %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testpki: parse CA %q: %w", name, err)
	}
	return &CA{
		Name:    name,
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:     key,
	}, nil
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer issues a server certificate with CN=name for hosts, each an
// IP address or a DNS name; without hosts, for 127.0.0.1, ::1 and
// localhost.
func (ca *CA) IssueServer(name string, hosts ...string) (*Cert, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	return ca.issue(name, x509.ExtKeyUsageServerAuth, hosts)
}

// IssueClient issues a client certificate with CN=name.
func (ca *CA) IssueClient(name string) (*Cert, error) {
	return ca.issue(name, x509.ExtKeyUsageClientAuth, nil)
}

func (ca *CA) issue(name string, usage x509.ExtKeyUsage, hosts []string) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generate key of certificate %q: %w", name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// Only a CN, so the broker sees the DN "CN=<name>" and the
		// principal mapping rule turns it into User:<name>.
		Subject:     pkix.Name{CommonName: name},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("testpki: sign certificate %q with CA %q: %w", name, ca.Name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testpki: parse certificate %q: %w", name, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testpki: encode key of certificate %q: %w", name, err)
	}
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain := append(append([]byte{}, leafPEM...), ca.CertPEM...)
	return &Cert{
		Name: name,
		TLS: tls.Certificate{
			Certificate: [][]byte{der, ca.Cert.Raw},
			PrivateKey:  key,
			Leaf:        leaf,
		},
		CertPEM: chain,
		LeafPEM: leafPEM,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}, nil
}

// WriteFiles writes the CA certificate to dir/<name>.pem and returns its path.
func (ca *CA) WriteFiles(dir string) (string, error) {
	p := filepath.Join(dir, ca.Name+".pem")
	if err := os.WriteFile(p, ca.CertPEM, 0o600); err != nil {
		return "", fmt.Errorf("testpki: write CA certificate: %w", err)
	}
	return p, nil
}

// WriteFiles writes <name>.crt (chain), <name>.key and <name>.keystore.pem
// (key then chain) into dir and records their paths in c.
func (c *Cert) WriteFiles(dir string) error {
	base := filepath.Join(dir, c.Name)
	files := []struct {
		path string
		data []byte
	}{
		{base + ".crt", c.CertPEM},
		{base + ".key", c.KeyPEM},
		{base + ".keystore.pem", append(append([]byte{}, c.KeyPEM...), c.CertPEM...)},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return fmt.Errorf("testpki: write certificate %q: %w", c.Name, err)
		}
	}
	c.CertFile, c.KeyFile, c.KeystoreFile = files[0].path, files[1].path, files[2].path
	return nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate serial number: %w", err)
	}
	return n, nil
}

// PKI is a CA, a server certificate for the loopback addresses and files
// for both in Dir, made for one test.
type PKI struct {
	CA     *CA
	CAFile string // the CA certificate in PEM form, Dir/ca.pem
	// Server has CN=server and names 127.0.0.1, ::1 and localhost; its
	// files are in Dir.
	Server *Cert
	Dir    string // a temporary directory of the test
}

// New makes a PKI whose CA is named caName. Give two PKIs of one test
// different names: a TLS client picks the certificate to send by its
// issuer's name.
func New(t testing.TB, caName string) *PKI {
	t.Helper()
	ca, err := NewCA(caName)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{CA: ca, Dir: t.TempDir()}
	p.CAFile = WriteFile(t, p.Dir, "ca.pem", string(ca.CertPEM))
	if p.Server, err = ca.IssueServer("server"); err != nil {
		t.Fatal(err)
	}
	if err := p.Server.WriteFiles(p.Dir); err != nil {
		t.Fatal(err)
	}
	return p
}

// IssueClient issues a client certificate with CN=cn and writes its files
// in p.Dir.
func (p *PKI) IssueClient(t testing.TB, cn string) *Cert {
	t.Helper()
	c, err := p.CA.IssueClient(cn)
	return p.written(t, c, err)
}

// IssueServer issues another server certificate with CN=name for hosts (as
// CA.IssueServer: the loopback addresses without hosts) and writes its files
// in p.Dir. A certificate for a DNS name only lets a test prove that a
// client dialing 127.0.0.1 checks the name.
func (p *PKI) IssueServer(t testing.TB, name string, hosts ...string) *Cert {
	t.Helper()
	c, err := p.CA.IssueServer(name, hosts...)
	return p.written(t, c, err)
}

// written writes the files of c, just issued with err, in p.Dir; it fails
// t on either error.
func (p *PKI) written(t testing.TB, c *Cert, err error) *Cert {
	t.Helper()
	if err == nil {
		err = c.WriteFiles(p.Dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
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
