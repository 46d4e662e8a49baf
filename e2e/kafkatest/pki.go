package kafkatest

import (
	"bytes"
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
		return nil, fmt.Errorf("kafkatest: generate key of CA %q: %w", name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kmirror e2e"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: self-sign CA %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: parse CA %q: %w", name, err)
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

// IssueServer issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) IssueServer(name string) (*Cert, error) {
	return ca.issue(name, x509.ExtKeyUsageServerAuth, true)
}

// IssueClient issues a client certificate with CN=name.
func (ca *CA) IssueClient(name string) (*Cert, error) {
	return ca.issue(name, x509.ExtKeyUsageClientAuth, false)
}

func (ca *CA) issue(name string, usage x509.ExtKeyUsage, server bool) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: generate key of certificate %q: %w", name, err)
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
	if server {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: sign certificate %q with CA %q: %w", name, ca.Name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: parse certificate %q: %w", name, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: encode key of certificate %q: %w", name, err)
	}
	var chain bytes.Buffer
	_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain.Write(ca.CertPEM)
	return &Cert{
		Name: name,
		TLS: tls.Certificate{
			Certificate: [][]byte{der, ca.Cert.Raw},
			PrivateKey:  key,
			Leaf:        leaf,
		},
		CertPEM: chain.Bytes(),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}, nil
}

// WriteFiles writes the CA certificate to dir/<name>.pem and returns its path.
func (ca *CA) WriteFiles(dir string) (string, error) {
	p := filepath.Join(dir, ca.Name+".pem")
	if err := os.WriteFile(p, ca.CertPEM, 0o600); err != nil {
		return "", fmt.Errorf("kafkatest: write CA certificate: %w", err)
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
			return fmt.Errorf("kafkatest: write certificate %q: %w", c.Name, err)
		}
	}
	c.CertFile, c.KeyFile, c.KeystoreFile = files[0].path, files[1].path, files[2].path
	return nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("kafkatest: certificate serial number: %w", err)
	}
	return n, nil
}
