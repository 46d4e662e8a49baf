package kafkatest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/oauthtest"
)

// A real broker with an OAUTHBEARER listener accepts a token the test's
// authorization server signed, with the audience and issuer it expects, and
// refuses an expired token and one signed by another key.
func TestOAuthBearerListenerValidatesTokensAgainstTheJWKS(t *testing.T) {
	idp, err := oauthtest.New(time.Minute, map[string]string{"kmirror": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer idp.Close()
	other, err := oauthtest.New(time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Issuer = idp.Issuer // same claims, another key

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Name: "oauth", Logf: t.Logf, SASL: &SASLOptions{
		Mechanisms: []Mechanism{OAuthBearer},
		OAuth:      &OAuthOptions{JWKSURL: idp.JWKSURL(), Audience: idp.Audience, Issuer: idp.Issuer},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	adm, err := c.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "oauth-t"); err != nil {
		t.Fatal(err)
	}

	// login connects with token and sends one request; a refused token
	// fails at once (no retries).
	login := func(token string) error {
		cl, err := c.NewClient(Identity{Listener: SASLPlaintext, Mechanism: OAuthBearer, Password: token}, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		defer pcancel()
		return cl.Ping(pctx)
	}
	produce := func(token string) error {
		cl, err := c.NewClient(Identity{Listener: SASLPlaintext, Mechanism: OAuthBearer, Password: token}, kgo.RequestRetries(0), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "oauth-t", Value: []byte("v")}).FirstErr()
	}

	good, err := idp.Mint("kmirror", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := produce(good); err != nil {
		t.Fatalf("a valid token was refused: %v\n%s", err, c.LogTail(40))
	}
	expired, _ := idp.Mint("kmirror", "", -time.Minute)
	if err := login(expired); err == nil || !strings.Contains(strings.ToLower(err.Error()), "sasl") {
		t.Fatalf("an expired token: %v, want a SASL authentication failure", err)
	}
	forged, _ := other.Mint("kmirror", "", time.Minute)
	if err := login(forged); err == nil || !strings.Contains(strings.ToLower(err.Error()), "sasl") {
		t.Fatalf("a token signed by another key: %v, want a SASL authentication failure", err)
	}
}

func TestOAuthBearerNeedsItsOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{SASL: &SASLOptions{Mechanisms: []Mechanism{OAuthBearer}}},
		{SASL: &SASLOptions{Mechanisms: []Mechanism{Plain}, OAuth: &OAuthOptions{JWKSURL: "http://127.0.0.1:1/jwks"}}},
		{SASL: &SASLOptions{Mechanisms: []Mechanism{OAuthBearer}, OAuth: &OAuthOptions{JWKSURL: "/jwks"}}},
	} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) accepted", *o.SASL)
		}
	}
	s := specFor(t, Options{SASL: &SASLOptions{Mechanisms: []Mechanism{OAuthBearer}, OAuth: &OAuthOptions{JWKSURL: "http://127.0.0.1:1/jwks", Audience: "kafka"}}})
	cfg := s.nodeConfig(0)
	for k, v := range map[string]string{
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms":                        "OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":                   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
		"sasl.oauthbearer.jwks.endpoint.url":                                          "http://127.0.0.1:1/jwks",
		"sasl.oauthbearer.expected.audience":                                          "kafka",
	} {
		if cfg[k] != v {
			t.Errorf("%s = %q, want %q", k, cfg[k], v)
		}
	}
	if _, ok := cfg["sasl.oauthbearer.expected.issuer"]; ok {
		t.Error("expected.issuer set without an Issuer")
	}
}
