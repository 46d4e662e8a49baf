package security_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
)

const encryptedKey = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"

// keyLine is a line of key's base64: an error that shows it leaks the key.
func keyLine(key []byte) string { return strings.Split(string(key), "\n")[1] }

func tlsKeys() security.Keys {
	return security.Keys{SecurityProtocol: security.ProtocolSSL, EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}, EndpointIdentificationAlgorithm: "https"}
}

// verifies reports whether roots verify server's certificate (a testpki
// server certificate, which names 127.0.0.1).
func verifies(roots *x509.CertPool, server *testpki.Cert) bool {
	_, err := server.Leaf().Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
	return err == nil
}

func TestTLSWithoutTLSIsZero(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{security.ProtocolPlaintext, security.ProtocolSASLPlaintext} {
		// Keys are ignored (not even read) when the protocol is not TLS.
		k := security.Keys{SecurityProtocol: protocol, TruststoreLocation: "/nonexistent"}
		tc, probs := k.ResolveTLS()
		if !reflect.DeepEqual(tc, security.TLS{}) || probs != nil {
			t.Errorf("%s: ResolveTLS = %+v, %v; want the zero TLS", protocol, tc, probs)
		}
	}
}

func TestTLSResolvesTrustAndKeyStores(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "security CA")
	other := testpki.New(t, "other CA")
	client := p.IssueClient(t, "kmirror")

	sys := tlsKeys()
	sys.EndpointIdentificationAlgorithm = ""
	sys.EnabledProtocols = []string{"TLSv1.3"}
	tc, err := sys.TLS()
	if err != nil || tc.Roots != nil || tc.Certificate != nil || tc.VerifyHostname ||
		tc.MinVersion != tls.VersionTLS13 || tc.MaxVersion != tls.VersionTLS13 {
		t.Errorf("system roots, TLSv1.3 only, no host check: %+v, %v", tc, err)
	}

	file := tlsKeys()
	file.TruststoreLocation, file.KeystoreLocation = p.CAFile, client.KeystoreFile
	tc, err = file.TLS()
	if err != nil || !tc.VerifyHostname || tc.MinVersion != tls.VersionTLS12 || tc.MaxVersion != tls.VersionTLS13 {
		t.Fatalf("files: %+v, %v", tc, err)
	}
	if !verifies(tc.Roots, p.Server) || verifies(tc.Roots, other.Server) {
		t.Error("the truststore file does not hold exactly the PKI's CA")
	}
	if tc.Certificate == nil || tc.Certificate.Leaf == nil || tc.Certificate.Leaf.Subject.CommonName != "kmirror" {
		t.Errorf("client certificate from the keystore file: %+v", tc.Certificate)
	}

	inline := tlsKeys()
	inline.TruststoreCertificates = string(p.CA.CertPEM) + string(other.CA.CertPEM)
	inline.KeystoreCertificateChain, inline.KeystoreKey = string(client.CertPEM), auth.NewSecret(string(client.KeyPEM))
	tc, err = inline.TLS()
	if err != nil || !verifies(tc.Roots, p.Server) || !verifies(tc.Roots, other.Server) {
		t.Fatalf("inline truststore of two CAs: %+v, %v", tc, err)
	}
	if tc.Certificate == nil || len(tc.Certificate.Certificate) != 2 {
		t.Errorf("inline keystore: %+v", tc.Certificate)
	}

	// Files are read at every call: a rotated truststore is seen.
	if err := os.WriteFile(p.CAFile, other.CA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tc, err = file.TLS()
	if err != nil || verifies(tc.Roots, p.Server) || !verifies(tc.Roots, other.Server) {
		t.Errorf("after rotating the truststore: %v", err)
	}
}

func TestTLSProblemsNameTheKey(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "problems CA")
	client := p.IssueClient(t, "kmirror")
	dir := p.Dir
	notPEM := testpki.WriteFile(t, dir, "not.pem", "hello\n")
	badCert := testpki.WriteFile(t, dir, "bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	certOnly := testpki.WriteFile(t, dir, "cert-only.pem", string(client.CertPEM))
	encrypted := testpki.WriteFile(t, dir, "enc.pem", string(client.CertPEM)+encryptedKey)
	mismatched := testpki.WriteFile(t, dir, "mismatch.pem", string(client.CertPEM)+string(p.Server.KeyPEM))
	missing := filepath.Join(dir, "missing.pem")

	with := func(set func(*security.Keys)) security.Keys {
		k := tlsKeys()
		set(&k)
		return k
	}
	for _, tc := range []struct {
		name string
		keys security.Keys
		want []string // every problem, "key: reason" prefixes
	}{
		{"truststore twice", with(func(k *security.Keys) {
			k.TruststoreLocation, k.TruststoreCertificates = p.CAFile, string(p.CA.CertPEM)
		}),
			[]string{"ssl.truststore.certificates: set either ssl.truststore.location or ssl.truststore.certificates, not both"}},
		{"truststore missing", with(func(k *security.Keys) { k.TruststoreLocation = missing }),
			[]string{"ssl.truststore.location: cannot read the truststore: open " + missing}},
		{"truststore without PEM", with(func(k *security.Keys) { k.TruststoreLocation = notPEM }),
			[]string{"ssl.truststore.location: file " + notPEM + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"}},
		{"truststore with a broken certificate", with(func(k *security.Keys) { k.TruststoreLocation = badCert }),
			[]string{"ssl.truststore.location: file " + badCert + ": PEM block 1 is not a valid certificate"}},
		{"inline truststore without PEM", with(func(k *security.Keys) { k.TruststoreCertificates = "nope" }),
			[]string{"ssl.truststore.certificates: the value holds no PEM certificate"}},
		{"keystore twice", with(func(k *security.Keys) {
			k.KeystoreLocation, k.KeystoreCertificateChain = client.KeystoreFile, string(client.CertPEM)
		}),
			[]string{"ssl.keystore.location: set either ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both"}},
		{"keystore missing", with(func(k *security.Keys) { k.KeystoreLocation = missing }),
			[]string{"ssl.keystore.location: cannot read the keystore: open " + missing}},
		{"keystore without a certificate", with(func(k *security.Keys) { k.KeystoreLocation = notPEM }),
			[]string{"ssl.keystore.location: file " + notPEM + " holds no PEM certificate"}},
		{"keystore without a key", with(func(k *security.Keys) { k.KeystoreLocation = certOnly }),
			[]string{"ssl.keystore.location: file " + certOnly + " holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- block)"}},
		{"keystore with an encrypted key", with(func(k *security.Keys) { k.KeystoreLocation = encrypted }),
			[]string{"ssl.keystore.location: file " + encrypted + " holds an encrypted private key, which is not supported"}},
		{"keystore with the key of another certificate", with(func(k *security.Keys) { k.KeystoreLocation = mismatched }),
			[]string{"ssl.keystore.location: file " + mismatched + ": certificate and private key do not form a pair"}},
		{"inline chain without key", with(func(k *security.Keys) { k.KeystoreCertificateChain = string(client.CertPEM) }),
			[]string{"ssl.keystore.key: required with ssl.keystore.certificate.chain"}},
		{"inline key without chain", with(func(k *security.Keys) { k.KeystoreKey = auth.NewSecret(string(client.KeyPEM)) }),
			[]string{"ssl.keystore.certificate.chain: required with ssl.keystore.key"}},
		{"inline key of another certificate", with(func(k *security.Keys) {
			k.KeystoreCertificateChain, k.KeystoreKey = string(client.CertPEM), auth.NewSecret(string(p.Server.KeyPEM))
		}), []string{"ssl.keystore.key: the value: certificate and private key do not form a pair"}},
		{"inline encrypted key", with(func(k *security.Keys) {
			k.KeystoreCertificateChain, k.KeystoreKey = string(client.CertPEM), auth.NewSecret(encryptedKey)
		}), []string{"ssl.keystore.key: the value holds an encrypted private key"}},
		{"key password", with(func(k *security.Keys) { k.KeyPassword = auth.NewSecret(secret) }),
			[]string{"ssl.key.password: encrypted private keys are not supported: decrypt the key"}},
		{"key password and a broken keystore", with(func(k *security.Keys) { k.KeyPassword, k.KeystoreLocation = auth.NewSecret(secret), missing }), []string{
			"ssl.key.password: encrypted private keys are not supported",
			"ssl.keystore.location: cannot read the keystore",
		}},
		{"no protocol", with(func(k *security.Keys) { k.EnabledProtocols = nil }),
			[]string{"ssl.enabled.protocols: must list at least one of TLSv1.2, TLSv1.3"}},
		{"old and unknown protocols, and a bad truststore", with(func(k *security.Keys) {
			k.EnabledProtocols, k.TruststoreLocation = []string{"TLSv1.1", "TLSv1.3", "TLS9"}, notPEM
		}), []string{
			"ssl.truststore.location: file " + notPEM + " holds no PEM certificate",
			`ssl.enabled.protocols: "TLSv1.1" is not supported: it is insecure; use TLSv1.2 and/or TLSv1.3`,
			`ssl.enabled.protocols: unknown protocol "TLS9"; valid values: TLSv1.2, TLSv1.3`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, probs := tc.keys.ResolveTLS()
			if !reflect.DeepEqual(res, security.TLS{}) {
				t.Errorf("with problems ResolveTLS returned %+v, want the zero TLS", res)
			}
			got := keysOf(probs)
			if len(probs) != len(tc.want) {
				t.Fatalf("problems:\n%s\nwant %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(probs[i].Err().Error(), w) {
					t.Errorf("problem %d = %q, want %q", i, probs[i].Err(), w)
				}
			}
			for _, leak := range []string{secret, keyLine(client.KeyPEM), keyLine(p.Server.KeyPEM), "-----END"} {
				if strings.Contains(got, leak) {
					t.Errorf("problems show key material or a secret (%.12s…):\n%s", leak, got)
				}
			}
			if _, err := tc.keys.TLS(); err == nil || err.Error() != probs[0].Err().Error() {
				t.Errorf("TLS() error = %v, want %v", err, probs[0].Err())
			}
		})
	}
}

func TestCheckTLSVersion(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"TLSv1.2", "TLSv1.3"} {
		if err := security.CheckTLSVersion(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"TLSv1":   `"TLSv1" is not supported: it is insecure; use TLSv1.2 and/or TLSv1.3`,
		"TLSv1.1": `"TLSv1.1" is not supported: it is insecure`,
		"SSLv3":   `"SSLv3" is not supported: it is insecure`,
		"tlsv1.2": `unknown protocol "tlsv1.2"; valid values: TLSv1.2, TLSv1.3`,
	} {
		if err := security.CheckTLSVersion(in); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("CheckTLSVersion(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestServerTLS(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "admin CA")
	client := p.IssueClient(t, "operator")

	if tc, probs := security.ServerTLS("", "", ""); tc != nil || probs != nil {
		t.Errorf("without a certificate: %+v, %v; want no TLS", tc, probs)
	}
	tc, probs := security.ServerTLS(p.Server.CertFile, p.Server.KeyFile, "")
	if len(probs) > 0 || len(tc.Certificates) != 1 || tc.MinVersion != tls.VersionTLS12 || tc.ClientAuth != tls.NoClientCert || tc.ClientCAs != nil {
		t.Fatalf("certificate only: %+v, %v", tc, probs)
	}
	tc, probs = security.ServerTLS(p.Server.CertFile, p.Server.KeyFile, p.CAFile)
	if len(probs) > 0 || tc.ClientAuth != tls.VerifyClientCertIfGiven || tc.ClientCAs == nil {
		t.Fatalf("with a client CA: %+v, %v", tc, probs)
	}
	if _, err := client.Leaf().Verify(x509.VerifyOptions{Roots: tc.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client CA pool does not verify the PKI's client: %v", err)
	}

	missing := filepath.Join(p.Dir, "missing")
	for _, c := range []struct {
		name              string
		cert, key, caFile string
		want              []string
	}{
		{"cert without key", p.Server.CertFile, "", "", []string{"admin.tls.key.file: required with admin.tls.cert.file"}},
		{"key without cert", "", p.Server.KeyFile, "", []string{"admin.tls.cert.file: required with admin.tls.key.file"}},
		{"client CA without TLS", "", "", p.CAFile, []string{"admin.tls.client.ca.file: needs admin.tls.cert.file and admin.tls.key.file: client certificates are verified only over TLS"}},
		{"unreadable files", missing, missing, "", []string{
			"admin.tls.cert.file: cannot read the certificate: open " + missing,
			"admin.tls.key.file: cannot read the private key: open " + missing,
		}},
		{"key that is no key, cert that is no cert", p.Server.KeyFile, p.Server.CertFile, "", []string{
			"admin.tls.cert.file: file " + p.Server.KeyFile + " holds no PEM certificate",
			"admin.tls.key.file: file " + p.Server.CertFile + " holds no PEM private key",
		}},
		{"key of another certificate", p.Server.CertFile, client.KeyFile, "", []string{"admin.tls.key.file: certificate and private key do not form a pair"}},
		{"CA file without certificates", p.Server.CertFile, p.Server.KeyFile, p.Server.KeyFile, []string{
			"admin.tls.client.ca.file: file " + p.Server.KeyFile + " holds no PEM certificate",
		}},
		{"CA file missing", p.Server.CertFile, p.Server.KeyFile, missing, []string{"admin.tls.client.ca.file: cannot read the CA file: open " + missing}},
	} {
		tc, probs := security.ServerTLS(c.cert, c.key, c.caFile)
		got := keysOf(probs)
		if tc != nil || len(probs) != len(c.want) {
			t.Errorf("%s: %+v,\n%s\nwant %q", c.name, tc, got, c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(probs[i].Err().Error(), w) {
				t.Errorf("%s: problem %d = %q, want %q", c.name, i, probs[i].Err(), w)
			}
		}
		for _, leak := range []string{keyLine(p.Server.KeyPEM), keyLine(client.KeyPEM), "-----END"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: problems show key material:\n%s", c.name, got)
			}
		}
	}
}

func TestLoadCertPool(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "pool CA")
	pool, err := security.LoadCertPool(p.CAFile)
	if err != nil || !verifies(pool, p.Server) {
		t.Fatalf("LoadCertPool = %v, %v", pool, err)
	}
	// The error names the file and the reason; the caller names the key.
	missing := filepath.Join(p.Dir, "missing")
	if _, err := security.LoadCertPool(missing); err == nil || !strings.HasPrefix(err.Error(), "cannot read the CA file: open "+missing) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := security.LoadCertPool(p.Server.KeyFile); err == nil || err.Error() != "file "+p.Server.KeyFile+" holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)" {
		t.Errorf("file without certificates: %v", err)
	}
}
