// Package oauth is kmirror's built-in credential provider for SASL
// OAUTHBEARER: it obtains access tokens with the OAuth 2.0
// client-credentials grant (RFC 6749 §4.4), caches them and refreshes them
// before they expire.
//
// # Token requests
//
// Token requests are made by golang.org/x/oauth2/clientcredentials: a POST
// to the token endpoint with the form body grant_type=client_credentials
// (and scope=..., if configured), the client id and secret in HTTP Basic
// authentication (RFC 6749 §2.3.1). As in Kafka's own client
// (sasl.oauthbearer.header.urlencode), id and secret are sent as they are
// unless URLEncodeCredentials is set (x/oauth2 always form-encodes them, so
// the provider's transport writes the Basic header itself in that case).
//
// From the response (JSON, or form-encoded) the provider takes access_token
// and expires_in (whole seconds, as a number or a numeric string). Without
// expires_in it reads the exp claim of the token if the token is a JWT, as
// Kafka's client does; a token whose lifetime cannot be known is refused,
// since the provider could not tell when to refresh it. kmirror does not
// validate the token's claims (sub, scope): the broker does.
//
// # Refresh
//
// A token fetched at t0 with lifetime L is served from the cache until its
// refresh time, the earlier of t0 + RefreshFactor·L and t0 + L −
// RefreshBuffer, but never before t0 + L/2 (so that tokens shorter than the
// buffer do not cause a request per connection). The next call after that
// fetches a new token; concurrent callers share one request.
//
// If a refresh fails while the cached token has not yet expired, callers
// keep getting the cached token, the failure is logged, and the refresh is
// retried after RetryBackoff, doubling up to RetryBackoffMax. Once the token
// has expired, a failed fetch is returned as an error.
//
// # Errors
//
// Errors name the token endpoint and, for an error response, its HTTP
// status and OAuth error code (RFC 6749 §5.2); they never contain the client
// secret or a token. HTTP 401 and 403, and 400 with invalid_client,
// unauthorized_client, invalid_grant or invalid_scope, wrap
// auth.ErrRejected; other 4xx responses too, since a retry would get the
// same answer (a wrong URL, for example). Network errors, timeouts, 5xx,
// 408, 429 and unusable responses wrap auth.ErrUnavailable.
package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kmirror/kmirror/sdk/auth"
)

// Config is the configuration of an OAuth provider. Start from
// DefaultConfig: New uses the values as they are and rejects the zero
// values of the tuning fields.
type Config struct {
	// TokenEndpoint is the http(s) URL of the token endpoint
	// (sasl.oauthbearer.token.endpoint.url). Required; must not carry
	// credentials.
	TokenEndpoint string
	// ClientID and ClientSecret authenticate kmirror to the endpoint.
	// Required.
	ClientID     string
	ClientSecret auth.Secret
	// Scope is the space-separated scope to request; empty requests
	// none.
	Scope string
	// Extensions are SASL extensions sent to the broker with each token
	// (RFC 7628 §3.1).
	Extensions map[string]string
	// URLEncodeCredentials form-encodes the client id and secret before
	// Basic authentication, as RFC 6749 §2.3.1 asks. Default false, as
	// Kafka's sasl.oauthbearer.header.urlencode.
	URLEncodeCredentials bool

	// RefreshFactor is the fraction of a token's lifetime after which it
	// is refreshed, in [0.5, 1]. Default 0.8
	// (sasl.login.refresh.window.factor).
	RefreshFactor float64
	// RefreshBuffer: a token is refreshed at the latest this long before
	// it expires (subject to the L/2 floor), in [0, 1h]. Default 5m
	// (sasl.login.refresh.buffer.seconds).
	RefreshBuffer time.Duration
	// RequestTimeout bounds one token request. Default 30s.
	RequestTimeout time.Duration
	// RetryBackoff and RetryBackoffMax space refresh attempts while a
	// still valid token is served after a failure. Defaults 100ms and 10s
	// (sasl.login.retry.backoff.ms, sasl.login.retry.backoff.max.ms).
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration

	// HTTPClient sends token requests. Default: a client of its own
	// using the system's roots for TLS.
	HTTPClient *http.Client
	// Logger receives a warning when a refresh fails while the cached
	// token is still served, and debug messages on fetches. Default:
	// discard. Messages never contain a secret.
	Logger *slog.Logger
	// Now is the clock, for tests. Default time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults of every tuning field; set the
// endpoint and client credentials on it.
func DefaultConfig() Config {
	return Config{
		RefreshFactor:   0.8,
		RefreshBuffer:   5 * time.Minute,
		RequestTimeout:  30 * time.Second,
		RetryBackoff:    100 * time.Millisecond,
		RetryBackoffMax: 10 * time.Second,
	}
}

// errRequestTimeout is the cause of a request's context when
// Config.RequestTimeout (not the caller's context) ended it.
var errRequestTimeout = errors.New("token request timeout")

// RFC 6749 appendix A.4 scope-token and A.7 error characters.
var (
	scopeRE     = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$`)
	errorCodeRE = regexp.MustCompile(`^[\x20-\x21\x23-\x5B\x5D-\x7E]{1,64}$`)
)

// Provider implements auth.Provider. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	endpoint string // for messages
	cc       *clientcredentials.Config
	client   *http.Client // cfg.HTTPClient (or its own) behind tokenTransport
	ownsHTTP bool
	log      *slog.Logger

	// closeCtx is canceled by Close; it aborts an in-flight request.
	closeCtx context.Context
	close    context.CancelFunc

	// fetching is a one-slot semaphore held while a token is requested,
	// so that concurrent callers share one request and can give up
	// waiting when their context ends.
	fetching chan struct{}

	mu          sync.Mutex
	tok         *token
	gen         uint64 // number of completed fetches
	lastErr     error  // of the last fetch, nil if it succeeded
	backoff     time.Duration
	nextAttempt time.Time // no refresh before, while a valid token is served
}

type token struct {
	value     auth.Secret
	fetched   time.Time
	expiry    time.Time
	refreshAt time.Time
}

var _ auth.Provider = (*Provider)(nil)

// New validates cfg and returns a provider. It does not contact the token
// endpoint: the first Credentials call does. Errors wrap
// auth.ErrInvalidConfig and never contain the client secret.
func New(cfg Config) (*Provider, error) {
	if err := validate(&cfg); err != nil {
		return nil, fmt.Errorf("oauth auth provider: %w: %w", auth.ErrInvalidConfig, err)
	}
	p := &Provider{cfg: cfg, endpoint: cfg.TokenEndpoint, log: cfg.Logger, fetching: make(chan struct{}, 1)}
	base := cfg.HTTPClient
	if base == nil {
		// A transport of its own, so that Close drops only its own
		// idle connections.
		base = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		p.ownsHTTP = true
	}
	client := *base
	client.Transport = &tokenTransport{base: base.Transport, cfg: &p.cfg}
	p.client = &client
	p.cc = &clientcredentials.Config{
		ClientID:     cfg.ClientID,
		ClientSecret: cfg.ClientSecret.Reveal(),
		TokenURL:     cfg.TokenEndpoint,
		Scopes:       strings.Fields(cfg.Scope),
		// Never the probe that retries with the secret in the body.
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.cfg.Now == nil {
		p.cfg.Now = time.Now
	}
	p.cfg.Extensions = maps.Clone(cfg.Extensions)
	p.closeCtx, p.close = context.WithCancel(context.Background())
	return p, nil
}

// fieldError is a problem of one Config field, under its plugin key.
type fieldError struct {
	key string
	msg string
	err error // a cause, or nil
}

func (e *fieldError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *fieldError) Unwrap() error { return e.err }

// validate returns a *fieldError for the first problem of c. Messages name
// no secret.
func validate(c *Config) error {
	bad := func(key, format string, args ...any) error {
		return &fieldError{key: key, msg: fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(c.TokenEndpoint)
	switch {
	case c.TokenEndpoint == "":
		return bad(KeyTokenEndpoint, "no token endpoint URL")
	case err != nil:
		return bad(KeyTokenEndpoint, "token endpoint %q is not a URL", c.TokenEndpoint)
	case (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return bad(KeyTokenEndpoint, "token endpoint %q is not an http(s) URL with a host", c.TokenEndpoint)
	case u.User != nil:
		return bad(KeyTokenEndpoint, "the token endpoint URL must not carry credentials; set the client id and secret")
	case u.Fragment != "":
		return bad(KeyTokenEndpoint, "token endpoint %q has a fragment", c.TokenEndpoint)
	case c.ClientID == "":
		return bad(KeyClientID, "no client id")
	case !c.ClientSecret.IsSet():
		return bad(KeyClientSecret, "no client secret")
	case !c.URLEncodeCredentials && strings.Contains(c.ClientID, ":"):
		return bad(KeyClientID, "client id %q contains ':', which Basic authentication cannot carry; enable URL-encoding of the credentials", c.ClientID)
	case c.Scope != "" && !scopeRE.MatchString(c.Scope):
		return bad(KeyScope, "scope %q: use scope tokens of printable ASCII other than '\"' and '\\', separated by single spaces", c.Scope)
	case c.RefreshFactor < 0.5 || c.RefreshFactor > 1:
		return bad(KeyRefreshFactor, "refresh factor %v is outside [0.5, 1] (start from DefaultConfig)", c.RefreshFactor)
	case c.RefreshBuffer < 0 || c.RefreshBuffer > time.Hour:
		return bad(KeyRefreshBuffer, "refresh buffer %v is outside [0, 1h]", c.RefreshBuffer)
	case c.RequestTimeout <= 0:
		return bad(KeyRequestTimeout, "request timeout %v must be positive (start from DefaultConfig)", c.RequestTimeout)
	case c.RetryBackoff <= 0 || c.RetryBackoffMax < c.RetryBackoff:
		return bad(KeyRetryBackoff, "retry backoff %v and its maximum %v: need 0 < backoff <= maximum (start from DefaultConfig)", c.RetryBackoff, c.RetryBackoffMax)
	}
	// Extensions follow the rules the SDK checks on credentials.
	probe := auth.Credentials{Token: auth.NewSecret("probe"), Expiry: time.Unix(1, 0), Extensions: c.Extensions}
	if err := probe.Validate(auth.MechanismOAuthBearer); err != nil {
		return &fieldError{key: KeyExtensions, msg: "extensions", err: err}
	}
	return nil
}

// Info implements auth.Provider.
func (p *Provider) Info() auth.Info {
	return auth.Info{Name: "oauth", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor,
		Mechanisms: []string{auth.MechanismOAuthBearer}}
}

// String describes the provider without its secret.
func (p *Provider) String() string {
	return fmt.Sprintf("oauth auth provider (client %q at %s)", p.cfg.ClientID, p.endpoint)
}

// Format prints String for every verb: fmt would otherwise print the
// unexported secret and token fields raw.
func (p *Provider) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// Credentials implements auth.Provider: it returns the cached token, or
// fetches one (see the package documentation).
func (p *Provider) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	fail := func(err error) (auth.Credentials, error) {
		return auth.Credentials{}, fmt.Errorf("oauth auth provider: %v: %w", req, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if p.closeCtx.Err() != nil {
		return fail(auth.ErrClosed)
	}
	if err := req.Validate(); err != nil {
		return auth.Credentials{}, fmt.Errorf("oauth auth provider: %w", err)
	}
	if req.Mechanism != auth.MechanismOAuthBearer {
		return fail(fmt.Errorf("%w: it serves %s only", auth.ErrUnsupportedMechanism, auth.MechanismOAuthBearer))
	}

	p.mu.Lock()
	tok, gen := p.tok, p.gen
	p.mu.Unlock()
	now := p.cfg.Now()
	if tok != nil && now.Before(tok.refreshAt) {
		return p.credentials(tok), nil
	}

	// A refresh is due. Take the fetch slot; while someone else holds it
	// and the current token is still valid, serve that instead of waiting.
	select {
	case p.fetching <- struct{}{}:
	default:
		if tok != nil && now.Before(tok.expiry) {
			return p.credentials(tok), nil
		}
		select {
		case p.fetching <- struct{}{}:
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-p.closeCtx.Done():
			return fail(auth.ErrClosed)
		}
	}
	defer func() { <-p.fetching }()

	p.mu.Lock()
	tok, now = p.tok, p.cfg.Now()
	switch {
	case tok != nil && now.Before(tok.refreshAt):
		// Refreshed while we waited.
		p.mu.Unlock()
		return p.credentials(tok), nil
	case p.gen != gen && p.lastErr != nil && (tok == nil || !now.Before(tok.expiry)):
		// A fetch failed while we waited, and there is no valid token:
		// share its error rather than asking again at once.
		err := p.lastErr
		p.mu.Unlock()
		return fail(err)
	case tok != nil && now.Before(tok.expiry) && now.Before(p.nextAttempt):
		// Backing off after a failed refresh.
		p.mu.Unlock()
		return p.credentials(tok), nil
	}
	p.mu.Unlock()

	fetched, err := p.fetch(ctx)

	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closeCtx.Err() != nil:
		return fail(auth.ErrClosed)
	case err != nil && ctx.Err() != nil:
		// The caller gave up; that says nothing about the endpoint, so
		// it is not recorded for others.
		if !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return fail(err)
	}
	p.gen++
	p.lastErr = err
	if err == nil {
		p.tok, p.backoff, p.nextAttempt = fetched, 0, time.Time{}
		return p.credentials(fetched), nil
	}
	now = p.cfg.Now()
	if tok != nil && now.Before(tok.expiry) {
		p.backoff = min(max(2*p.backoff, p.cfg.RetryBackoff), p.cfg.RetryBackoffMax)
		p.nextAttempt = now.Add(p.backoff)
		p.log.Warn("token refresh failed; serving the current token until it expires",
			"endpoint", p.endpoint, "expires_in", tok.expiry.Sub(now).Round(time.Second).String(),
			"retry_in", p.backoff.String(), "error", err.Error())
		return p.credentials(tok), nil
	}
	return fail(err)
}

func (p *Provider) credentials(t *token) auth.Credentials {
	return auth.Credentials{Token: t.value, Expiry: t.expiry, Extensions: maps.Clone(p.cfg.Extensions)}
}

// tokenTransport adds what x/oauth2 leaves out of a token request: the
// Accept header, and Basic credentials that are not form-encoded unless
// URLEncodeCredentials asks (Kafka's default).
type tokenTransport struct {
	base http.RoundTripper // nil: http.DefaultTransport
	cfg  *Config
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept", "application/json")
	if !t.cfg.URLEncodeCredentials {
		r.SetBasicAuth(t.cfg.ClientID, t.cfg.ClientSecret.Reveal())
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// fetch requests a token. The error wraps auth.ErrRejected or
// auth.ErrUnavailable (and ctx.Err() when ctx ended) and names the
// endpoint.
func (p *Provider) fetch(ctx context.Context) (*token, error) {
	reqCtx, cancel := context.WithTimeoutCause(ctx, p.cfg.RequestTimeout, errRequestTimeout)
	defer cancel()
	stop := context.AfterFunc(p.closeCtx, cancel)
	defer stop()

	start := p.cfg.Now()
	tok, err := p.cc.Token(context.WithValue(reqCtx, oauth2.HTTPClient, p.client))
	if err != nil {
		return nil, p.fetchError(ctx, reqCtx, err)
	}
	return p.parseToken(tok, start)
}

// fetchError turns an error of x/oauth2 into one wrapping auth.ErrRejected
// or auth.ErrUnavailable, naming the endpoint and never the secret, a token
// or the response body.
func (p *Provider) fetchError(ctx, reqCtx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("token endpoint %s: request abandoned: %w", p.endpoint, ctx.Err())
	case p.closeCtx.Err() != nil:
		return fmt.Errorf("token endpoint %s: request abandoned: %w", p.endpoint, auth.ErrClosed)
	case context.Cause(reqCtx) == errRequestTimeout:
		return fmt.Errorf("token endpoint %s: %w: no response within %v: %w", p.endpoint, auth.ErrUnavailable, p.cfg.RequestTimeout, context.DeadlineExceeded)
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return p.errorResponse(re)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// A url.Error names the method and URL; the URL carries no
		// credentials (New checks). Report only its cause.
		return fmt.Errorf("token endpoint %s: %w: %v", p.endpoint, auth.ErrUnavailable, ue.Err)
	}
	// A response x/oauth2 could not read: its messages quote at most a
	// number, never the token, and are scrubbed of the secret anyway.
	msg := strings.TrimPrefix(err.Error(), "oauth2: ")
	switch {
	case strings.Contains(msg, "missing access_token"):
		msg = "no access_token"
	case strings.HasPrefix(msg, "cannot parse json: "):
		msg = "not a JSON token response (" + strings.TrimPrefix(msg, "cannot parse json: ") + ")"
	}
	return fmt.Errorf("token endpoint %s: unusable response: %s: %w", p.endpoint, p.scrub(msg), auth.ErrUnavailable)
}

// errorResponse turns an error response into an error wrapping
// auth.ErrRejected or auth.ErrUnavailable.
func (p *Provider) errorResponse(re *oauth2.RetrieveError) error {
	status, text := 0, "(no response)"
	if re.Response != nil {
		status, text = re.Response.StatusCode, re.Response.Status
	}
	detail := ""
	if errorCodeRE.MatchString(re.ErrorCode) {
		// Scrubbed too: an endpoint may echo the secret in any field.
		detail = " (" + p.scrub(re.ErrorCode)
		if d := p.scrub(re.ErrorDescription); d != "" {
			detail += ": " + d
		}
		detail += ")"
	}
	sentinel := auth.ErrRejected
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500, status < 400:
		sentinel = auth.ErrUnavailable
	}
	what := "the token endpoint refused the client credentials; check the client id, secret and scope"
	if sentinel == auth.ErrUnavailable {
		what = "the token endpoint failed; retrying"
	} else if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		what = "check the token endpoint URL"
	}
	return fmt.Errorf("token endpoint %s: HTTP %s%s: %w: %s", p.endpoint, text, detail, sentinel, what)
}

// scrub makes an endpoint-supplied description safe to show: printable,
// at most 200 bytes, and without the client secret should the endpoint echo
// it.
func (p *Provider) scrub(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if secret := p.cfg.ClientSecret.Reveal(); secret != "" {
		s = strings.ReplaceAll(s, secret, auth.Redacted)
	}
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// parseToken checks a token x/oauth2 returned and works out its lifetime.
// start is when the request was sent: lifetimes count from then, so a slow
// response errs towards an early refresh (x/oauth2's own Expiry counts from
// the response, on the system clock, and is not used).
func (p *Provider) parseToken(t *oauth2.Token, start time.Time) (*token, error) {
	bad := func(format string, args ...any) (*token, error) {
		return nil, fmt.Errorf("token endpoint %s: unusable response: %s: %w", p.endpoint, fmt.Sprintf(format, args...), auth.ErrUnavailable)
	}
	var lifetime time.Duration
	if raw := t.Extra("expires_in"); raw != nil && raw != "" {
		secs, err := parseSeconds(raw)
		if err != nil {
			return bad("expires_in: %v", err)
		}
		lifetime = secs
	} else {
		exp, ok := jwtExpiry(t.AccessToken)
		if !ok {
			return bad("no expires_in, and the token is not a JWT with an exp claim; cannot tell when it expires")
		}
		lifetime = exp.Sub(start)
		if lifetime <= 0 {
			return bad("the token's exp claim (%v) has passed", exp.UTC().Format(time.RFC3339))
		}
	}
	tok := &token{value: auth.NewSecret(t.AccessToken), fetched: start, expiry: start.Add(lifetime)}
	tok.refreshAt = refreshAt(start, lifetime, p.cfg.RefreshFactor, p.cfg.RefreshBuffer)
	if err := p.credentials(tok).Validate(auth.MechanismOAuthBearer); err != nil {
		return bad("%v", err)
	}
	p.log.Debug("fetched a token", "endpoint", p.endpoint, "lifetime", lifetime.String(),
		"refresh_in", tok.refreshAt.Sub(start).Round(time.Second).String())
	return tok, nil
}

// parseSeconds reads expires_in as x/oauth2 decoded it (a JSON number, a
// numeric string, or a form value): positive and at most ten years.
func parseSeconds(raw any) (time.Duration, error) {
	var f float64
	switch v := raw.(type) {
	case float64:
		f = v
	case int64:
		f = float64(v)
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return 0, fmt.Errorf("%q is not a number of seconds", v)
		}
	default:
		return 0, fmt.Errorf("a %T is not a number of seconds", raw)
	}
	if f <= 0 || f > 10*365*24*3600 {
		return 0, fmt.Errorf("%v seconds is not a usable lifetime", raw)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// jwtExpiry returns the exp claim of a JWT (RFC 7519), without verifying
// anything else.
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	sec := int64(*claims.Exp)
	return time.Unix(sec, int64((*claims.Exp-float64(sec))*1e9)), true
}

// refreshAt is when a token fetched at start with lifetime L is refreshed:
// the earlier of start+factor·L and start+L−buffer, not before start+L/2.
func refreshAt(start time.Time, lifetime time.Duration, factor float64, buffer time.Duration) time.Time {
	at := start.Add(time.Duration(float64(lifetime) * factor))
	if b := start.Add(lifetime - buffer); b.Before(at) {
		at = b
	}
	if floor := start.Add(lifetime / 2); at.Before(floor) {
		at = floor
	}
	return at
}

// Close implements auth.Provider: it aborts a token request in flight and
// drops the cached token. Afterwards Credentials fails with auth.ErrClosed.
func (p *Provider) Close() error {
	p.close()
	p.mu.Lock()
	p.tok = nil
	p.mu.Unlock()
	if p.ownsHTTP {
		p.client.CloseIdleConnections()
	}
	return nil
}
