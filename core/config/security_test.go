package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/internal/testpki"
)

const secretValue = "S3cr3t-Value-4242"

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := NewSecret(secretValue)
	outs := []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v|%+v|%#v|%s|%q|%x|%X|%d", s, s, s, s, s, s, s, s),
		fmt.Sprintf("%v", struct{ P Secret }{s}), fmt.Sprintf("%+v", &struct{ P Secret }{s}), fmt.Sprintf("%#v", struct{ P Secret }{s}),
	}
	j, _ := json.Marshal(map[string]any{"p": s})
	txt, _ := s.MarshalText()
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "password", s)
	outs = append(outs, string(j), string(txt), logged.String())
	for _, o := range outs {
		if strings.Contains(o, secretValue) {
			t.Errorf("secret printed: %s", o)
		}
		if !strings.Contains(o, Redacted) {
			t.Errorf("output %q does not show that a secret is set", o)
		}
	}
	if s.Reveal() != secretValue || !s.IsSet() {
		t.Error("Reveal does not return the value")
	}
	if (Secret{}).String() != "" || (Secret{}).IsSet() {
		t.Error("an empty secret should print empty")
	}
}

// TestSecretsNotInErrors puts the secret in every secret key (and in places a
// careless parser might echo) of a configuration full of mistakes.
func TestSecretsNotInErrors(t *testing.T) {
	t.Parallel()
	var secretLines, mirrorSecretLines strings.Builder
	n := 0
	for _, k := range Keys {
		if k.Secret {
			if k.Scope != ScopeCluster {
				t.Fatalf("secret key %s is not a cluster key; extend this test", k.Name)
			}
			fmt.Fprintf(&secretLines, "  %s: %q\n", k.Name, secretValue)
			fmt.Fprintf(&mirrorSecretLines, "    %s: %q\n", k.Name, secretValue)
			n++
		}
	}
	if n < 5 {
		t.Fatalf("only %d secret keys found", n)
	}
	yaml := `
log.level: loud
destination:
  bootstrap.servers: d:9092
  security.protocol: SASL_SSL
  sasl.mechanism: SCRAM-SHA-256
` + secretLines.String() + `
state: {dir: /tmp/x}
mirrors:
  - name: m1
    bootstrap.servers: s:9092
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
` + mirrorSecretLines.String() + `  - name: m2
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.password: 42424242
    sasl.pasword: "` + secretValue + `"
  - name: m3
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: "` + secretValue + `"
  - name: m4
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required ` + secretValue + `;'
  - name: m5
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secretValue + `"'
  - name: m6
    bootstrap.servers: s:9092
    security.protocol: SSL
    ssl.keystore.certificate.chain: nope
`
	env := []string{"KMIRROR_MIRRORS__M3__SASL_USERNAME=u", "KMIRROR_MIRRORS__M1__SASL_PASSWORD=" + secretValue}
	sets := []string{secretValue, "mirrors.m2.sasl.oauthbearer.client.secret=" + secretValue, "mirrors.m6.ssl.keystore.key=" + secretValue}
	_, err := Parse([]byte(yaml), "yaml", env, sets)
	if err == nil {
		t.Fatal("the configuration is full of mistakes but parsed")
	}
	msg := err.Error()
	for _, leak := range []string{secretValue, "42424242"} {
		if strings.Contains(msg, leak) {
			t.Errorf("error message contains the secret %q:\n%s", leak, msg)
		}
	}
	// The errors are still useful: they name the keys.
	var errs *Errors
	errors.As(err, &errs)
	for _, want := range []struct{ path, reason string }{
		{"log.level", "unknown value"},
		{"mirrors[m2].sasl.password", "expected a string, got a number"},
		{"mirrors[m2].sasl.pasword", "did you mean sasl.password?"},
		{"mirrors[m3].sasl.jaas.config", "the login module is not supported"},
		{"mirrors[m4].sasl.jaas.config", "expected '=' after an option"},
		{"mirrors[m5].sasl.jaas.config", "missing the terminating ';'"},
		{"--set", "flag 1: expected key=value"},
		{"destination.ssl.key.password", "encrypted private keys are not supported"},
		{"destination.sasl.jaas.config", ""},
	} {
		if !errs.Has(want.path, want.reason) {
			t.Errorf("missing error %s: %s", want.path, want.reason)
		}
	}
}

func TestSecretsNotInOutput(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "kmirror test CA")
	client := p.IssueClient(t, "kmirror")
	pwFile := writeFile(t, p.Dir, "pw", secretValue+"-file\n")
	yaml := fmt.Sprintf(`
destination:
  bootstrap.servers: d:9092
  security.protocol: SASL_SSL
  sasl.username: kmirror
  sasl.password: %q
  ssl.truststore.certificates: |
%s
state: {dir: /tmp/x}
mirrors:
  - name: oauth
    bootstrap.servers: s:9092
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url: https://idp.example.com/token
    sasl.oauthbearer.client.id: kmirror
    sasl.oauthbearer.client.secret: %q
  - name: jaas
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.jaas.config: 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="%s";'
  - name: file
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.username: u
    sasl.password.file: %s
  - name: mtls
    bootstrap.servers: s:9092
    security.protocol: SSL
    ssl.keystore.certificate.chain: |
%s
    ssl.keystore.key: |
%s
`, secretValue, indentBy(string(p.CA.CertPEM), 6), secretValue, secretValue, pwFile, indentBy(string(client.LeafPEM), 6), indentBy(string(client.KeyPEM), 6))
	cfg := mustParse(t, yaml, nil, nil)
	keyBody := strings.Split(string(client.KeyPEM), "\n")[1] // a line of the key's base64

	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]string{
		"Summary": cfg.Summary(),
		"%v":      fmt.Sprintf("%v", cfg),
		"%+v":     fmt.Sprintf("%+v", *cfg),
		"%#v":     fmt.Sprintf("%#v", cfg),
		"JSON":    string(j),
		"Effective": func() string {
			var b strings.Builder
			for _, s := range cfg.Effective() {
				b.WriteString(s.Path + "=" + s.Value + "\n")
			}
			return b.String()
		}(),
	}
	for i := range cfg.Mirrors {
		s, err := cfg.Mirrors[i].Source.SASL()
		if err != nil {
			t.Fatalf("SASL of %s: %v", cfg.Mirrors[i].Name, err)
		}
		outs["SASL "+cfg.Mirrors[i].Name] = fmt.Sprintf("%+v %#v", s, s)
	}
	for name, out := range outs {
		for _, leak := range []string{secretValue, keyBody} {
			if strings.Contains(out, leak) {
				t.Errorf("%s output contains a secret (%.12s…):\n%s", name, leak, out)
			}
		}
	}
	if !strings.Contains(outs["Summary"], "oauth: source s:9092 (SASL_SSL, OAUTHBEARER client kmirror") ||
		!strings.Contains(outs["Summary"], "SCRAM-SHA-512 user mirror") {
		t.Errorf("Summary lacks the non-secret facts:\n%s", outs["Summary"])
	}
}

func indentBy(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

func TestSASLResolution(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pwFile := writeFile(t, dir, "pw", "first\n")
	cfg := mustParse(t, minimal+`
mirrors:
  - name: plain
    bootstrap.servers: s:1
    security.protocol: SASL_PLAINTEXT
    sasl.username: alice
    sasl.password: alice-pw
  - name: file
    bootstrap.servers: s:1
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-256
    sasl.username: bob
    sasl.password.file: `+pwFile+`
  - name: jaas
    bootstrap.servers: s:1
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: scram-sha-512
    sasl.jaas.config: >-
      org.apache.kafka.common.security.scram.ScramLoginModule required
      username="carol" password="p\"w;x" ;
  - name: jaasplain
    bootstrap.servers: s:1
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=dave password="d";'
  - name: oauth
    bootstrap.servers: s:1
    security.protocol: SASL_SSL
    sasl.mechanism: OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url: https://idp/token
    sasl.jaas.config: 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="cid" clientSecret="csec" scope="kafka";'
`, nil, nil)
	want := map[string]security.SASL{
		"plain":     {Mechanism: MechanismPlain, Username: "alice", Password: NewSecret("alice-pw")},
		"file":      {Mechanism: MechanismSCRAMSHA256, Username: "bob", Password: NewSecret("first")},
		"jaas":      {Mechanism: MechanismSCRAMSHA512, Username: "carol", Password: NewSecret(`p"w;x`)},
		"jaasplain": {Mechanism: MechanismPlain, Username: "dave", Password: NewSecret("d")},
		"oauth":     {Mechanism: MechanismOAuthBearer, OAuth: security.OAuth{TokenEndpointURL: "https://idp/token", ClientID: "cid", ClientSecret: NewSecret("csec"), Scope: "kafka"}},
	}
	for name, w := range want {
		m, _ := cfg.Mirror(name)
		got, err := m.Source.SASL()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got.Mechanism != w.Mechanism || got.Username != w.Username || got.Password.Reveal() != w.Password.Reveal() ||
			got.OAuth.TokenEndpointURL != w.OAuth.TokenEndpointURL || got.OAuth.ClientID != w.OAuth.ClientID ||
			got.OAuth.ClientSecret.Reveal() != w.OAuth.ClientSecret.Reveal() || got.OAuth.Scope != w.OAuth.Scope {
			t.Errorf("%s: SASL() = %+v (password %q), want %+v", name, got, got.Password.Reveal(), w)
		}
	}
	// A rotated password file is read again.
	if err := os.WriteFile(pwFile, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := cfg.Mirror("file")
	if got, _ := m.Source.SASL(); got.Password.Reveal() != "second" {
		t.Errorf("after rotation password = %q, want second", got.Password.Reveal())
	}
	// No SASL for PLAINTEXT.
	if got, err := cfg.Destination.SASL(); err != nil || got.Mechanism != "" {
		t.Errorf("PLAINTEXT destination SASL() = %+v, %v", got, err)
	}
}
