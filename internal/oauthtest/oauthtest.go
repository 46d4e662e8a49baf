// Package oauthtest is an OAuth 2.0 authorization server for tests: a
// client-credentials token endpoint that issues short-lived RS256 JWTs, and
// the JWKS endpoint a Kafka broker's OAuthBearerValidatorCallbackHandler
// validates them against. It runs on loopback (httptest) and counts what it
// issued, so tests can prove that tokens were refreshed.
package oauthtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Server is a running authorization server.
type Server struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string

	// Audience and Issuer are put in every token ("aud", "iss").
	Audience string
	Issuer   string

	mu      sync.Mutex
	ttl     time.Duration
	clients map[string]string // client id → secret
	issued  []Token
	refused int
}

// Token is one token the server issued.
type Token struct {
	ClientID string
	Scope    string
	Issued   time.Time
	Expires  time.Time
}

// New starts a server that issues tokens valid for ttl to the clients
// given (client id → client secret). Close it when done.
func New(ttl time.Duration, clients map[string]string) (*Server, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("oauthtest: generate key: %w", err)
	}
	s := &Server{key: key, kid: "oauthtest-1", Audience: "kafka", ttl: ttl, clients: map[string]string{}}
	for id, secret := range clients {
		s.clients[id] = secret
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks", s.jwks)
	mux.HandleFunc("/token", s.token)
	s.srv = httptest.NewServer(mux)
	s.Issuer = s.srv.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// JWKSURL is the URL of the key set (a broker's
// sasl.oauthbearer.jwks.endpoint.url).
func (s *Server) JWKSURL() string { return s.srv.URL + "/jwks" }

// TokenURL is the client-credentials token endpoint.
func (s *Server) TokenURL() string { return s.srv.URL + "/token" }

// SetTTL changes the lifetime of the tokens issued from now on.
func (s *Server) SetTTL(ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl = ttl
}

// SetSecret changes (or adds) a client's secret.
func (s *Server) SetSecret(clientID, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[clientID] = secret
}

// Issued returns the tokens issued so far, oldest first.
func (s *Server) Issued() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Token(nil), s.issued...)
}

// Refused counts token requests refused (unknown client, wrong secret, bad
// request).
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Mint returns a token for sub valid for ttl (negative: already expired),
// signed with the server's key, without counting it as issued.
func (s *Server) Mint(sub, scope string, ttl time.Duration) (string, error) {
	now := time.Now()
	return s.sign(claims(sub, s.Audience, s.Issuer, scope, now, ttl))
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := s.key.PublicKey
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": s.kid,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	refuse := func(code int, errName, desc string) {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": errName, "error_description": desc})
	}
	if r.Method != http.MethodPost {
		refuse(http.StatusMethodNotAllowed, "invalid_request", "POST only")
		return
	}
	if err := r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		refuse(http.StatusBadRequest, "unsupported_grant_type", "grant_type "+gt)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	want, known := s.clients[id]
	ttl := s.ttl
	s.mu.Unlock()
	if !known || secret != want {
		refuse(http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	scope := r.PostForm.Get("scope")
	now := time.Now()
	tok, err := s.sign(claims(id, s.Audience, s.Issuer, scope, now, ttl))
	if err != nil {
		refuse(http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	s.mu.Lock()
	s.issued = append(s.issued, Token{ClientID: id, Scope: scope, Issued: now, Expires: now.Add(ttl)})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(ttl.Seconds()), "scope": scope,
	})
}

// claims are a token's claims; an empty scope is left out (Kafka's broker
// refuses an empty "scope" claim).
func claims(sub, aud, iss, scope string, now time.Time, ttl time.Duration) map[string]any {
	c := map[string]any{
		"sub": sub, "aud": aud, "iss": iss,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix(),
	}
	if scope != "" {
		c["scope"] = scope
	}
	return c
}

// sign returns the compact RS256 JWS of claims.
func (s *Server) sign(claims map[string]any) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": s.kid})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64(header) + "." + b64(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + b64(sig), nil
}

// Claims decodes a token's claims without checking its signature (for
// test assertions).
func Claims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("oauthtest: not a compact JWS")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var c map[string]any
	return c, json.Unmarshal(raw, &c)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
