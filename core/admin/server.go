package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/security"
)

// DefaultOpTimeout bounds one operation (pause, resume, stop, start, or a
// failover after its wait for catch-up) when Options.OpTimeout is zero.
const DefaultOpTimeout = 10 * time.Minute

// Options configure a Server.
type Options struct {
	// Controller is the engine the API acts on. Required.
	Controller Controller
	// Plugins reports the daemon's plugins (GET /v1/plugins). Default:
	// none, an empty list.
	Plugins PluginSource
	// Logger receives one line per request (named "admin"). Required.
	Logger hclog.Logger
	// Observe, when set, is called once per request answered with its
	// route pattern (RoutePause…; "" when no route matches), HTTP status
	// and duration: the daemon's metrics (core/metrics.AdminRequests).
	Observe func(route string, code int, took time.Duration)
	// OpTimeout bounds one operation; a failover gets its
	// wait_for_catch_up_ms on top. Zero means DefaultOpTimeout. An
	// operation that runs out of time answers 504.
	OpTimeout time.Duration
	// AuthFailuresMax is how many failed authentications from one address
	// within AuthFailureWindow are answered before the address is refused
	// with 429 for the rest of the window. Zero means the default,
	// AuthFailuresMax; negative turns the limit off (tests of other
	// things than the limit).
	AuthFailuresMax int
}

// Server is the admin API, a daemon component: Start opens the listener,
// Reload re-reads the token and TLS files, Stop closes it.
type Server struct {
	ctl       Controller
	plugins   PluginSource
	log       hclog.Logger
	opTimeout time.Duration
	observe   func(route string, code int, took time.Duration)

	limit *authLimiter // failed authentications per client address
	// limitLogMu guards the rate of "too many failures" log lines.
	limitLogMu      sync.Mutex
	limitLogged     time.Time
	limitSuppressed int

	cfg   atomic.Pointer[config.Config] // in force, for source bootstrap servers
	creds atomic.Pointer[credentials]   // who may call
	tls   atomic.Pointer[tls.Config]    // served certificate and client CAs; nil without TLS
	mu    sync.Mutex                    // guards the fields below
	srv   *http.Server                  // nil when not listening
	ln    net.Listener                  // the bound listener
	done  chan struct{}                 // closed when srv.Serve returns
	stop  context.CancelFunc            // cancels in-flight requests
	mode  string                        // "http" or "https", as started
	addr  string                        // admin.address as started
}

// credentials are the means of authentication in force.
type credentials struct {
	tokenHash   [sha256.Size]byte // SHA-256 of the token; the token itself is not kept
	token       bool              // callers must send the bearer token
	clientCerts bool              // callers must present a verified client certificate
	// subjects, when set, are the client certificate subjects allowed
	// (admin.tls.client.subjects).
	subjects config.RegexList
}

// New validates opts and returns a Server; nothing listens yet.
func New(opts Options) (*Server, error) {
	if opts.Controller == nil {
		return nil, errors.New("admin: Options.Controller is required")
	}
	if opts.Logger == nil {
		return nil, errors.New("admin: Options.Logger is required")
	}
	if opts.OpTimeout < 0 {
		return nil, fmt.Errorf("admin: Options.OpTimeout %s is negative", opts.OpTimeout)
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	return &Server{ctl: opts.Controller, plugins: opts.Plugins, log: opts.Logger.Named("admin"), opTimeout: opts.OpTimeout, observe: opts.Observe, limit: newAuthLimiter(opts.AuthFailuresMax)}, nil
}

// Name implements daemon.Component.
func (s *Server) Name() string { return "admin" }

// Addr returns the address the admin API listens on, or "" when it is
// disabled or stopped.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Start prepares the credentials (creating the default token file if
// needed) and opens the listener on admin.address. With admin.address ""
// it does nothing. Request goroutines are owned by the http.Server, which
// Stop shuts down; the context of every request ends when Stop is called.
func (s *Server) Start(ctx context.Context, cfg *config.Config) error {
	if cfg.AdminAddress == "" {
		s.cfg.Store(cfg)
		s.log.Info("admin API disabled (admin.address is empty)")
		return nil
	}
	creds, tc, err := s.prepare(cfg, true)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.AdminAddress)
	if err != nil {
		return fmt.Errorf("admin.address %q: %w", cfg.AdminAddress, err)
	}
	s.cfg.Store(cfg)
	s.creds.Store(creds)
	mode := "http"
	if tc != nil {
		s.tls.Store(tc)
		// The listener asks for the configuration at each handshake, so a
		// reload swaps certificates and client CAs without a restart.
		ln = tls.NewListener(ln, &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				return s.tls.Load(), nil
			},
		})
		mode = "https"
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		// Handshake failures (a client certificate from another CA, a
		// plain-HTTP client) are worth a warning: they are refused calls.
		ErrorLog: s.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.srv, s.ln, s.done, s.stop, s.mode, s.addr = srv, ln, done, cancel, mode, cfg.AdminAddress
	s.mu.Unlock()
	go func() { // owned by the Server: ends when Stop shuts srv down.
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin API listener failed; the admin API is unavailable until a restart", "error", err)
		}
	}()
	s.log.Info("admin API listening", "address", mode+"://"+ln.Addr().String(), "auth", creds.describe(cfg))
	if creds.token && tc == nil && !config.IsLoopbackAddress(cfg.AdminAddress) {
		s.log.Warn("the admin API listens on a non-loopback address without TLS: the bearer token crosses the network in clear text; set admin.tls.cert.file and admin.tls.key.file")
	}
	return nil
}

// Reload re-reads the token file and the TLS files of cfg; on any error it
// keeps the running ones and rejects the configuration. A changed
// admin.address, or TLS switched on or off, takes effect after a restart.
func (s *Server) Reload(ctx context.Context, cfg *config.Config) error {
	s.mu.Lock()
	running, mode, addr := s.srv != nil, s.mode, s.addr
	s.mu.Unlock()
	if !running {
		if cfg.AdminAddress != "" {
			s.log.Warn("admin.address set; the admin API starts after a restart", "configured", cfg.AdminAddress)
		}
		s.cfg.Store(cfg)
		return nil
	}
	if cfg.AdminAddress != addr {
		s.log.Warn("admin.address changed; the new address takes effect after a restart", "running", addr, "configured", cfg.AdminAddress)
	}
	if cfg.AdminAddress == "" {
		// Keep authenticating with what is in force until the restart.
		s.cfg.Store(cfg)
		return nil
	}
	creds, tc, err := s.prepare(cfg, false)
	if err != nil {
		return err
	}
	if (tc != nil) != (mode == "https") {
		s.log.Warn("admin TLS switched on or off; it takes effect after a restart", "running", mode)
	}
	if tc != nil && mode == "https" {
		s.tls.Store(tc)
	}
	s.creds.Store(creds)
	s.cfg.Store(cfg)
	s.log.Info("admin API credentials reloaded", "auth", creds.describe(cfg))
	return nil
}

// Stop cancels in-flight requests and closes the listener, waiting for the
// server to finish within ctx.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	srv, done, cancel := s.srv, s.done, s.stop
	s.srv, s.ln, s.done, s.stop = nil, nil, nil, nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	cancel()
	err := srv.Shutdown(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("admin API did not stop: %w", context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("stopping the admin API: %w", err)
	}
	return nil
}

// prepare builds the credentials and TLS configuration of cfg. With create,
// a missing default token file (<state.dir>/admin.token) is created.
func (s *Server) prepare(cfg *config.Config, create bool) (*credentials, *tls.Config, error) {
	tc, err := cfg.AdminServerTLS()
	if err != nil {
		return nil, nil, fmt.Errorf("admin API TLS: %w", err)
	}
	creds := &credentials{clientCerts: cfg.AdminUsesClientCerts(), token: cfg.AdminUsesToken(), subjects: cfg.AdminTLSClientSubjects}
	if creds.token {
		path := cfg.AdminTokenPath()
		if create && cfg.AdminTokenFile == "" {
			if err := s.ensureTokenFile(path); err != nil {
				return nil, nil, err
			}
		}
		tok, err := security.ReadAdminToken(path)
		if err != nil {
			if cfg.AdminTokenFile == "" && errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("admin token file %s does not exist; it is created at start (restart kmirror) or set admin.token.file: %w", path, err)
			}
			return nil, nil, fmt.Errorf("admin.token.file: %w", err)
		}
		creds.tokenHash = sha256.Sum256([]byte(tok.Reveal()))
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			s.log.Warn("the admin token file is readable by other users; restrict it (chmod 600)", "file", path, "mode", fi.Mode().Perm().String())
		}
	}
	return creds, tc, nil
}

// ensureTokenFile creates path with a random 256-bit token, hex-encoded, mode
// 0600, unless it exists.
func (s *Server) ensureTokenFile(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating the directory of the admin token file: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("generating the admin token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil // another process created it first; read theirs
	}
	if err != nil {
		return fmt.Errorf("creating the admin token file (set admin.token.file to use another file): %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(b[:]) + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("writing the admin token file %s: %w", path, err)
	}
	s.log.Info("created the admin token file; `kmirror` commands with the same configuration read it", "file", path)
	return nil
}

// describe says how callers authenticate, for the start-up log; it names
// the token file, never the token.
func (c *credentials) describe(cfg *config.Config) string {
	var parts []string
	if c.clientCerts {
		parts = append(parts, "client certificate ("+cfg.AdminTLSClientCAFile+")")
	}
	if c.token {
		parts = append(parts, "bearer token ("+cfg.AdminTokenPath()+")")
	}
	return strings.Join(parts, " + ")
}
