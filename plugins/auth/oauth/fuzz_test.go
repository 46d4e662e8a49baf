package oauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
)

// answer is a RoundTripper that answers every request with one response,
// without a network.
type answer struct {
	status      int
	contentType string
	body        string
}

func (a answer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: a.status, Status: fmt.Sprintf("%d %s", a.status, http.StatusText(a.status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {a.contentType}},
		Body:    io.NopCloser(strings.NewReader(a.body)),
		Request: r,
	}, nil
}

// accessToken is the access_token a token response carries, as the
// endpoint meant it ("" when there is none to find).
func accessToken(form bool, body string) string {
	if form {
		v, _ := url.ParseQuery(body)
		return v.Get("access_token")
	}
	var b struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal([]byte(body), &b)
	return b.AccessToken
}

// FuzzTokenResponse answers the provider's token request with an arbitrary
// status, body and content type (JSON or form) and checks what kmirror
// makes of it around x/oauth2. Nothing panics; a token is served only from
// a 2xx answer, is the access_token the endpoint sent, passes the SDK's
// checks and expires in the future; every failure names the endpoint,
// wraps auth.ErrRejected or auth.ErrUnavailable, stays short, and shows
// neither the client secret (an endpoint may echo it) nor the token.
func FuzzTokenResponse(f *testing.F) {
	jwt := func(claims string) string {
		enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		return enc(`{"alg":"RS256"}`) + "." + enc(claims) + ".c2lnbmF0dXJl"
	}
	seeds := []struct {
		status uint16
		form   bool
		body   string
	}{
		{200, false, `{"access_token":"token-000001","token_type":"Bearer","expires_in":3600}`},
		{200, false, `{"access_token":"tok-string-exp","expires_in":"3600"}`},
		{200, true, `access_token=tok-form&expires_in=600`},
		{200, false, `{"access_token":"` + jwt(`{"sub":"kmirror","exp":4102444800}`) + `"}`},
		{200, false, `{"access_token":"` + jwt(`{"exp":1000}`) + `"}`},
		{200, false, `{"access_token":"opaque-token-value"}`},
		{200, false, `{"access_token":"bad token-value","expires_in":60}`},
		{200, false, `{"access_token":"tok-negative","expires_in":-5}`},
		{200, false, `{"access_token":"tok-frac-exp","expires_in":1.5}`},
		{200, false, `<html>login page</html>`},
		{401, false, `{"error":"invalid_client","error_description":"bad secret ` + clientSecret + ` for client"}`},
		{400, false, `{"error":"invalid_grant","error_description":"line\nbreak"}`},
		{403, true, `error=access_denied&error_description=` + clientSecret},
		{500, false, `{"error":"server_error"}`},
		{429, false, `{}`},
		{302, false, ``},
	}
	for _, s := range seeds {
		f.Add(s.status, s.form, s.body)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status uint16, form bool, body string) {
		a := answer{status: 100 + int(status)%500, contentType: "application/json", body: body}
		if form {
			a.contentType = "application/x-www-form-urlencoded"
		}
		cfg := DefaultConfig()
		cfg.TokenEndpoint = "https://idp.example/oauth2/token"
		cfg.ClientID = clientID
		cfg.ClientSecret = auth.NewSecret(clientSecret)
		cfg.HTTPClient = &http.Client{Transport: a}
		cfg.Now = func() time.Time { return now }
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		creds, err := p.Credentials(t.Context(), oauthReq)
		sent := accessToken(form, body)
		if err == nil {
			if a.status < 200 || a.status > 299 {
				t.Fatalf("a token from an HTTP %d answer", a.status)
			}
			if got := creds.Token.Reveal(); got == "" || got != sent {
				t.Fatalf("token %q served, the endpoint sent %q", got, sent)
			}
			if err := creds.Validate(auth.MechanismOAuthBearer); err != nil {
				t.Fatalf("credentials the SDK refuses: %v", err)
			}
			if !creds.Expiry.After(now) {
				t.Fatalf("token expiring at %v, now is %v", creds.Expiry, now)
			}
			return
		}
		msg := err.Error()
		if !errors.Is(err, auth.ErrRejected) && !errors.Is(err, auth.ErrUnavailable) {
			t.Fatalf("error %q wraps neither ErrRejected nor ErrUnavailable", msg)
		}
		if !strings.Contains(msg, cfg.TokenEndpoint) {
			t.Fatalf("error %q does not name the endpoint", msg)
		}
		if len(msg) > 1000 {
			t.Fatalf("error of %d bytes", len(msg))
		}
		if strings.Contains(msg, clientSecret) {
			t.Fatalf("the error shows the client secret: %q", msg)
		}
		if a.status >= 200 && a.status <= 299 && len(sent) >= 12 && strings.Contains(msg, sent) {
			t.Fatalf("the error shows the access token %q: %q", sent, msg)
		}
	})
}
