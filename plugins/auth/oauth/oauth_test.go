package oauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/auth/authtest"
)

const (
	clientID     = "kmirror-client"
	clientSecret = "cl1ent-s3cret-value"
)

// endpoint is a token endpoint on loopback that counts its calls. respond
// decides each answer (n counts from 1); by default it issues token-<n>
// valid for an hour.
type endpoint struct {
	srv   *httptest.Server
	calls atomic.Int64

	mu      sync.Mutex
	respond func(w http.ResponseWriter, r *http.Request, n int64)
	lastReq *http.Request
	form    url.Values
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{}
	e.respond = issue(3600)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := e.calls.Add(1)
		_ = r.ParseForm()
		e.mu.Lock()
		e.lastReq, e.form = r, r.PostForm
		respond := e.respond
		e.mu.Unlock()
		respond(w, r, n)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) set(respond func(w http.ResponseWriter, r *http.Request, n int64)) {
	e.mu.Lock()
	e.respond = respond
	e.mu.Unlock()
}

func (e *endpoint) url() string { return e.srv.URL + "/oauth2/token" }

func tokenValue(n int64) string { return fmt.Sprintf("token-%06d", n) }

// issue answers with token-<n> and the given expires_in.
func issue(expiresIn any) func(w http.ResponseWriter, r *http.Request, n int64) {
	return func(w http.ResponseWriter, r *http.Request, n int64) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tokenValue(n), "token_type": "Bearer", "expires_in": expiresIn})
	}
}

func reply(status int, body string) func(w http.ResponseWriter, r *http.Request, n int64) {
	return func(w http.ResponseWriter, r *http.Request, n int64) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func config(e *endpoint) Config {
	c := DefaultConfig()
	c.TokenEndpoint = e.url()
	c.ClientID = clientID
	c.ClientSecret = auth.NewSecret(clientSecret)
	return c
}

func mustNew(t *testing.T, c Config) *Provider {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var oauthReq = auth.Request{Mirror: "dc1", Role: auth.RoleSource, Mechanism: auth.MechanismOAuthBearer}

func get(t *testing.T, p *Provider) auth.Credentials {
	t.Helper()
	c, err := p.Credentials(t.Context(), oauthReq)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noLeak(t *testing.T, what string, v any, extra ...string) {
	t.Helper()
	if leak := authtest.Leaks(v, append([]string{clientSecret}, extra...)...); leak != "" {
		t.Fatalf("%s: %s", what, leak)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	authtest.Run(t, func(t *testing.T) auth.Provider {
		c := config(newEndpoint(t))
		c.Extensions = map[string]string{"logicalCluster": "lkc-1", "traceId": "x"}
		return mustNew(t, c)
	})
}

func TestTokenRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name             string
		id, secret       string
		urlencode        bool
		wantID, wantPass string
		scope            string
	}{
		{"plain credentials, no scope", clientID, clientSecret, false, clientID, clientSecret, ""},
		{"url-encoded credentials and a scope", "my:client", "p@ss word/+secret", true, "my%3Aclient", "p%40ss+word%2F%2Bsecret", "kafka.read kafka.write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t)
			c := config(e)
			c.ClientID, c.ClientSecret, c.URLEncodeCredentials, c.Scope = tc.id, auth.NewSecret(tc.secret), tc.urlencode, tc.scope
			get(t, mustNew(t, c))
			e.mu.Lock()
			defer e.mu.Unlock()
			r := e.lastReq
			if r.Method != http.MethodPost || r.URL.Path != "/oauth2/token" {
				t.Errorf("request %s %s", r.Method, r.URL.Path)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
				t.Errorf("Content-Type %q", ct)
			}
			if a := r.Header.Get("Accept"); a != "application/json" {
				t.Errorf("Accept %q", a)
			}
			// Decode the header by hand: BasicAuth would not show
			// whether the parts were encoded.
			raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Authorization"), "Basic "))
			if err != nil || string(raw) != tc.wantID+":"+tc.wantPass {
				t.Errorf("Basic credentials %q (%v), want %q", raw, err, tc.wantID+":"+tc.wantPass)
			}
			if g := e.form.Get("grant_type"); g != "client_credentials" {
				t.Errorf("grant_type %q", g)
			}
			if s, ok := e.form["scope"]; tc.scope == "" && ok || tc.scope != "" && (len(s) != 1 || s[0] != tc.scope) {
				t.Errorf("scope %q, want %q", s, tc.scope)
			}
			if e.form.Has("client_secret") || e.form.Has("client_id") {
				t.Errorf("client credentials sent in the body: %v", e.form)
			}
		})
	}
}

func TestCachesAndRefreshesAtTheRefreshFactor(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(issue(100))
	clk := newClock()
	c := config(e)
	// With the default 5m buffer a 100s token would refresh at its L/2
	// floor; a 10s buffer leaves the factor first.
	c.Now, c.RefreshBuffer = clk.Now, 10*time.Second
	p := mustNew(t, c)
	t0 := clk.Now()

	first := get(t, p)
	if first.Token.Reveal() != tokenValue(1) || !first.Expiry.Equal(t0.Add(100*time.Second)) {
		t.Fatalf("first token %q expiring %v, want %q at %v", first.Token.Reveal(), first.Expiry, tokenValue(1), t0.Add(100*time.Second))
	}
	for range 50 {
		get(t, p)
	}
	clk.advance(79 * time.Second)
	if got := get(t, p); got.Token.Reveal() != tokenValue(1) || e.calls.Load() != 1 {
		t.Fatalf("at 79%% of the lifetime: token %q after %d requests, want the cached one after 1", got.Token.Reveal(), e.calls.Load())
	}
	clk.advance(time.Second)
	second := get(t, p)
	if second.Token.Reveal() != tokenValue(2) || e.calls.Load() != 2 || !second.Expiry.Equal(clk.Now().Add(100*time.Second)) {
		t.Fatalf("at 80%% of the lifetime: token %q expiring %v after %d requests, want a new one", second.Token.Reveal(), second.Expiry, e.calls.Load())
	}
}

func TestRefreshBufferComesFirstForLongerTokens(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(issue(1000))
	clk := newClock()
	c := config(e)
	c.Now, c.RefreshBuffer = clk.Now, 300*time.Second
	p := mustNew(t, c)
	get(t, p)
	clk.advance(699 * time.Second) // 80% would be 800s; expiry - buffer is 700s
	get(t, p)
	if n := e.calls.Load(); n != 1 {
		t.Fatalf("%d requests at 699s, want 1", n)
	}
	clk.advance(time.Second)
	if got := get(t, p); got.Token.Reveal() != tokenValue(2) {
		t.Fatalf("at 700s got %q, want a refreshed token", got.Token.Reveal())
	}
}

func TestRefreshAt(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_000_000, 0)
	cases := []struct {
		lifetime, buffer time.Duration
		factor           float64
		want             time.Duration
	}{
		{time.Hour, 5 * time.Minute, 0.8, 48 * time.Minute},          // factor first
		{20 * time.Minute, 5 * time.Minute, 0.8, 15 * time.Minute},   // buffer first
		{time.Minute, 5 * time.Minute, 0.8, 30 * time.Second},        // floor at L/2
		{100 * time.Second, 0, 1, 100 * time.Second},                 // no buffer, factor 1
		{100 * time.Second, 10 * time.Second, 1, 90 * time.Second},   // buffer only
		{100 * time.Second, 10 * time.Second, 0.5, 50 * time.Second}, // factor 0.5
	}
	for _, c := range cases {
		if got := refreshAt(start, c.lifetime, c.factor, c.buffer).Sub(start); got != c.want {
			t.Errorf("refreshAt(L=%v, factor %v, buffer %v) = +%v, want +%v", c.lifetime, c.factor, c.buffer, got, c.want)
		}
	}
}

func TestConcurrentCallersShareOneRequest(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(func(w http.ResponseWriter, r *http.Request, n int64) {
		time.Sleep(150 * time.Millisecond) // a slow endpoint, so the callers overlap: the condition under test, not a wait
		issue(3600)(w, r, n)
	})
	p := mustNew(t, config(e))
	var wg sync.WaitGroup
	tokens := make([]string, 20)
	errs := make([]error, 20)
	for i := range tokens {
		wg.Go(func() {
			c, err := p.Credentials(t.Context(), oauthReq)
			tokens[i], errs[i] = c.Token.Reveal(), err
		})
	}
	wg.Wait()
	for i := range tokens {
		if errs[i] != nil || tokens[i] != tokenValue(1) {
			t.Fatalf("caller %d: %q, %v", i, tokens[i], errs[i])
		}
	}
	if n := e.calls.Load(); n != 1 {
		t.Fatalf("%d token requests for 20 concurrent callers, want 1", n)
	}
}

func TestConcurrentCallersShareAFailure(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(func(w http.ResponseWriter, r *http.Request, n int64) {
		time.Sleep(300 * time.Millisecond) // a slow endpoint, so the callers overlap: the condition under test, not a wait
		reply(http.StatusInternalServerError, `{"error":"server_error"}`)(w, r, n)
	})
	p := mustNew(t, config(e))
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() { _, errs[i] = p.Credentials(t.Context(), oauthReq) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), "server_error") {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if n := e.calls.Load(); n != 1 {
		t.Fatalf("%d token requests for 10 concurrent callers, want 1", n)
	}
	// A later call asks again.
	e.set(issue(3600))
	if got := get(t, p); got.Token.Reveal() != tokenValue(2) {
		t.Fatalf("later call: %q", got.Token.Reveal())
	}
}

func TestServesValidTokenWhileRefreshFails(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(issue(100))
	clk := newClock()
	var logs bytes.Buffer
	var logMu sync.Mutex
	c := config(e)
	c.Now, c.RefreshBuffer = clk.Now, 10*time.Second
	c.Logger = slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := mustNew(t, c)
	get(t, p)

	e.set(reply(http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`))
	clk.advance(85 * time.Second) // past the refresh time, before expiry
	if got := get(t, p); got.Token.Reveal() != tokenValue(1) || e.calls.Load() != 2 {
		t.Fatalf("during a failed refresh: token %q after %d requests, want the cached one after 2", got.Token.Reveal(), e.calls.Load())
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if !strings.Contains(out, "token refresh failed") || !strings.Contains(out, e.url()) || !strings.Contains(out, "503") {
		t.Fatalf("log lacks the warning, endpoint or status:\n%s", out)
	}
	if strings.Contains(out, clientSecret) || strings.Contains(out, tokenValue(1)) {
		t.Fatalf("log contains a secret:\n%s", out)
	}

	// Backoff: no new request within RetryBackoff (100ms), then one.
	get(t, p)
	if n := e.calls.Load(); n != 2 {
		t.Fatalf("%d requests within the backoff, want 2", n)
	}
	clk.advance(100 * time.Millisecond)
	get(t, p)
	if n := e.calls.Load(); n != 3 {
		t.Fatalf("%d requests after the backoff, want 3", n)
	}
	clk.advance(150 * time.Millisecond) // backoff doubled to 200ms
	get(t, p)
	if n := e.calls.Load(); n != 3 {
		t.Fatalf("%d requests within the doubled backoff, want 3", n)
	}

	// Once the token has expired, the failure is the caller's.
	clk.advance(15 * time.Second)
	_, err := p.Credentials(t.Context(), oauthReq)
	if !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "temporarily_unavailable") {
		t.Fatalf("after expiry: %v; want ErrUnavailable naming the status and OAuth error", err)
	}
	noLeak(t, "error after expiry", err, tokenValue(1))

	// The endpoint recovers: the next call gets a token.
	e.set(issue(100))
	if got := get(t, p); got.Token.Reveal() == tokenValue(1) || !got.Expiry.After(clk.Now()) {
		t.Fatalf("after recovery: token %q expiring %v", got.Token.Reveal(), got.Expiry)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func TestErrorResponses(t *testing.T) {
	t.Parallel()
	echo := fmt.Sprintf(`{"error":"invalid_client","error_description":"bad secret %s for client"}`, clientSecret)
	cases := []struct {
		status   int
		body     string
		sentinel error
		want     []string
	}{
		{401, echo, auth.ErrRejected, []string{"401 Unauthorized", "invalid_client: bad secret [redacted] for client", "check the client id"}},
		{400, `{"error":"invalid_scope"}`, auth.ErrRejected, []string{"400 Bad Request (invalid_scope)"}},
		// An error code echoing the secret (found by FuzzTokenResponse).
		{401, `{"error":"` + clientSecret + `"}`, auth.ErrRejected, []string{"401 Unauthorized ([redacted])"}},
		{400, `{"error":"invalid_grant","error_description":"line\nbreak"}`, auth.ErrRejected, []string{"(invalid_grant: line break)"}},
		{403, `<html>forbidden</html>`, auth.ErrRejected, []string{"403 Forbidden: auth: credentials rejected"}},
		{404, `not found`, auth.ErrRejected, []string{"404 Not Found", "check the token endpoint URL"}},
		{500, `{"error":"server_error"}`, auth.ErrUnavailable, []string{"500 Internal Server Error (server_error)", "retrying"}},
		{502, ``, auth.ErrUnavailable, []string{"502 Bad Gateway"}},
		{429, `{}`, auth.ErrUnavailable, []string{"429 Too Many Requests"}},
		{408, `{}`, auth.ErrUnavailable, []string{"408 Request Timeout"}},
		{400, `{"error":"` + strings.Repeat("x", 100) + `"}`, auth.ErrRejected, []string{"400 Bad Request: "}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			e := newEndpoint(t)
			e.set(reply(c.status, c.body))
			_, err := mustNew(t, config(e)).Credentials(t.Context(), oauthReq)
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("error %v, want %v", err, c.sentinel)
			}
			for _, w := range append(c.want, "token endpoint "+e.url()) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			noLeak(t, "error", err)
		})
	}
	// A long description is cut.
	e := newEndpoint(t)
	e.set(reply(401, `{"error":"invalid_client","error_description":"`+strings.Repeat("d", 5000)+`"}`))
	_, err := mustNew(t, config(e)).Credentials(t.Context(), oauthReq)
	if len(err.Error()) > 600 {
		t.Fatalf("error of %d bytes for a long description", len(err.Error()))
	}
}

func TestUnusableResponses(t *testing.T) {
	t.Parallel()
	jwt := func(claims string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2lnbmF0dXJl"
	}
	now := time.Now()
	exp := now.Add(2 * time.Hour).Truncate(time.Second)
	good := jwt(fmt.Sprintf(`{"sub":"kmirror","exp":%d}`, exp.Unix()))
	cases := []struct {
		name       string
		body       string
		wantErr    string        // "" for success
		wantExpiry time.Duration // from the clock, on success
		secret     string        // must not appear in the error
	}{
		{"expires_in as a string", `{"access_token":"tok-string-exp","expires_in":"3600"}`, "", time.Hour, ""},
		{"expires_in as a form value", "form:access_token=tok-form&expires_in=600", "", 10 * time.Minute, ""},
		{"JWT exp without expires_in", `{"access_token":"` + good + `"}`, "", exp.Sub(now), ""},
		{"not JSON", `<html>login page</html>`, "not a JSON token response", 0, ""},
		// x/oauth2 reads expires_in as whole seconds.
		{"fractional expires_in", `{"access_token":"tok-frac-exp","expires_in":1.5}`, "not a JSON token response", 0, "tok-frac-exp"},
		{"no access_token", `{"token_type":"Bearer","expires_in":10}`, "no access_token", 0, ""},
		{"negative expires_in", `{"access_token":"tok-negative","expires_in":-5}`, "-5 seconds is not a usable lifetime", 0, "tok-negative"},
		{"zero expires_in", `{"access_token":"tok-zero-exp","expires_in":0}`, "not a usable lifetime", 0, "tok-zero-exp"},
		{"expires_in not a number", `{"access_token":"tok-nan-exp","expires_in":"soon"}`, `not a JSON token response`, 0, "tok-nan-exp"},
		{"opaque token without expires_in", `{"access_token":"opaque-token-value"}`, "cannot tell when it expires", 0, "opaque-token-value"},
		{"JWT without exp", `{"access_token":"` + jwt(`{"sub":"x"}`) + `"}`, "cannot tell when it expires", 0, jwt(`{"sub":"x"}`)},
		{"JWT expired", `{"access_token":"` + jwt(`{"exp":1000}`) + `"}`, "has passed", 0, jwt(`{"exp":1000}`)},
		{"token with a space", `{"access_token":"bad token-value","expires_in":60}`, "characters not allowed", 0, "bad token-value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEndpoint(t)
			e.set(reply(200, c.body))
			if form, ok := strings.CutPrefix(c.body, "form:"); ok {
				e.set(func(w http.ResponseWriter, r *http.Request, n int64) {
					w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
					_, _ = w.Write([]byte(form))
				})
			}
			cfg := config(e)
			cfg.Now = func() time.Time { return now }
			creds, err := mustNew(t, cfg).Credentials(t.Context(), oauthReq)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := creds.Expiry.Sub(now); got != c.wantExpiry {
					t.Fatalf("expiry in %v, want %v", got, c.wantExpiry)
				}
				return
			}
			if !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), e.url()) {
				t.Fatalf("error %v; want ErrUnavailable naming the endpoint and %q", err, c.wantErr)
			}
			noLeak(t, "error", err, c.secret)
		})
	}
}

// blocking answers only when the request is abandoned, and reports each
// request on entered.
func blocking(entered chan<- struct{}) func(w http.ResponseWriter, r *http.Request, n int64) {
	return func(w http.ResponseWriter, r *http.Request, n int64) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}
}

func TestSlowEndpointAndCallerDeadline(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(blocking(nil))
	p := mustNew(t, config(e))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Credentials(ctx, oauthReq)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("error %v; want one wrapping context.DeadlineExceeded only", err)
	}
	if !strings.Contains(err.Error(), e.url()) {
		t.Fatalf("error %q does not name the endpoint", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v", d)
	}
	// The caller's deadline is not held against the endpoint: the next
	// caller tries again.
	e.set(issue(3600))
	if got := get(t, p); got.Token.Reveal() != tokenValue(2) {
		t.Fatalf("next call: token %q", got.Token.Reveal())
	}
}

func TestSlowEndpointAndRequestTimeout(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.set(blocking(nil))
	c := config(e)
	c.RequestTimeout = 50 * time.Millisecond
	_, err := mustNew(t, c).Credentials(t.Context(), oauthReq)
	if !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no response within 50ms") {
		t.Fatalf("error %v; want ErrUnavailable and DeadlineExceeded naming the timeout", err)
	}
}

func TestCloseAbortsARequestInFlight(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	entered := make(chan struct{}, 1)
	e.set(blocking(entered))
	p := mustNew(t, config(e))
	done := make(chan error, 1)
	go func() {
		_, err := p.Credentials(t.Context(), oauthReq)
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the endpoint")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, auth.ErrClosed) {
			t.Fatalf("in-flight call: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not abort the request")
	}
}

func TestExtensions(t *testing.T) {
	t.Parallel()
	c := config(newEndpoint(t))
	ext := map[string]string{"logicalCluster": "lkc-1"}
	c.Extensions = ext
	p := mustNew(t, c)
	ext["logicalCluster"] = "changed-after-New"
	if got := get(t, p).Extensions; len(got) != 1 || got["logicalCluster"] != "lkc-1" {
		t.Fatalf("extensions %v", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	base := DefaultConfig()
	base.TokenEndpoint, base.ClientID, base.ClientSecret = "https://idp.example/token", clientID, auth.NewSecret(clientSecret)
	mod := func(f func(*Config)) Config {
		c := base
		f(&c)
		return c
	}
	cases := []struct {
		cfg  Config
		want string
	}{
		{mod(func(c *Config) { c.TokenEndpoint = "" }), "no token endpoint"},
		{mod(func(c *Config) { c.TokenEndpoint = "ftp://idp/token" }), "not an http(s) URL"},
		{mod(func(c *Config) { c.TokenEndpoint = "/token" }), "not an http(s) URL"},
		{mod(func(c *Config) { c.TokenEndpoint = "https://user:" + clientSecret + "@idp/token" }), "must not carry credentials"},
		{mod(func(c *Config) { c.TokenEndpoint = "https://idp/token#x" }), "fragment"},
		{mod(func(c *Config) { c.ClientID = "" }), "no client id"},
		{mod(func(c *Config) { c.ClientSecret = auth.Secret{} }), "no client secret"},
		{mod(func(c *Config) { c.ClientID = "a:b" }), "contains ':'"},
		{mod(func(c *Config) { c.Scope = "a  b" }), "scope"},
		{mod(func(c *Config) { c.Scope = `a"b` }), "scope"},
		{mod(func(c *Config) { c.RefreshFactor = 0 }), "refresh factor 0"},
		{mod(func(c *Config) { c.RefreshFactor = 1.2 }), "refresh factor"},
		{mod(func(c *Config) { c.RefreshBuffer = -time.Second }), "refresh buffer"},
		{mod(func(c *Config) { c.RequestTimeout = 0 }), "request timeout"},
		{mod(func(c *Config) { c.RetryBackoff = 0 }), "retry backoff"},
		{mod(func(c *Config) { c.RetryBackoffMax = time.Millisecond }), "retry backoff"},
		{mod(func(c *Config) { c.Extensions = map[string]string{"auth": "x"} }), "reserved"},
		{mod(func(c *Config) { c.Extensions = map[string]string{"bad-key": "x"} }), "extension key"},
	}
	for _, c := range cases {
		p, err := New(c.cfg)
		if p != nil || !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v; want ErrInvalidConfig mentioning %q", err, c.want)
			continue
		}
		noLeak(t, "New error", err)
	}
	if _, err := New(mod(func(c *Config) { c.ClientID = "a:b"; c.URLEncodeCredentials = true })); err != nil {
		t.Errorf("a client id with ':' and URL-encoding: %v", err)
	}
	if _, err := New(mod(func(c *Config) { c.Scope = "kafka:read kafka:write"; c.RefreshBuffer = 0 })); err != nil {
		t.Errorf("scopes and no buffer: %v", err)
	}
}

func TestProviderPrintsRedacted(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	c := config(e)
	noLeak(t, "Config", c)
	p := mustNew(t, c)
	get(t, p)
	noLeak(t, "Provider", p, tokenValue(1))
	if s := fmt.Sprint(p); !strings.Contains(s, clientID) || !strings.Contains(s, e.url()) {
		t.Fatalf("String = %s", s)
	}
}
