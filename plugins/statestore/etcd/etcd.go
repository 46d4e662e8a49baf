// Package etcd is a statestore.Store on etcd v3, which several kmirror
// daemons can share: versions are etcd revisions, compare-and-set is an etcd
// transaction, leases are etcd leases.
//
// # Versions and compare-and-set
//
// The version of an entry is its etcd ModRevision: the store-wide revision
// of the transaction that last wrote the key. Revisions strictly increase
// and are never reused, so a key deleted and created again gets a larger
// version than any it had before (no ABA). Put with an expected version is
// one transaction:
//
//	Absent      If(CreateRevision(key) == 0) Then(Put) Else(Get)
//	v > 0       If(ModRevision(key) == v)    Then(Put) Else(Get)
//	AnyVersion  Put
//
// and Delete likewise, so of several daemons writing with the same expected
// version exactly one succeeds. etcd commits a write on a quorum of members,
// each fsyncing its log, before it answers; reads are linearizable.
//
// # Keys
//
// Every key is stored under Config.Prefix ("kmirror/" by default), so
// several kmirror deployments, or kmirror and other applications, share one
// etcd cluster; with etcd's authentication a role limited to that prefix is
// all kmirror needs. List reads pages of Config.ListPageSize keys, so
// neither etcd's nor gRPC's message limits bound how much state a mirror
// keeps; a single value is bounded by etcd's --max-request-bytes (1.5 MiB
// by default).
//
// # Deadlines and Close
//
// Every request is bounded by Config.RequestTimeout within the caller's
// context. A write that ends with its context fails with an error wrapping
// context.DeadlineExceeded (or Canceled), yet etcd may still apply it, even
// after the error was returned (a request it had received but not
// processed yet). Compare-and-set keeps that harmless: a re-read shows the
// write or the previous value, and a write that lands late with an
// expected version that has moved on fails in etcd. Close waits for the
// operations in flight, each bounded by the request timeout, and closes
// the client.
//
// # Leases
//
// A lease key is bound to an etcd lease with the lease's TTL (rounded up
// to whole seconds, and raised by etcd to its minimum, about 2s with the
// default heartbeat): when the holder stops renewing, etcd deletes the key
// at the TTL, and the next AcquireLease finds it free. Acquire is a
// transaction If(CreateRevision == 0); renew grants a new etcd lease with
// the new TTL, rebinds the key to it by compare-and-set on the version
// read (so the lease's version changes with every renew and can fence work
// done under it) and revokes the old etcd lease; release deletes the key by
// compare-and-set and revokes its etcd lease. The value is the JSON record
// of the generic leases (holder, renewed_at, expires_at, ttl), so tools
// read both alike. A lease record without an etcd lease (copied from
// another store, or written with Put) expires as a generic lease does: once
// its version has not changed for a whole TTL as seen by this Store.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// ErrInvalidConfig: Open was given an invalid Config. The error names the
// field.
var ErrInvalidConfig = errors.New("etcd state store: invalid configuration")

// Config is the configuration of an etcd state store. Start from
// DefaultConfig and set Endpoints.
type Config struct {
	// Endpoints are the client URLs of etcd members: host:port,
	// http://host:port or https://host:port. Required.
	Endpoints []string
	// Prefix is put before every key, so that several kmirror deployments
	// share one etcd. Empty (the whole key space) or ending with '/';
	// UTF-8 without NUL. Default "kmirror/".
	Prefix string

	// Username and Password authenticate kmirror with etcd's
	// authentication (both or neither). PasswordFile, instead of Password,
	// names a file holding the password (read once by Open; one trailing
	// newline is removed).
	Username     string
	Password     auth.Secret
	PasswordFile string

	// CAFile is a PEM file of the CAs that sign the etcd members'
	// certificates; setting it (or an https:// endpoint) turns TLS on.
	// Empty with TLS on: the system's roots.
	CAFile string
	// CertFile and KeyFile are kmirror's client certificate and key (PEM),
	// for etcd's --client-cert-auth. Both or neither; setting them turns
	// TLS on.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the members' certificates.
	// Default: the endpoint's host.
	ServerName string

	// DialTimeout bounds Open's first contact with etcd (including
	// authentication). Default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds each request to etcd, within the caller's
	// context. Default 10s.
	RequestTimeout time.Duration
	// MaxRequestBytes is the largest request the client sends, so the
	// largest value it can write. etcd's own --max-request-bytes (1.5 MiB
	// by default) must be raised as well for larger values. Default 8 MiB.
	MaxRequestBytes int
	// ListPageSize is how many keys one request of List reads. Default
	// 500.
	ListPageSize int
}

// DefaultConfig returns the defaults of every field but Endpoints.
func DefaultConfig() Config {
	return Config{
		Prefix:          "kmirror/",
		DialTimeout:     5 * time.Second,
		RequestTimeout:  10 * time.Second,
		MaxRequestBytes: 8 << 20,
		ListPageSize:    500,
	}
}

// fieldError is a problem with one field of Config, named by its
// configuration key.
type fieldError struct {
	key    string // "endpoints", "prefix", ...
	reason string
}

func (e *fieldError) Error() string { return e.key + ": " + e.reason }

func bad(key, format string, args ...any) error {
	return &fieldError{key: key, reason: fmt.Sprintf(format, args...)}
}

// validate checks c; the error is a *fieldError and never holds the
// password.
func (c *Config) validate() error {
	if len(c.Endpoints) == 0 {
		return bad(KeyEndpoints, "at least one etcd client URL is required")
	}
	tlsOn := c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
	for i, ep := range c.Endpoints {
		host := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok {
			switch scheme {
			case "http":
				if tlsOn {
					return bad(KeyEndpoints, "[%d] %q: http:// while TLS files are set; use https:// or host:port", i, ep)
				}
			case "https":
			default:
				return bad(KeyEndpoints, "[%d] %q: scheme %q (use host:port, http:// or https://)", i, ep, scheme)
			}
			host = rest
		}
		if host == "" || strings.ContainsAny(host, "/@ ") {
			return bad(KeyEndpoints, "[%d] %q: not host:port", i, ep)
		}
	}
	switch {
	case c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/"):
		return bad(KeyPrefix, "%q must end with '/' (or be empty), so that no deployment's keys start with another's prefix", c.Prefix)
	case !utf8.ValidString(c.Prefix) || strings.IndexByte(c.Prefix, 0) >= 0:
		return bad(KeyPrefix, "%q must be UTF-8 without NUL bytes", c.Prefix)
	case c.Password.IsSet() && c.PasswordFile != "":
		return bad(KeyPasswordFile, "set one of password and password_file")
	case c.Username == "" && (c.Password.IsSet() || c.PasswordFile != ""):
		return bad(KeyUsername, "required with a password")
	case c.Username != "" && !c.Password.IsSet() && c.PasswordFile == "":
		return bad(KeyPassword, "required with a username (or password_file)")
	case (c.CertFile == "") != (c.KeyFile == ""):
		return bad(KeyKeyFile, "set cert_file and key_file both or neither")
	case c.DialTimeout <= 0:
		return bad(KeyDialTimeout, "%s: must be positive", c.DialTimeout)
	case c.RequestTimeout <= 0:
		return bad(KeyRequestTimeout, "%s: must be positive", c.RequestTimeout)
	case c.MaxRequestBytes < 1<<20:
		return bad(KeyMaxRequestBytes, "%d: at least 1 MiB", c.MaxRequestBytes)
	case c.ListPageSize < 1:
		return bad(KeyListPageSize, "%d: at least 1", c.ListPageSize)
	}
	return nil
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	https := false
	for _, ep := range c.Endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	if c.CAFile == "" && c.CertFile == "" && !https {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, &fieldError{key: KeyCAFile, reason: err.Error()}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, bad(KeyCAFile, "%s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, bad(KeyCertFile, "%s with key_file %s: %v", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (c *Config) password() (string, error) {
	if c.PasswordFile == "" {
		return c.Password.Reveal(), nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		// os errors name the file, never its content.
		return "", &fieldError{key: KeyPasswordFile, reason: err.Error()}
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", bad(KeyPasswordFile, "%s is empty", c.PasswordFile)
	}
	return pw, nil
}

// Store is a statestore.Store on etcd. Create it with Open.
type Store struct {
	client *clientv3.Client
	kv     clientv3.KV // under cfg.Prefix
	cfg    Config
	name   string // "etcd state store [endpoints] prefix "p"", for errors

	// gate is held by every operation and closed by Close, so that an
	// operation either runs on an open client or fails with ErrClosed.
	gate *statestore.Gate

	mu   sync.Mutex
	seen map[string]observation // lease key → a record without an etcd lease, as first seen
}

// observation is a version of another holder's lease record that is not
// bound to an etcd lease, and when this Store first saw it.
type observation struct {
	version int64
	at      time.Time
}

var (
	_ statestore.Store    = (*Store)(nil)
	_ statestore.Informer = (*Store)(nil)
	_ statestore.Pager    = (*Store)(nil)
	_ statestore.Leaser   = (*Store)(nil)
)

// Open validates cfg, connects to etcd and checks that kmirror may read
// under the prefix. Errors wrap ErrInvalidConfig for a bad cfg, and never
// contain the password.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cfg.Endpoints = append([]string(nil), cfg.Endpoints...)
	name := fmt.Sprintf("etcd state store %v prefix %q", cfg.Endpoints, cfg.Prefix)
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalidConfig, err)
	}
	pw, err := cfg.password()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalidConfig, err)
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:          cfg.Endpoints,
		DialTimeout:        cfg.DialTimeout,
		TLS:                tc,
		Username:           cfg.Username,
		Password:           pw,
		MaxCallSendMsgSize: cfg.MaxRequestBytes,
		Context:            context.WithoutCancel(ctx),
		Logger:             zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: connect: %w", name, describe(err, cfg.Username))
	}
	s := &Store{
		client: client,
		kv:     namespace.NewKV(client.KV, cfg.Prefix),
		cfg:    cfg,
		name:   name,
		gate:   &statestore.Gate{Name: name, Timeout: cfg.RequestTimeout},
		seen:   make(map[string]observation),
	}
	// The client connects lazily: one read proves that etcd answers and
	// that kmirror may read under the prefix.
	if _, err := s.kv.Get(dctx, "\x00", clientv3.WithRange("\x00"), clientv3.WithCountOnly()); err != nil {
		client.Close()
		if dctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("%s: no answer within dial_timeout %s (is etcd running there, and TLS set as it expects?): %w", name, cfg.DialTimeout, err)
		}
		return nil, fmt.Errorf("%s: first read: %w", name, describe(err, cfg.Username))
	}
	return s, nil
}

// describe adds what the operator can do to the etcd errors that have an
// obvious remedy.
func describe(err error, user string) error {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("user %q was refused (check username and password): %w", user, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("user %q lacks a permission (grant its role readwrite on the prefix): %w", user, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("raise etcd's --max-request-bytes (and max_request_bytes here): %w", err)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Errorf("etcd requires authentication: set username and password: %w", err)
	}
	return err
}

// Info implements statestore.Informer: "etcd", shared, native leases.
func (s *Store) Info() statestore.Info {
	return statestore.Info{
		Name:          "etcd",
		Version:       "etcd client " + version.Version,
		ProtocolMajor: statestore.ProtocolMajor,
		ProtocolMinor: statestore.ProtocolMinor,
		Shared:        true,
		NativeLeases:  true,
	}
}

// begin starts an operation on key (statestore.Gate.Begin): the caller
// calls the returned done; the context is bounded by Config.RequestTimeout.
func (s *Store) begin(ctx context.Context, op, key string, isKey bool) (context.Context, func(), error) {
	return s.gate.Begin(ctx, op, key, isKey)
}

// fail wraps an error of etcd for op on key. When the caller's context
// ended it wraps ctx.Err(); when the request timeout did, it says so.
func (s *Store) fail(ctx, rctx context.Context, op, key string, err error) error {
	unknown := "" // a write whose answer was not awaited may have happened, or happen still
	if op != "get" && op != "list" && op != "get lease" {
		unknown = " (the write may have happened or still happen; re-read before acting on it)"
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %s %q%s: %w", s.name, op, key, unknown, ctx.Err())
	case rctx.Err() != nil:
		return fmt.Errorf("%s: %s %q: no answer within request_timeout %s%s: %w",
			s.name, op, key, s.cfg.RequestTimeout, unknown, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %s %q: %w", s.name, op, key, describe(err, s.cfg.Username))
}

// Get implements statestore.Store.
func (s *Store) Get(ctx context.Context, key string) (statestore.Entry, error) {
	rctx, done, err := s.begin(ctx, "get", key, true)
	if err != nil {
		return statestore.Entry{}, err
	}
	defer done()
	resp, err := s.kv.Get(rctx, key)
	if err != nil {
		return statestore.Entry{}, s.fail(ctx, rctx, "get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return statestore.Entry{}, fmt.Errorf("%s: key %q: %w", s.name, key, statestore.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return statestore.Entry{Key: key, Value: kv.Value, Version: kv.ModRevision}, nil
}

// Put implements statestore.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	rctx, done, err := s.begin(ctx, "put", key, true)
	if err != nil {
		return 0, err
	}
	defer done()
	if err := statestore.ValidatePutVersion(expect); err != nil {
		return 0, fmt.Errorf("%s: put %q: %w", s.name, key, err)
	}
	// etcd copies the value into its request: the caller may reuse value.
	put := clientv3.OpPut(key, string(value))
	if expect == statestore.AnyVersion {
		resp, err := s.kv.Do(rctx, put)
		if err != nil {
			return 0, s.fail(ctx, rctx, "put", key, err)
		}
		return resp.Put().Header.Revision, nil
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", expect)
	if expect == statestore.Absent {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	resp, err := s.kv.Txn(rctx).If(cmp).Then(put).Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return 0, s.fail(ctx, rctx, "put", key, err)
	}
	if !resp.Succeeded {
		return 0, s.mismatch(key, expect, resp)
	}
	return resp.Header.Revision, nil
}

// mismatch is the error of a failed compare-and-set whose Else branch read
// key.
func (s *Store) mismatch(key string, expect int64, resp *clientv3.TxnResponse) error {
	var current int64
	if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
		current = r.Kvs[0].ModRevision
	}
	if err := statestore.CheckVersion(key, current, expect); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return fmt.Errorf("%s: key %q: changed during the compare-and-set: %w", s.name, key, statestore.ErrVersionMismatch)
}

// Delete implements statestore.Store.
func (s *Store) Delete(ctx context.Context, key string, expect int64) error {
	rctx, done, err := s.begin(ctx, "delete", key, true)
	if err != nil {
		return err
	}
	defer done()
	if err := statestore.ValidateDeleteVersion(expect); err != nil {
		return fmt.Errorf("%s: delete %q: %w", s.name, key, err)
	}
	if expect == statestore.AnyVersion {
		resp, err := s.kv.Delete(rctx, key)
		if err != nil {
			return s.fail(ctx, rctx, "delete", key, err)
		}
		if resp.Deleted == 0 {
			return fmt.Errorf("%s: delete %q: %w", s.name, key, statestore.ErrNotFound)
		}
		return nil
	}
	resp, err := s.kv.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expect)).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return s.fail(ctx, rctx, "delete", key, err)
	}
	if !resp.Succeeded {
		if r := resp.Responses[0].GetResponseRange(); r == nil || len(r.Kvs) == 0 {
			return fmt.Errorf("%s: delete %q: %w", s.name, key, statestore.ErrNotFound)
		}
		return s.mismatch(key, expect, resp)
	}
	return nil
}

// List implements statestore.Store: pages of Config.ListPageSize keys.
func (s *Store) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	return statestore.ListAll(ctx, s, prefix, s.cfg.ListPageSize)
}

// ListPage implements statestore.Pager with one etcd range request.
func (s *Store) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	rctx, done, err := s.begin(ctx, "list", prefix, false)
	if err != nil {
		return nil, false, err
	}
	defer done()
	if err := statestore.ValidateLimit(limit); err != nil {
		return nil, false, fmt.Errorf("%s: list %q: %w", s.name, prefix, err)
	}
	start := prefix
	if after >= prefix {
		start = after + "\x00" // the first key after after
	}
	end := clientv3.GetPrefixRangeEnd(prefix) // "\x00": to the end of the key space
	if prefix == "" {
		end = "\x00"
	}
	if end != "\x00" && start >= end {
		return nil, false, nil
	}
	if start == "" {
		start = "\x00"
	}
	resp, err := s.kv.Get(rctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, false, s.fail(ctx, rctx, "list", prefix, err)
	}
	out := make([]statestore.Entry, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = statestore.Entry{Key: string(kv.Key), Value: kv.Value, Version: kv.ModRevision}
	}
	return out, resp.More && len(out) > 0, nil
}

// Close implements statestore.Store: it waits for operations in flight
// (each bounded by Config.RequestTimeout) and closes the client.
func (s *Store) Close() error {
	return s.gate.Close(func() error {
		if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: close: %w", s.name, err)
		}
		return nil
	})
}

// leaseRecord is the value of a lease key, the JSON of the generic leases
// (statestore.NewCASLeases).
type leaseRecord struct {
	Holder    string    `json:"holder"`
	RenewedAt time.Time `json:"renewed_at"`
	ExpiresAt time.Time `json:"expires_at"`
	TTL       string    `json:"ttl,omitempty"`
}

// ttlSeconds is ttl in etcd's whole seconds, rounded up.
func ttlSeconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// AcquireLease implements statestore.Leaser.
func (s *Store) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	if err := statestore.ValidateLease(holder, ttl); err != nil {
		return statestore.Lease{}, fmt.Errorf("%s: acquire lease %q: %w", s.name, key, err)
	}
	start := time.Now()
	cur, kv, err := s.readLease(ctx, key)
	expect := statestore.Absent
	switch {
	case errors.Is(err, statestore.ErrNotFound):
	case err != nil:
		return statestore.Lease{}, err
	case cur.Holder == holder:
		expect = cur.Version
	case kv.Lease != 0:
		return statestore.Lease{}, fmt.Errorf("%s: lease %q is held by %q (version %d, TTL %s; etcd deletes it if not renewed): %w",
			s.name, key, cur.Holder, cur.Version, cur.TTL, statestore.ErrLeaseHeld)
	default:
		if held, since := s.observe(key, cur.Version, start, ttl); held {
			return statestore.Lease{}, fmt.Errorf("%s: lease %q is held by %q (a record without an etcd lease, version %d, unchanged for %s of a %s TTL as seen here): %w",
				s.name, key, cur.Holder, cur.Version, since.Round(time.Millisecond), ttl, statestore.ErrLeaseHeld)
		}
		expect = cur.Version
	}
	lease, err := s.writeLease(ctx, "acquire lease", key, holder, ttl, start, expect, kv.Lease)
	if errors.Is(err, statestore.ErrVersionMismatch) {
		return statestore.Lease{}, fmt.Errorf("%s: lease %q was written concurrently by another holder: %w", s.name, key, statestore.ErrLeaseHeld)
	}
	return lease, err
}

// RenewLease implements statestore.Leaser. A lease whose etcd lease
// expired is gone: renewing it fails with ErrLeaseNotHeld.
func (s *Store) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	if err := statestore.ValidateLease(holder, ttl); err != nil {
		return statestore.Lease{}, fmt.Errorf("%s: renew lease %q: %w", s.name, key, err)
	}
	start := time.Now()
	cur, kv, err := s.heldBy(ctx, "renew", key, holder)
	if err != nil {
		return statestore.Lease{}, err
	}
	lease, err := s.writeLease(ctx, "renew lease", key, holder, ttl, start, cur.Version, kv.Lease)
	if errors.Is(err, statestore.ErrVersionMismatch) {
		return statestore.Lease{}, fmt.Errorf("%s: renew lease %q: written concurrently by another holder: %w", s.name, key, statestore.ErrLeaseNotHeld)
	}
	return lease, err
}

// ReleaseLease implements statestore.Leaser: it deletes the key by
// compare-and-set and revokes its etcd lease.
func (s *Store) ReleaseLease(ctx context.Context, key, holder string) error {
	if err := statestore.ValidateLease(holder, 1); err != nil {
		return fmt.Errorf("%s: release lease %q: %w", s.name, key, err)
	}
	cur, kv, err := s.heldBy(ctx, "release", key, holder)
	if err != nil {
		return err
	}
	err = s.Delete(ctx, key, cur.Version)
	if errors.Is(err, statestore.ErrNotFound) || errors.Is(err, statestore.ErrVersionMismatch) {
		return fmt.Errorf("%s: release lease %q: written concurrently by another holder: %w", s.name, key, statestore.ErrLeaseNotHeld)
	}
	if err != nil {
		return err
	}
	s.revoke(kv.Lease)
	return nil
}

// GetLease implements statestore.Leaser.
func (s *Store) GetLease(ctx context.Context, key string) (statestore.Lease, error) {
	l, _, err := s.readLease(ctx, key)
	return l, err
}

// leaseKV is what readLease learns of the key besides the record: the
// etcd lease it is bound to (0: none).
type leaseKV struct {
	Lease clientv3.LeaseID
}

func (s *Store) readLease(ctx context.Context, key string) (statestore.Lease, leaseKV, error) {
	rctx, done, err := s.begin(ctx, "get lease", key, true)
	if err != nil {
		return statestore.Lease{}, leaseKV{}, err
	}
	defer done()
	resp, err := s.kv.Get(rctx, key)
	if err != nil {
		return statestore.Lease{}, leaseKV{}, s.fail(ctx, rctx, "get lease", key, err)
	}
	if len(resp.Kvs) == 0 {
		return statestore.Lease{}, leaseKV{}, fmt.Errorf("%s: lease %q: nobody holds it: %w", s.name, key, statestore.ErrNotFound)
	}
	kv := resp.Kvs[0]
	info := leaseKV{Lease: clientv3.LeaseID(kv.Lease)}
	var rec leaseRecord
	if json.Unmarshal(kv.Value, &rec) != nil || rec.Holder == "" {
		return statestore.Lease{Key: key, Holder: statestore.UnreadableLeaseHolder, Version: kv.ModRevision}, info, nil
	}
	l := statestore.Lease{Key: key, Holder: rec.Holder, Version: kv.ModRevision, RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt}
	if d, err := time.ParseDuration(rec.TTL); err == nil {
		l.TTL = d
	} else {
		l.TTL = rec.ExpiresAt.Sub(rec.RenewedAt)
	}
	return l, info, nil
}

// heldBy reads the lease and checks that holder holds it; the error wraps
// ErrLeaseNotHeld when it does not.
func (s *Store) heldBy(ctx context.Context, op, key, holder string) (statestore.Lease, leaseKV, error) {
	cur, kv, err := s.readLease(ctx, key)
	switch {
	case errors.Is(err, statestore.ErrNotFound):
		return cur, kv, fmt.Errorf("%s: %s lease %q: nobody holds it (released, or expired in etcd): %w", s.name, op, key, statestore.ErrLeaseNotHeld)
	case err != nil:
		return cur, kv, err
	case cur.Holder != holder:
		return cur, kv, fmt.Errorf("%s: %s lease %q: held by %q, not by %q: %w", s.name, op, key, cur.Holder, holder, statestore.ErrLeaseNotHeld)
	}
	return cur, kv, nil
}

// observe records that a record of key without an etcd lease is at
// version, seen at now, and reports whether it is still held (unchanged
// for less than ttl) and for how long it has been unchanged.
func (s *Store) observe(key string, version int64, now time.Time, ttl time.Duration) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.seen[key]
	if !ok || o.version != version {
		o = observation{version: version, at: now}
		s.seen[key] = o
	}
	since := now.Sub(o.at)
	return since < ttl, since
}

// writeLease grants an etcd lease of ttl and writes holder's record under
// key bound to it, if key is at version expect (Absent: does not exist).
// On success it revokes old, the etcd lease the key was bound to; on
// failure it revokes the new one. A failed compare-and-set wraps
// ErrVersionMismatch.
func (s *Store) writeLease(ctx context.Context, op, key, holder string, ttl time.Duration, start time.Time, expect int64, old clientv3.LeaseID) (statestore.Lease, error) {
	rctx, done, err := s.begin(ctx, op, key, true)
	if err != nil {
		return statestore.Lease{}, err
	}
	defer done()
	grant, err := s.client.Grant(rctx, ttlSeconds(ttl))
	if err != nil {
		return statestore.Lease{}, s.fail(ctx, rctx, op, key, err)
	}
	granted := max(time.Duration(grant.TTL)*time.Second, ttl)
	rec := leaseRecord{Holder: holder, RenewedAt: start.Round(0), ExpiresAt: start.Add(granted).Round(0), TTL: granted.String()}
	val, err := json.Marshal(rec)
	if err != nil {
		s.revoke(grant.ID)
		return statestore.Lease{}, fmt.Errorf("%s: %s %q: encode: %w", s.name, op, key, err)
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", expect)
	if expect == statestore.Absent {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	resp, err := s.kv.Txn(rctx).If(cmp).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		// Whether the write happened is unknown: the etcd lease bounds
		// it either way, so it is left to expire.
		return statestore.Lease{}, s.fail(ctx, rctx, op, key, err)
	}
	if !resp.Succeeded {
		s.revoke(grant.ID)
		return statestore.Lease{}, s.mismatch(key, expect, resp)
	}
	s.mu.Lock()
	delete(s.seen, key) // ours now: a later holder's record is observed afresh
	s.mu.Unlock()
	if old != 0 {
		s.revoke(old) // no key is bound to it any more
	}
	return statestore.Lease{Key: key, Holder: holder, Version: resp.Header.Revision, TTL: granted,
		RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt}, nil
}

// revoke revokes an etcd lease, best effort: one that is not revoked
// expires at its TTL.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	_, _ = s.client.Revoke(ctx, id)
}
