package kclient_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/sdk/auth"
)

// kerberosCluster writes a keytab for kmirror@EXAMPLE.COM and a krb5.conf
// whose KDC is kdc, and returns the cluster keys naming them and the
// keytab's bytes.
func kerberosCluster(t *testing.T, kdc string) (yaml string, keytabBytes []byte) {
	t.Helper()
	dir := t.TempDir()
	kt := keytab.New()
	if err := kt.AddEntry("kmirror", "EXAMPLE.COM", "keytab-password-never-shown", time.Now(), 1, etypeID.AES256_CTS_HMAC_SHA1_96); err != nil {
		t.Fatal(err)
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ktPath, confPath := filepath.Join(dir, "kmirror.keytab"), filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(ktPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("[libdefaults]\n default_realm = EXAMPLE.COM\n dns_lookup_kdc = false\n udp_preference_limit = 1\n[realms]\n EXAMPLE.COM = {\n  kdc = %s\n }\n", kdc)
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("  security.protocol: SASL_PLAINTEXT\n  sasl.mechanism: GSSAPI\n  sasl.kerberos.principal: kmirror\n  sasl.kerberos.keytab: %s\n  sasl.kerberos.krb5.conf: %s\n", ktPath, confPath), b
}

// GSSAPI needs no credentials source: the mechanism logs in with the
// keytab. A KDC that does not answer fails the authentication with
// ErrKerberosLogin, naming the request and the principal, is not taken for
// refused credentials (it is retried like an unreachable broker), and
// neither the keytab's bytes nor its key appear in the error.
func TestGSSAPILogsInWithTheKeytab(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kdc := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	keys, ktBytes := kerberosCluster(t, kdc)
	cfg := mustParse(t, "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: [\"127.0.0.1:9092\"]\n"+keys, nil, nil)

	req := auth.Request{Role: auth.RoleDestination}
	m, err := kclient.Mechanism(t.Context(), &cfg.Destination, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "GSSAPI" {
		t.Fatalf("mechanism %q; want GSSAPI", m.Name())
	}
	if _, ok := m.(sasl.ClosingMechanism); !ok {
		t.Error("the GSSAPI mechanism does not close its Kerberos client with the kgo client")
	}
	_, _, err = m.Authenticate(t.Context(), "127.0.0.1:9092")
	if !errors.Is(err, kclient.ErrKerberosLogin) {
		t.Fatalf("Authenticate with no KDC: %v; want ErrKerberosLogin", err)
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("an unreachable KDC counts as refused credentials (the partitions would fail rather than wait): %v", err)
	}
	for _, want := range []string{"destination (GSSAPI)", "kmirror", "kmirror.keytab"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	kt := keytab.New()
	if err := kt.Unmarshal(ktBytes); err != nil {
		t.Fatal(err)
	}
	for _, e := range kt.Entries {
		for _, enc := range []string{string(e.Key.KeyValue), hex.EncodeToString(e.Key.KeyValue), base64.StdEncoding.EncodeToString(e.Key.KeyValue)} {
			if strings.Contains(err.Error(), enc) {
				t.Fatalf("the error shows the keytab's key: %v", err)
			}
		}
	}
	if strings.Contains(err.Error(), "keytab-password-never-shown") {
		t.Fatalf("the error shows the password: %v", err)
	}
	m.(sasl.ClosingMechanism).Close()
}
