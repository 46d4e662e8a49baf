package oauthtest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestIssuesVerifiableTokensToKnownClientsOnly(t *testing.T) {
	t.Parallel()
	s, err := New(time.Minute, map[string]string{"kmirror": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	post := func(id, secret string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, s.TokenURL(), strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {"mirror"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	if resp, body := post("kmirror", "wrong"); resp.StatusCode != http.StatusUnauthorized || body["error"] != "invalid_client" || s.Refused() != 1 {
		t.Fatalf("wrong secret: %d %v refused=%d", resp.StatusCode, body, s.Refused())
	}
	resp, body := post("kmirror", "s3cret")
	if resp.StatusCode != http.StatusOK || body["token_type"] != "Bearer" || body["expires_in"] != 60.0 {
		t.Fatalf("token: %d %v", resp.StatusCode, body)
	}
	tok := body["access_token"].(string)
	claims, err := Claims(tok)
	if err != nil || claims["sub"] != "kmirror" || claims["aud"] != "kafka" || claims["iss"] != s.Issuer || claims["scope"] != "mirror" {
		t.Fatalf("claims %v %v", claims, err)
	}
	if is := s.Issued(); len(is) != 1 || is[0].ClientID != "kmirror" || is[0].Expires.Sub(is[0].Issued) != time.Minute {
		t.Fatalf("issued %+v", is)
	}

	// The signature verifies against the published key set.
	jr, err := http.Get(s.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Body.Close()
	var set struct {
		Keys []struct{ Kid, N, E string }
	}
	if err := json.NewDecoder(jr.Body).Decode(&set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %+v %v", set, err)
	}
	n, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].N)
	e, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].E)
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	parts := strings.Split(tok, ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		t.Fatalf("signature does not verify against the JWKS: %v", err)
	}
}
