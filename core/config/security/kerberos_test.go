package security_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/sdk/auth"
)

// kerberosFiles writes a keytab (its header and a secret, as a real keytab
// holds key bytes) and a krb5.conf, and returns their paths.
func kerberosFiles(t *testing.T) (keytab, krb5conf string) {
	t.Helper()
	dir := t.TempDir()
	keytab, krb5conf = filepath.Join(dir, "kmirror.keytab"), filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(keytab, append([]byte{5, 2}, secret...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(krb5conf, []byte("[libdefaults]\n default_realm = EXAMPLE.COM\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return keytab, krb5conf
}

func gssapiKeys(keytab, krb5conf string) security.Keys {
	k := saslKeys(security.MechanismGSSAPI)
	k.KerberosServiceName, k.KerberosPrincipal, k.KerberosKeytab, k.KerberosKrb5Conf = "kafka", "kmirror@EXAMPLE.COM", keytab, krb5conf
	return k
}

// The flat keys and a Krb5LoginModule line resolve to the same settings.
func TestKerberosFromKeysOrJAAS(t *testing.T) {
	t.Parallel()
	keytab, krb5conf := kerberosFiles(t)
	want := security.Kerberos{ServiceName: "kafka", Principal: "kmirror@EXAMPLE.COM", KeytabFile: keytab, Krb5ConfFile: krb5conf}

	s, err := func() (security.SASL, error) { k := gssapiKeys(keytab, krb5conf); return k.SASL() }()
	if err != nil || s.Mechanism != security.MechanismGSSAPI || s.Kerberos != want {
		t.Fatalf("flat keys: %+v, %v; want %+v", s.Kerberos, err, want)
	}

	k := jaas(security.MechanismGSSAPI, `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="`+keytab+`" principal="kmirror@EXAMPLE.COM" serviceName="kafka";`)
	k.KerberosKrb5Conf = krb5conf
	s, err = k.SASL()
	if err != nil || s.Kerberos != want {
		t.Fatalf("JAAS: %+v, %v; want %+v", s.Kerberos, err, want)
	}
	if got := strings.Join(k.Describe(), " "); got != "SASL_SSL GSSAPI principal kmirror@EXAMPLE.COM system CAs no hostname verification" {
		t.Errorf("Describe = %q", got)
	}
}

// Each mistake is reported on the key at fault, and no problem shows what
// the keytab holds.
func TestKerberosProblemsNameTheKey(t *testing.T) {
	t.Parallel()
	keytab, krb5conf := kerberosFiles(t)
	notKeytab := filepath.Join(t.TempDir(), "not.keytab")
	if err := os.WriteFile(notKeytab, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		edit      func(*security.Keys)
		key, want string
	}{
		{"no principal", func(k *security.Keys) { k.KerberosPrincipal = "" }, "sasl.kerberos.principal", "required for GSSAPI"},
		{"bad principal", func(k *security.Keys) { k.KerberosPrincipal = "a@b@c" }, "sasl.kerberos.principal", "is not a Kerberos principal"},
		{"no keytab", func(k *security.Keys) { k.KerberosKeytab = "" }, "sasl.kerberos.keytab", "required for GSSAPI"},
		{"missing keytab", func(k *security.Keys) { k.KerberosKeytab += ".missing" }, "sasl.kerberos.keytab", "cannot read the keytab"},
		{"not a keytab", func(k *security.Keys) { k.KerberosKeytab = notKeytab }, "sasl.kerberos.keytab", "is not a keytab"},
		{"missing krb5.conf", func(k *security.Keys) { k.KerberosKrb5Conf += ".missing" }, "sasl.kerberos.krb5.conf", "cannot read the Kerberos configuration"},
		{"service with host", func(k *security.Keys) { k.KerberosServiceName = "kafka/broker1" }, "sasl.kerberos.service.name", "is not a service name"},
		{"password too", func(k *security.Keys) { k.SASLPassword = auth.NewSecret(secret) }, "sasl.password", "does not apply to GSSAPI"},
		{"auth plugin", func(k *security.Keys) {
			k.KerberosPrincipal, k.KerberosKeytab, k.SASLCredentialsPlugin = "", "", "vault"
		}, "sasl.credentials.plugin", "GSSAPI logs in with a keytab"},
		{"ticket cache", func(k *security.Keys) {
			k.KerberosPrincipal, k.KerberosKeytab = "", ""
			k.SASLJAASConfig = auth.NewSecret(`com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true principal="kmirror";`)
		}, "sasl.jaas.config", "useTicketCache=true"},
		{"keytab twice", func(k *security.Keys) {
			k.SASLJAASConfig = auth.NewSecret(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="` + keytab + `";`)
		}, "sasl.jaas.config", "sets keyTab, which a sasl.kerberos.* key sets too"},
		{"JAAS of another mechanism", func(k *security.Keys) {
			k.SASLJAASConfig = auth.NewSecret(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secret + `";`)
		}, "sasl.jaas.config", "login module PlainLoginModule does not match sasl.mechanism GSSAPI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := gssapiKeys(keytab, krb5conf)
			tc.edit(&k)
			_, probs := k.ResolveSASL()
			var found bool
			for _, p := range probs {
				if strings.Contains(p.Reason, secret) {
					t.Errorf("a problem shows the secret: %v", p.Err())
				}
				found = found || (p.Key == tc.key && strings.Contains(p.Reason, tc.want))
			}
			if !found {
				t.Errorf("problems:\n%s\nwant one on %s containing %q", keysOf(probs), tc.key, tc.want)
			}
		})
	}
}

// Kerberos keys on a cluster of another mechanism are a mistake, said.
func TestKerberosKeysNeedGSSAPI(t *testing.T) {
	t.Parallel()
	k := saslKeys(security.MechanismSCRAMSHA512)
	k.SASLUsername, k.SASLPassword, k.KerberosPrincipal = "u", auth.NewSecret(secret), "kmirror"
	_, probs := k.ResolveSASL()
	if got := keysOf(probs); got != "sasl.kerberos.principal: applies to GSSAPI only, but sasl.mechanism is SCRAM-SHA-512" {
		t.Errorf("problems %q", got)
	}
}
