// Package adminclient is the command line's client of a running daemon's
// admin API: the flags that locate it and authenticate to it (through the
// daemon's own configuration file, with explicit overrides), and the calls,
// whose refusals keep the API's reason.
package adminclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/security"
)

// Flags locate and authenticate to the daemon's admin API: through the
// daemon's own configuration file (admin.address, the token file, the TLS
// files), with explicit overrides.
type Flags struct {
	Config    cli.ConfigFlags // --config and --set: the daemon's configuration
	Address   string          // --admin-address, "" to take admin.address
	tokenFile string
	tlsCA     string
	tlsCert   string
	tlsKey    string
	token     string // $KMIRROR_ADMIN_TOKEN, used when no token file is named
}

// Client talks to one daemon's admin API.
type Client struct {
	base   string // scheme://host:port
	token  string // "" sends no Authorization header
	client *http.Client
}

// Client builds the client from the flags and cfg, the daemon's
// configuration (nil without --config).
func (a *Flags) Client(cfg *config.Config) (*Client, error) {
	addr, scheme := a.Address, ""
	if addr == "" {
		addr = cfg.AdminAddress
		if addr == "" {
			return nil, fmt.Errorf("admin.address is empty in %s, so the daemon runs no admin API: set admin.address and restart `kmirror run`, or pass --admin-address", a.Config.Path)
		}
	} else if s, rest, found := strings.Cut(addr, "://"); found {
		if s != "http" && s != "https" {
			return nil, fmt.Errorf("--admin-address %q: the scheme must be http or https", addr)
		}
		scheme, addr = s, rest
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("admin address %q is not host:port: %v", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1" // the daemon listens on every interface; loopback is one
	}
	if scheme == "" {
		scheme = "http"
		if a.tlsCA != "" || a.tlsCert != "" || (cfg != nil && cfg.AdminUsesTLS()) {
			scheme = "https"
		}
	}
	c := &Client{base: scheme + "://" + net.JoinHostPort(host, port)}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if scheme == "https" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		switch {
		case a.tlsCA != "":
			if tc.RootCAs, err = security.LoadCertPool(a.tlsCA); err != nil {
				return nil, fmt.Errorf("--tls-ca: %v", err)
			}
		case cfg != nil && cfg.AdminTLSCertFile != "":
			// On the daemon's host its own certificate is the natural
			// trust anchor (works for a self-signed one too).
			if tc.RootCAs, err = security.LoadCertPool(cfg.AdminTLSCertFile); err != nil {
				return nil, fmt.Errorf("admin.tls.cert.file (used to verify the admin API; pass --tls-ca to use a CA instead): %v", err)
			}
		}
		if a.tlsCert != "" {
			pair, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		tr.TLSClientConfig = tc
	}
	c.client = &http.Client{Transport: tr}

	tokenPath := a.tokenFile
	if tokenPath == "" && a.token != "" {
		c.token = a.token
		return c, nil
	}
	if tokenPath == "" && cfg != nil {
		tokenPath = cfg.AdminTokenPath() // "" when mTLS alone is configured
	}
	if tokenPath != "" {
		tok, err := security.ReadAdminToken(tokenPath)
		switch {
		case errors.Is(err, fs.ErrNotExist) && a.tokenFile == "" && cfg.AdminTokenFile == "":
			return nil, fmt.Errorf("the admin token %s does not exist: `kmirror run` creates it at its first start with this configuration's state.dir; is the daemon running with this config? (or pass --admin-token-file)", tokenPath)
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("cannot read the admin token %s: permission denied; run as the daemon's user, or pass --admin-token-file", tokenPath)
		case err != nil:
			return nil, fmt.Errorf("admin token: %v", err)
		}
		c.token = tok.Reveal()
	}
	return c, nil
}

// Call sends one request and decodes a 2xx answer into out. Any other
// answer becomes an *Error carrying the API's reason.
func (c *Client) Call(method, path string, body, out any, timeout time.Duration) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said below; the token is never in it
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer from the admin API at %s within %s: the operation may still be running; check with `kmirror mirrors describe` and repeat the command (operations are idempotent)", c.base, timeout)
		}
		return fmt.Errorf("cannot reach the admin API at %s: is `kmirror run` running with this config? (%v)", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e admin.ErrorResponse
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &Error{Status: resp.StatusCode, Code: e.Code, Hint: e.Hint, msg: e.Error}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the answer of %s %s is not what this kmirror version expects (%v); are the CLI and the daemon the same version?", method, path, err)
	}
	return nil
}

// Error is a refusal or failure the admin API reported.
type Error struct {
	Status int    // the HTTP status
	Code   string // the API's code (admin.Code*); "" from a daemon that sends none
	Hint   string // what to do, when the API says
	msg    string
}

// Message is what the API said failed, without the hint.
func (e *Error) Message() string { return e.msg }

// Error says what the API answered, with its reason and hint.
func (e *Error) Error() string {
	msg := e.Headline()
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Headline says what the API answered, with its reason but not the hint.
func (e *Error) Headline() string {
	msg := e.msg
	switch e.Status {
	case http.StatusUnauthorized:
		return "the admin API refused the call (401 Unauthorized): " + msg
	case http.StatusNotFound:
		return "not found: " + msg
	case http.StatusConflict:
		return "refused (409 Conflict): " + msg
	case http.StatusUnprocessableEntity:
		return "refused (422): " + msg
	case http.StatusServiceUnavailable:
		return "unavailable now (503): " + msg
	case http.StatusGatewayTimeout:
		return "timed out (504): " + msg
	}
	return fmt.Sprintf("%s: %s", http.StatusText(e.Status), msg)
}

// Timeouts of the calls below: reads answer at once; operations wait for
// the partitions they act on, up to the daemon's 10 minutes.
const (
	readTimeout = 30 * time.Second
	opTimeout   = 11 * time.Minute
)

func mirrorPath(mirror string) string { return "/v1/mirrors/" + url.PathEscape(mirror) }

// Lag returns the lag of mirror's partitions per topic, of the topics
// matching the regexes topics (every topic when none): what a client polls
// to show a planned failover's catch-up. It only reads.
func (c *Client) Lag(mirror string, topics []string) (admin.LagReport, error) {
	q := url.Values{}
	for _, t := range topics {
		q.Add("topic", t)
	}
	path := mirrorPath(mirror) + "/lag"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out admin.LagReport
	err := c.Call(http.MethodGet, path, nil, &out, readTimeout)
	return out, err
}

// PlanStop is a dry run of stopping mirror's topics matching topics.
func (c *Client) PlanStop(mirror string, topics []string) (admin.Plan, error) {
	var out admin.Plan
	err := c.Call(http.MethodPost, mirrorPath(mirror)+"/stop", admin.TopicsRequest{Topics: topics, DryRun: true}, &out, opTimeout)
	return out, err
}

// PlanReset is a dry run of a reset of mirror's topics matching topics.
func (c *Client) PlanReset(mirror string, topics []string) (admin.Plan, error) {
	var out admin.Plan
	err := c.Call(http.MethodPost, mirrorPath(mirror)+"/reset", admin.TopicsRequest{Topics: topics, DryRun: true}, &out, opTimeout)
	return out, err
}

// PlanFailover is a dry run of a failover of mirror's topics matching
// topics (every topic when none), planned when wait > 0.
func (c *Client) PlanFailover(mirror string, topics []string, wait time.Duration) (admin.Plan, error) {
	var out admin.Plan
	err := c.Call(http.MethodPost, mirrorPath(mirror)+"/failover", admin.FailoverRequest{Topics: topics, WaitForCatchUpMs: wait.Milliseconds(), DryRun: true}, &out, opTimeout)
	return out, err
}

// PlanFailback is a dry run of mirror's failback: per partition what would
// be decided, and which topics would be created or deleted on the old
// source.
func (c *Client) PlanFailback(mirror string, allowRecreate bool, sideTopicSuffix string) (admin.Plan, error) {
	var out admin.Plan
	err := c.Call(http.MethodPost, mirrorPath(mirror)+"/failback", admin.FailbackRequest{AllowRecreate: allowRecreate, SideTopicSuffix: sideTopicSuffix, DryRun: true}, &out, opTimeout)
	return out, err
}

// PlanDelete is a dry run of deleting run-time mirror mirror.
func (c *Client) PlanDelete(mirror string) (admin.Plan, error) {
	var out admin.Plan
	err := c.Call(http.MethodDelete, mirrorPath(mirror)+"?dry_run=true", nil, &out, opTimeout)
	return out, err
}

// Failover fails mirror's topics matching topics over; with wait > 0 a
// planned failover (the daemon first waits up to wait for zero lag). To
// show progress, poll Lag until it is caught up first, then call Failover
// with a short wait: interrupting the polling changes nothing.
func (c *Client) Failover(mirror string, topics []string, wait time.Duration) (admin.FailoverResult, error) {
	var out admin.FailoverResult
	err := c.Call(http.MethodPost, mirrorPath(mirror)+"/failover", admin.FailoverRequest{Topics: topics, WaitForCatchUpMs: wait.Milliseconds()}, &out, opTimeout+wait)
	return out, err
}
