package config

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/testpki"
)

func TestAdminDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, minimal, nil, nil)
	if cfg.AdminAddress != "127.0.0.1:9645" {
		t.Errorf("admin.address = %q, want 127.0.0.1:9645", cfg.AdminAddress)
	}
	if !cfg.AdminUsesToken() || cfg.AdminUsesTLS() || cfg.AdminUsesClientCerts() {
		t.Errorf("defaults: token %v, TLS %v, client certs %v; want token only", cfg.AdminUsesToken(), cfg.AdminUsesTLS(), cfg.AdminUsesClientCerts())
	}
	if got, want := cfg.AdminTokenPath(), filepath.Join("/tmp/kmirror-state-test", "admin.token"); got != want {
		t.Errorf("AdminTokenPath = %q, want %q", got, want)
	}
	if tc, err := cfg.AdminServerTLS(); tc != nil || err != nil {
		t.Errorf("AdminServerTLS without TLS keys = %v, %v; want nil, nil", tc, err)
	}
	if !strings.Contains(cfg.Summary(), "admin http://127.0.0.1:9645 (token /tmp/kmirror-state-test/admin.token)") {
		t.Errorf("summary lacks the admin API:\n%s", cfg.Summary())
	}
	off := mustParse(t, minimal+"admin.address: \"\"\n", nil, nil)
	if off.AdminAddress != "" || !strings.Contains(off.Summary(), "admin off") {
		t.Errorf("admin.address \"\": %q, summary:\n%s", off.AdminAddress, off.Summary())
	}
}

func TestAdminNonLoopbackNeedsAuthentication(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := writeFile(t, dir, "token", "s3cr3t-admin-token\n")
	p := testpki.New(t, "kmirror test CA")
	srvCert := writeFile(t, dir, "srv.pem", string(p.Server.LeafPEM))
	srvKey := writeFile(t, dir, "srv.key", string(p.Server.KeyPEM))
	for _, addr := range []string{"0.0.0.0:9645", ":9645", "10.1.2.3:9645", "admin.example.com:9645", "[::]:9645"} {
		errs := parseErrs(t, minimal+"admin.address: \""+addr+"\"\n", nil, nil)
		if !errs.Has("admin.address", "off by default on non-loopback addresses") {
			t.Errorf("%s: errors lack the exposure rule:\n%s", addr, errs)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:9645", "[::1]:9645", "127.0.0.2:9645"} {
		mustParse(t, minimal+"admin.address: \""+addr+"\"\n", nil, nil)
	}
	// A token file opens non-loopback addresses only over TLS: a token
	// must not cross the network in clear text (refused, not warned).
	errs := parseErrs(t, minimal+"admin.address: 0.0.0.0:9645\nadmin.token.file: "+token+"\n", nil, nil)
	if !errs.Has("admin.address", "off loopback the admin API needs TLS") {
		t.Errorf("a token without TLS off loopback: %s", errs)
	}
	cfg := mustParse(t, minimal+"admin.address: 0.0.0.0:9645\nadmin.token.file: "+token+"\nadmin.tls.cert.file: "+srvCert+"\nadmin.tls.key.file: "+srvKey+"\n", nil, nil)
	if cfg.AdminTokenPath() != token || !cfg.AdminUsesToken() {
		t.Errorf("token path %q", cfg.AdminTokenPath())
	}
	// A client certificate CA too.
	cfg = mustParse(t, minimal+"admin.address: 0.0.0.0:9645\nadmin.tls.cert.file: "+srvCert+"\nadmin.tls.key.file: "+srvKey+"\nadmin.tls.client.ca.file: "+p.CAFile+"\n", nil, nil)
	if cfg.AdminUsesToken() || cfg.AdminTokenPath() != "" || !cfg.AdminUsesClientCerts() {
		t.Errorf("mTLS alone: uses token %v (path %q), client certs %v", cfg.AdminUsesToken(), cfg.AdminTokenPath(), cfg.AdminUsesClientCerts())
	}
	tc, err := cfg.AdminServerTLS()
	if err != nil || len(tc.Certificates) != 1 || tc.ClientCAs == nil || tc.ClientAuth != tls.VerifyClientCertIfGiven || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("AdminServerTLS = %+v, %v", tc, err)
	}
	// Both: both are required.
	cfg = mustParse(t, minimal+"admin.address: 0.0.0.0:9645\nadmin.token.file: "+token+"\nadmin.tls.cert.file: "+srvCert+"\nadmin.tls.key.file: "+srvKey+"\nadmin.tls.client.ca.file: "+p.CAFile+"\n", nil, nil)
	if !cfg.AdminUsesToken() || !cfg.AdminUsesClientCerts() {
		t.Errorf("token and mTLS: token %v, client certs %v", cfg.AdminUsesToken(), cfg.AdminUsesClientCerts())
	}
	if s := cfg.Summary(); !strings.Contains(s, "admin https://0.0.0.0:9645 (token "+token+" + client certificates)") || strings.Contains(s, "s3cr3t") {
		t.Errorf("summary:\n%s", s)
	}
	// An allow list of subjects needs client certificates.
	errs = parseErrs(t, minimal+"admin.tls.client.subjects: [\"CN=ops\"]\n", nil, nil)
	if !errs.Has("admin.tls.client.subjects", "needs admin.tls.client.ca.file") {
		t.Errorf("subjects without a client CA: %s", errs)
	}
	cfg = mustParse(t, minimal+"admin.address: 0.0.0.0:9645\nadmin.tls.cert.file: "+srvCert+"\nadmin.tls.key.file: "+srvKey+"\nadmin.tls.client.ca.file: "+p.CAFile+"\nadmin.tls.client.subjects: [\"ops\", \"CN=deploy-.*,O=Example\"]\n", nil, nil)
	if !cfg.AdminTLSClientSubjects.Match("ops") || cfg.AdminTLSClientSubjects.Match("opsx") {
		t.Errorf("subjects %v", cfg.AdminTLSClientSubjects)
	}
}

func TestAdminTLSAndTokenProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := testpki.New(t, "kmirror test CA")
	client := p.IssueClient(t, "kmirror")
	srvCert := writeFile(t, dir, "srv.pem", string(p.Server.LeafPEM))
	srvKey := writeFile(t, dir, "srv.key", string(p.Server.KeyPEM))
	otherKey := writeFile(t, dir, "other.key", string(client.KeyPEM))
	empty := writeFile(t, dir, "empty", "\n  \n")
	twoWords := writeFile(t, dir, "two", "secret-one secret-two\n")
	cases := []struct {
		name, yaml, key, want string
	}{
		{"cert without key", "admin.tls.cert.file: " + srvCert + "\n", "admin.tls.key.file", "required with admin.tls.cert.file"},
		{"key without cert", "admin.tls.key.file: " + srvKey + "\n", "admin.tls.cert.file", "required with admin.tls.key.file"},
		{"client CA without TLS", "admin.tls.client.ca.file: " + p.CAFile + "\n", "admin.tls.client.ca.file", "verified only over TLS"},
		{"missing cert file", "admin.tls.cert.file: /nonexistent/srv.pem\nadmin.tls.key.file: " + srvKey + "\n", "admin.tls.cert.file", "/nonexistent/srv.pem"},
		{"key that is no key", "admin.tls.cert.file: " + srvCert + "\nadmin.tls.key.file: " + srvCert + "\n", "admin.tls.key.file", "holds no PEM private key"},
		{"key of another cert", "admin.tls.cert.file: " + srvCert + "\nadmin.tls.key.file: " + otherKey + "\n", "admin.tls.key.file", "do not form a pair"},
		{"CA file without certs", "admin.tls.cert.file: " + srvCert + "\nadmin.tls.key.file: " + srvKey + "\nadmin.tls.client.ca.file: " + srvKey + "\n", "admin.tls.client.ca.file", "holds no PEM certificate"},
		{"missing token file", "admin.token.file: /nonexistent/token\n", "admin.token.file", "/nonexistent/token"},
		{"empty token file", "admin.token.file: " + empty + "\n", "admin.token.file", "is empty"},
		{"token file with two words", "admin.token.file: " + twoWords + "\n", "admin.token.file", "more than one word"},
		{"address without port", "admin.address: localhost\n", "admin.address", "is not host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := parseErrs(t, minimal+tc.yaml, nil, nil)
			if !errs.Has(tc.key, tc.want) {
				t.Fatalf("want %s: …%s…; got:\n%s", tc.key, tc.want, indent(errs.Error()))
			}
			keyBody := strings.Split(string(p.Server.KeyPEM), "\n")[1]
			if strings.Contains(errs.Error(), "secret-one") || strings.Contains(errs.Error(), keyBody[:20]) || strings.Contains(errs.Error(), "-----END") {
				t.Fatalf("errors show file content:\n%s", errs)
			}
		})
	}
}

func TestAdminKeysFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, minimal, []string{"KMIRROR_ADMIN_ADDRESS=127.0.0.1:1234", "KMIRROR_ADMIN_TOKEN_FILE=" + writeFile(t, t.TempDir(), "t", "x")}, nil)
	if cfg.AdminAddress != "127.0.0.1:1234" || cfg.AdminTokenFile == "" {
		t.Fatalf("env overrides: %q %q", cfg.AdminAddress, cfg.AdminTokenFile)
	}
}
