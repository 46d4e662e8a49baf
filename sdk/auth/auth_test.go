package auth_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/auth/authtest"
)

const pw = "hunter2-correct-horse"

func TestSecretNeverPrints(t *testing.T) {
	s := auth.NewSecret(pw)
	type holder struct {
		User string
		Pass auth.Secret
		Ptr  *auth.Secret
	}
	h := holder{User: "alice", Pass: s, Ptr: &s}
	for _, v := range []any{s, &s, h, &h, []auth.Secret{s}, map[string]auth.Secret{"k": s}} {
		if leak := authtest.Leaks(v, pw); leak != "" {
			t.Errorf("%T: %s", v, leak)
		}
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%-20v"} {
		if out := fmt.Sprintf(verb, s); strings.Contains(out, pw) || strings.Contains(out, fmt.Sprintf("%x", pw)) {
			t.Errorf("fmt %s printed the secret: %s", verb, out)
		}
	}
	if got := fmt.Sprintf("%v|%q|%#v", s, s, s); got != `[redacted]|"[redacted]"|auth.Secret("[redacted]")` {
		t.Errorf("formatted forms = %s", got)
	}
	b, _ := json.Marshal(h)
	if !strings.Contains(string(b), `"Pass":"[redacted]"`) {
		t.Errorf("JSON = %s, want the redacted form", b)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "secret", s)
	if strings.Contains(buf.String(), pw) || !strings.Contains(buf.String(), "secret=[redacted]") {
		t.Errorf("slog output = %s", buf.String())
	}
	if s.Reveal() != pw || !s.IsSet() {
		t.Errorf("Reveal = %q, IsSet = %v", s.Reveal(), s.IsSet())
	}
	var empty auth.Secret
	if empty.IsSet() || empty.String() != "" || fmt.Sprint(empty) != "" {
		t.Errorf("empty secret: IsSet %v, String %q", empty.IsSet(), empty.String())
	}
	if auth.NewSecret(pw) != s || auth.NewSecret("other") == s {
		t.Error("Secrets do not compare by value")
	}
}

func TestSecretDecodes(t *testing.T) {
	var cfg struct {
		Password auth.Secret `json:"password"`
	}
	if err := json.Unmarshal([]byte(`{"password":"s3cr3t-value"}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Password.Reveal() != "s3cr3t-value" {
		t.Fatalf("decoded %q", cfg.Password.Reveal())
	}
	if err := json.Unmarshal([]byte(`{"password":null}`), &cfg); err != nil || cfg.Password.Reveal() != "s3cr3t-value" {
		t.Fatalf("null: %v, value now %q", err, cfg.Password.Reveal())
	}
	err := json.Unmarshal([]byte(`{"password":"[redacted]"}`), &cfg)
	if err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Fatalf("decoding the redacted placeholder: err = %v, want a refusal", err)
	}
	err = json.Unmarshal([]byte(`{"password":12345678901}`), &cfg)
	if err == nil || strings.Contains(err.Error(), "12345678901") {
		t.Fatalf("decoding a number: err = %v, want an error that does not echo the value", err)
	}
	var s auth.Secret
	if err := s.UnmarshalText([]byte("from-text")); err != nil || s.Reveal() != "from-text" {
		t.Fatalf("UnmarshalText: %v, %q", err, s.Reveal())
	}
}

func TestCredentialsPrintRedacted(t *testing.T) {
	c := auth.Credentials{Username: "alice", Password: auth.NewSecret(pw), Token: auth.NewSecret("tok.en-value_123")}
	if leak := authtest.Leaks(c, pw, "tok.en-value_123"); leak != "" {
		t.Fatal(leak)
	}
	if !strings.Contains(fmt.Sprintf("%+v", c), "Username:alice") {
		t.Fatalf("%%+v lost the user name: %+v", c)
	}
}

func TestRequestValidate(t *testing.T) {
	cases := []struct {
		req  auth.Request
		want error
	}{
		{auth.Request{Mirror: "dc1-to-dc2", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}, nil},
		{auth.Request{Role: auth.RoleDestination, Mechanism: auth.MechanismOAuthBearer}, nil},
		{auth.Request{Mirror: "m_1", Role: auth.RoleDestination, Mechanism: auth.MechanismSCRAMSHA512}, nil},
		{auth.Request{Mirror: "m", Role: "", Mechanism: auth.MechanismPlain}, auth.ErrInvalidRequest},
		{auth.Request{Mirror: "m", Role: "Source", Mechanism: auth.MechanismPlain}, auth.ErrInvalidRequest},
		{auth.Request{Mirror: "m/x", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}, auth.ErrInvalidRequest},
		{auth.Request{Mirror: "m", Role: auth.RoleSource}, auth.ErrInvalidRequest},
		{auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: "GSSAPI"}, auth.ErrUnsupportedMechanism},
		{auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: "plain"}, auth.ErrUnsupportedMechanism},
	}
	for _, c := range cases {
		err := c.req.Validate()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%#v.Validate() = %v, want %v", c.req, err, c.want)
		}
	}
	if got := (auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}).String(); got != `mirror "m" source (PLAIN)` {
		t.Errorf("String = %s", got)
	}
}

func TestCredentialsValidate(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	p, tok := auth.NewSecret(pw), auth.NewSecret("eyJhbGciOi.eyJzdWIiOi.sig-_~+/==")
	cases := []struct {
		name string
		mech string
		c    auth.Credentials
		want string // "" for valid; otherwise a fragment of the error
	}{
		{"plain", auth.MechanismPlain, auth.Credentials{Username: "alice", Password: p}, ""},
		{"scram with tokenauth", auth.MechanismSCRAMSHA256, auth.Credentials{Username: "tokenid", Password: p, Extensions: map[string]string{"tokenauth": "true"}, Expiry: exp}, ""},
		{"scram 512", auth.MechanismSCRAMSHA512, auth.Credentials{Username: "a,b=c", Password: p}, ""},
		{"oauth", auth.MechanismOAuthBearer, auth.Credentials{Token: tok, Expiry: exp, Extensions: map[string]string{"traceId": "abc 123"}}, ""},
		{"oauth with authzid", auth.MechanismOAuthBearer, auth.Credentials{Username: "svc", Token: tok, Expiry: exp}, ""},
		{"no user", auth.MechanismPlain, auth.Credentials{Password: p}, "no username"},
		{"no password", auth.MechanismSCRAMSHA256, auth.Credentials{Username: "alice"}, "no password"},
		{"token with plain", auth.MechanismPlain, auth.Credentials{Username: "alice", Password: p, Token: tok}, "a token is set"},
		{"NUL in user", auth.MechanismPlain, auth.Credentials{Username: "al\x00ice", Password: p}, "NUL"},
		{"NUL in password", auth.MechanismPlain, auth.Credentials{Username: "alice", Password: auth.NewSecret("pass\x00word")}, "NUL"},
		{"extensions with plain", auth.MechanismPlain, auth.Credentials{Username: "alice", Password: p, Extensions: map[string]string{"a": "b"}}, "extensions"},
		{"no token", auth.MechanismOAuthBearer, auth.Credentials{Expiry: exp}, "no token"},
		{"bad token chars", auth.MechanismOAuthBearer, auth.Credentials{Token: auth.NewSecret("has space-secretvalue"), Expiry: exp}, "characters"},
		{"no expiry", auth.MechanismOAuthBearer, auth.Credentials{Token: tok}, "no expiry"},
		{"password with oauth", auth.MechanismOAuthBearer, auth.Credentials{Token: tok, Expiry: exp, Password: p}, "a password is set"},
		{"comma in authzid", auth.MechanismOAuthBearer, auth.Credentials{Username: "a,b", Token: tok, Expiry: exp}, "authorization identity"},
		{"bad extension key", auth.MechanismOAuthBearer, auth.Credentials{Token: tok, Expiry: exp, Extensions: map[string]string{"trace-id": "x"}}, "extension key"},
		{"reserved extension key", auth.MechanismOAuthBearer, auth.Credentials{Token: tok, Expiry: exp, Extensions: map[string]string{"auth": "x"}}, "reserved"},
		{"bad extension value", auth.MechanismOAuthBearer, auth.Credentials{Token: tok, Expiry: exp, Extensions: map[string]string{"k": "\x01"}}, `extension "k"`},
		{"empty extension value", auth.MechanismOAuthBearer, auth.Credentials{Token: tok, Expiry: exp, Extensions: map[string]string{"k": ""}}, `extension "k"`},
	}
	for _, c := range cases {
		err := c.c.Validate(c.mech)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, auth.ErrInvalidCredentials) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want ErrInvalidCredentials mentioning %q", c.name, err, c.want)
		}
		if err != nil {
			if leak := authtest.Leaks(err, pw, tok.Reveal(), "has space-secretvalue", "pass\x00word"); leak != "" {
				t.Errorf("%s: %s", c.name, leak)
			}
		}
	}
	if err := (auth.Credentials{}).Validate("GSSAPI"); !errors.Is(err, auth.ErrUnsupportedMechanism) {
		t.Errorf("unknown mechanism: %v", err)
	}
}

func TestExpiresWithin(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c := auth.Credentials{Expiry: now.Add(time.Minute)}
	if c.ExpiresWithin(now, 59*time.Second) {
		t.Error("expires within 59s, but it has 60s left")
	}
	if !c.ExpiresWithin(now, time.Minute) || !c.ExpiresWithin(now.Add(2*time.Minute), 0) {
		t.Error("ExpiresWithin false at or past expiry")
	}
	if (auth.Credentials{}).ExpiresWithin(now, 100*365*24*time.Hour) {
		t.Error("credentials without expiry expire")
	}
}

func TestInfoValidate(t *testing.T) {
	ok := auth.Info{Name: "static", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor, Mechanisms: []string{auth.MechanismPlain}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if !ok.Supports(auth.MechanismPlain) || ok.Supports(auth.MechanismOAuthBearer) {
		t.Error("Supports is wrong")
	}
	mod := func(f func(*auth.Info)) auth.Info {
		i := ok
		i.Mechanisms = append([]string(nil), ok.Mechanisms...)
		f(&i)
		return i
	}
	bad := map[string]auth.Info{
		"no name":         mod(func(i *auth.Info) { i.Name = "" }),
		"upper-case name": mod(func(i *auth.Info) { i.Name = "Static" }),
		"name with dot":   mod(func(i *auth.Info) { i.Name = "a.b" }),
		"major mismatch":  mod(func(i *auth.Info) { i.ProtocolMajor = auth.ProtocolMajor + 1 }),
		"major zero":      mod(func(i *auth.Info) { i.ProtocolMajor = 0 }),
		"negative minor":  mod(func(i *auth.Info) { i.ProtocolMinor = -1 }),
		"no mechanisms":   mod(func(i *auth.Info) { i.Mechanisms = nil }),
		"unknown":         mod(func(i *auth.Info) { i.Mechanisms = append(i.Mechanisms, "GSSAPI") }),
		"duplicate":       mod(func(i *auth.Info) { i.Mechanisms = append(i.Mechanisms, auth.MechanismPlain) }),
	}
	for name, i := range bad {
		if err := i.Validate(); !errors.Is(err, auth.ErrIncompatible) {
			t.Errorf("%s: Validate = %v, want ErrIncompatible", name, err)
		}
	}
}
