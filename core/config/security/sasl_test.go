package security_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/sdk/auth"
)

// secret is a password that must never appear in an error or a description.
const secret = "s3cr3t-never-shown"

func saslKeys(mechanism string) security.Keys {
	return security.Keys{SecurityProtocol: security.ProtocolSASLSSL, SASLMechanism: mechanism}
}

// jaas is keys for mechanism with sasl.jaas.config set to config.
func jaas(mechanism, config string) security.Keys {
	k := saslKeys(mechanism)
	k.SASLJAASConfig = auth.NewSecret(config)
	return k
}

// keysOf renders problems as "key: reason" lines.
func keysOf(probs []security.Problem) string {
	var lines []string
	for _, p := range probs {
		lines = append(lines, p.Err().Error())
	}
	return strings.Join(lines, "\n")
}

func TestProtocols(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protocol  string
		tls, sasl bool
	}{
		{security.ProtocolPlaintext, false, false},
		{security.ProtocolSSL, true, false},
		{security.ProtocolSASLPlaintext, false, true},
		{security.ProtocolSASLSSL, true, true},
	} {
		k := security.Keys{SecurityProtocol: tc.protocol}
		if k.UsesTLS() != tc.tls || k.UsesSASL() != tc.sasl {
			t.Errorf("%s: UsesTLS %v, UsesSASL %v; want %v, %v", tc.protocol, k.UsesTLS(), k.UsesSASL(), tc.tls, tc.sasl)
		}
	}
}

func TestProblemErrNamesTheKey(t *testing.T) {
	t.Parallel()
	if got := (security.Problem{Key: "sasl.username", Reason: "required"}).Err().Error(); got != "sasl.username: required" {
		t.Errorf("Err() = %q", got)
	}
}

func TestSASLWithoutSASLIsZero(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{security.ProtocolPlaintext, security.ProtocolSSL} {
		// Credentials are ignored when the protocol does not authenticate.
		k := security.Keys{SecurityProtocol: protocol, SASLMechanism: security.MechanismPlain, SASLUsername: "u"}
		s, probs := k.ResolveSASL()
		if !reflect.DeepEqual(s, security.SASL{}) || probs != nil {
			t.Errorf("%s: ResolveSASL = %+v, %v; want the zero SASL", protocol, s, probs)
		}
	}
}

func TestSASLUsernameAndPassword(t *testing.T) {
	t.Parallel()
	k := saslKeys(security.MechanismSCRAMSHA512)
	k.SASLUsername, k.SASLPassword = "alice", auth.NewSecret(secret)
	s, err := k.SASL()
	if err != nil || s.Mechanism != security.MechanismSCRAMSHA512 || s.Username != "alice" || s.Password.Reveal() != secret {
		t.Fatalf("SASL = %+v (password %q), %v", s, s.Password.Reveal(), err)
	}
}

// TestSASLPasswordFileIsReadAtEveryCall: the file's trailing newline is not
// part of the password, and a rotated password is seen by the next call.
func TestSASLPasswordFileIsReadAtEveryCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(pw, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k := saslKeys(security.MechanismPlain)
	k.SASLUsername, k.SASLPasswordFile = "alice", pw
	write("first\r\n")
	if s, err := k.SASL(); err != nil || s.Password.Reveal() != "first" {
		t.Fatalf("SASL = %q, %v", s.Password.Reveal(), err)
	}
	write("second")
	if s, err := k.SASL(); err != nil || s.Password.Reveal() != "second" {
		t.Fatalf("after rotation SASL = %q, %v", s.Password.Reveal(), err)
	}
	write("\n")
	if _, err := k.SASL(); err == nil || err.Error() != "sasl.password.file: password file "+pw+" is empty" {
		t.Errorf("empty file: %v", err)
	}
	k.SASLPasswordFile = filepath.Join(dir, "missing")
	if _, err := k.SASL(); err == nil || !strings.HasPrefix(err.Error(), "sasl.password.file: cannot read the password file: open "+k.SASLPasswordFile) {
		t.Errorf("missing file: %v", err)
	}
}

func TestSASLProblemsNameTheKey(t *testing.T) {
	t.Parallel()
	with := func(mechanism string, set func(*security.Keys)) security.Keys {
		k := saslKeys(mechanism)
		set(&k)
		return k
	}
	for _, tc := range []struct {
		name string
		keys security.Keys
		want []string // every problem, "key: reason" prefixes
	}{
		{"no credentials", saslKeys(security.MechanismPlain),
			[]string{"sasl.username: SASL PLAIN needs credentials: set sasl.username with sasl.password or sasl.password.file, or sasl.jaas.config"}},
		{"password without username", with(security.MechanismPlain, func(k *security.Keys) { k.SASLPassword = auth.NewSecret(secret) }),
			[]string{"sasl.username: required with sasl.password or sasl.password.file"}},
		{"username without password", with(security.MechanismSCRAMSHA256, func(k *security.Keys) { k.SASLUsername = "u" }),
			[]string{"sasl.password: required with sasl.username (or set sasl.password.file)"}},
		{"password and password file", with(security.MechanismPlain, func(k *security.Keys) {
			k.SASLUsername, k.SASLPassword, k.SASLPasswordFile = "u", auth.NewSecret(secret), "/pw"
		}), []string{"sasl.password.file: set either sasl.password or sasl.password.file, not both"}},
		{"JAAS and username", with(security.MechanismPlain, func(k *security.Keys) {
			k.SASLUsername, k.SASLJAASConfig = "u", auth.NewSecret(`PlainLoginModule required username="u" password="`+secret+`";`)
		}), []string{"sasl.jaas.config: set either sasl.jaas.config or sasl.username with sasl.password (or sasl.password.file), not both"}},
		{"OAuth keys with PLAIN", with(security.MechanismPlain, func(k *security.Keys) {
			k.SASLUsername, k.SASLPassword, k.OAuthScope, k.OAuthClientID = "u", auth.NewSecret(secret), "s", "c"
		}), []string{"sasl.oauthbearer.client.id: applies to OAUTHBEARER only, but sasl.mechanism is PLAIN"}},
		{"OAuth without anything", saslKeys(security.MechanismOAuthBearer), []string{
			"sasl.oauthbearer.token.endpoint.url: required for OAUTHBEARER: the token endpoint of the client-credentials flow",
			"sasl.oauthbearer.client.id: required for OAUTHBEARER (or clientId in sasl.jaas.config)",
			"sasl.oauthbearer.client.secret: required for OAUTHBEARER (or clientSecret in sasl.jaas.config)",
		}},
		{"user keys with OAuth", with(security.MechanismOAuthBearer, func(k *security.Keys) {
			k.SASLUsername, k.SASLPassword = "u", auth.NewSecret(secret)
			k.OAuthTokenEndpointURL, k.OAuthClientID, k.OAuthClientSecret = "https://idp/t", "c", auth.NewSecret(secret)
		}), []string{"sasl.password: applies to PLAIN and SCRAM only, but sasl.mechanism is OAUTHBEARER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, probs := tc.keys.ResolveSASL()
			if !reflect.DeepEqual(s, security.SASL{}) {
				t.Errorf("with problems ResolveSASL returned %+v, want the zero SASL", s)
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
			if strings.Contains(got, secret) {
				t.Errorf("problems show the secret:\n%s", got)
			}
			// SASL reports the first problem.
			if _, err := tc.keys.SASL(); err == nil || err.Error() != probs[0].Err().Error() {
				t.Errorf("SASL() error = %v, want %v", err, probs[0].Err())
			}
		})
	}
}

func TestSASLOAuth(t *testing.T) {
	t.Parallel()
	k := saslKeys(security.MechanismOAuthBearer)
	k.OAuthTokenEndpointURL, k.OAuthClientID, k.OAuthClientSecret, k.OAuthScope = "https://idp/token", "kmirror", auth.NewSecret(secret), "kafka"
	s, err := k.SASL()
	if err != nil || s.Mechanism != security.MechanismOAuthBearer || s.Username != "" ||
		s.OAuth.TokenEndpointURL != "https://idp/token" || s.OAuth.ClientID != "kmirror" || s.OAuth.ClientSecret.Reveal() != secret || s.OAuth.Scope != "kafka" {
		t.Fatalf("SASL = %+v, %v", s, err)
	}

	// The client id, secret and scope may come from sasl.jaas.config.
	k = jaas(security.MechanismOAuthBearer, `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="kmirror" clientSecret="`+secret+`" scope=kafka;`)
	k.OAuthTokenEndpointURL = "https://idp/token"
	s, err = k.SASL()
	if err != nil || s.OAuth.ClientID != "kmirror" || s.OAuth.ClientSecret.Reveal() != secret || s.OAuth.Scope != "kafka" {
		t.Fatalf("SASL from JAAS = %+v, %v", s, err)
	}

	// But not from both places.
	k.OAuthClientID, k.OAuthClientSecret = "other", auth.NewSecret("other-"+secret)
	_, probs := k.ResolveSASL()
	got := keysOf(probs)
	for _, want := range []string{
		"sasl.jaas.config: sets clientId, which sasl.oauthbearer.* also sets; keep one",
		"sasl.jaas.config: sets clientSecret, which sasl.oauthbearer.client.secret also sets; keep one",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, secret) {
		t.Errorf("problems show the secret:\n%s", got)
	}
}

func TestJAASCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mechanism, config string
		user, password          string
	}{
		{"quoted", security.MechanismPlain,
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="pw";`, "alice", "pw"},
		{"bare words", security.MechanismSCRAMSHA256,
			`org.apache.kafka.common.security.scram.ScramLoginModule required username=alice password=pw;`, "alice", "pw"},
		{"escapes", security.MechanismSCRAMSHA512,
			`ScramLoginModule required username="al ice" password="a\"b\\c=;d";`, "al ice", `a"b\c=;d`},
		{"shaded class, other flag, white space", security.MechanismPlain,
			"\n  shaded.org.apache.kafka.common.security.plain.PlainLoginModule\tREQUISITE\n  username = \"alice\"\n  password=\"pw\"\n  ;\n", "alice", "pw"},
		{"unknown options kept aside", security.MechanismPlain,
			`PlainLoginModule optional username="alice" password="pw" serviceName="kafka";`, "alice", "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := jaas(tc.mechanism, tc.config)
			s, err := k.SASL()
			if err != nil || s.Mechanism != tc.mechanism || s.Username != tc.user || s.Password.Reveal() != tc.password {
				t.Fatalf("SASL = %+v (password %q), %v", s, s.Password.Reveal(), err)
			}
		})
	}
}

// TestJAASErrors: every error names sasl.jaas.config and says what is wrong
// and where, without the password, and without an option name that is not
// a known one (it may be a password typed without its key).
func TestJAASErrors(t *testing.T) {
	t.Parallel()
	const format = `the format is <LoginModule class> required key="value" ... ;`
	for _, tc := range []struct {
		name, mechanism, config, want string
	}{
		{"empty", security.MechanismPlain, "  ", "expected a login module class name; " + format},
		{"unsupported module", security.MechanismPlain, `com.example.` + secret + ` required username="u" password="p";`,
			"the login module is not supported; use org.apache.kafka.common.security.plain.PlainLoginModule, org.apache.kafka.common.security.scram.ScramLoginModule, org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule or com.sun.security.auth.module.Krb5LoginModule"},
		{"no control flag", security.MechanismPlain, `PlainLoginModule username="u" password="` + secret + `";`,
			"expected a control flag (required) after the login module at offset 25; " + format},
		{"no terminating semicolon", security.MechanismPlain, `PlainLoginModule required username="u" password="` + secret + `"`,
			"missing the terminating ';'; " + format},
		{"two modules", security.MechanismPlain, `PlainLoginModule required username="u" password="` + secret + `"; PlainLoginModule required;`,
			"unexpected text after ';' at offset 70: only one login module is allowed"},
		{"no option name", security.MechanismPlain, `PlainLoginModule required ="` + secret + `";`, "expected an option name at offset 26"},
		{"no '='", security.MechanismPlain, `PlainLoginModule required username "u";`, "expected '=' after option username at offset 35"},
		{"no '=' after an unknown option", security.MechanismPlain, `PlainLoginModule required ` + secret + `;`, "expected '=' after an option at offset"},
		{"no value", security.MechanismPlain, `PlainLoginModule required username=;`, "option username: missing value at offset 35"},
		{"value at the end", security.MechanismPlain, `PlainLoginModule required password=`, "option password: missing value"},
		{"unterminated quote", security.MechanismPlain, `PlainLoginModule required username="u" password="` + secret + `;`, "option password: unterminated quoted value"},
		{"escape at the end", security.MechanismPlain, `PlainLoginModule required password="` + secret + `\`, "option password: unterminated quoted value"},
		{"option twice", security.MechanismPlain, `PlainLoginModule required username="u" username="v" password="` + secret + `";`, "option username is given twice"},
		{"unknown option twice", security.MechanismPlain, `PlainLoginModule required ` + secret + `=1 ` + secret + `=2;`, "an option is given twice"},
		{"module of another mechanism", security.MechanismSCRAMSHA256, `PlainLoginModule required username="u" password="` + secret + `";`,
			"login module PlainLoginModule does not match sasl.mechanism SCRAM-SHA-256; use ScramLoginModule"},
		{"OAuth module for PLAIN", security.MechanismPlain, `OAuthBearerLoginModule required;`,
			"login module OAuthBearerLoginModule does not match sasl.mechanism PLAIN; use PlainLoginModule"},
		{"no username", security.MechanismPlain, `PlainLoginModule required password="` + secret + `";`, "has no username option"},
		{"no password", security.MechanismSCRAMSHA512, `ScramLoginModule required username="u";`, "has no password option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := jaas(tc.mechanism, tc.config)
			_, err := k.SASL()
			if err == nil {
				t.Fatalf("SASL accepted %q", tc.config)
			}
			if want := "sasl.jaas.config: " + tc.want; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error\n %q\nwant\n %q", err, want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the secret: %v", err)
			}
			// Describe shows no user from a JAAS text it cannot read.
			if d := strings.Join(k.Describe(), ", "); strings.Contains(d, secret) {
				t.Errorf("Describe shows the secret: %s", d)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	scram := saslKeys(security.MechanismSCRAMSHA512)
	scram.SecurityProtocol = security.ProtocolSASLPlaintext
	scram.SASLUsername, scram.SASLPassword = "alice", auth.NewSecret(secret)

	fromJAAS := jaas(security.MechanismPlain, `PlainLoginModule required username="bob" password="`+secret+`";`)
	fromJAAS.TruststoreCertificates = "-----BEGIN CERTIFICATE-----"
	fromJAAS.EndpointIdentificationAlgorithm = "https"

	oauth := saslKeys(security.MechanismOAuthBearer)
	oauth.OAuthClientID, oauth.OAuthClientSecret = "kmirror", auth.NewSecret(secret)
	oauth.TruststoreLocation, oauth.KeystoreLocation = "/etc/ca.pem", "/etc/client.pem"
	oauth.EndpointIdentificationAlgorithm = "https"

	mtls := security.Keys{SecurityProtocol: security.ProtocolSSL, KeystoreCertificateChain: "x", KeystoreKey: auth.NewSecret(secret)}

	for _, tc := range []struct {
		name string
		keys security.Keys
		want string
	}{
		{"plaintext", security.Keys{SecurityProtocol: security.ProtocolPlaintext, SASLUsername: "ignored"}, "PLAINTEXT"},
		{"SCRAM", scram, "SASL_PLAINTEXT, SCRAM-SHA-512 user alice"},
		{"JAAS user, inline CA", fromJAAS, "SASL_SSL, PLAIN user bob, CA inline"},
		{"OAuth client, CA file, client certificate", oauth, "SASL_SSL, OAUTHBEARER client kmirror, CA /etc/ca.pem, client certificate"},
		{"system CAs, client certificate, no host check", mtls, "SSL, system CAs, client certificate, no hostname verification"},
	} {
		got := strings.Join(tc.keys.Describe(), ", ")
		if got != tc.want {
			t.Errorf("%s: Describe = %q, want %q", tc.name, got, tc.want)
		}
		if strings.Contains(got, secret) {
			t.Errorf("%s: Describe shows the secret: %s", tc.name, got)
		}
	}
}
