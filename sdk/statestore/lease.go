package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Lease is a lease as stored: who holds it and since when.
//
// A lease names the one holder (a daemon) that does a piece of work when
// several daemons share a store, such as a mirror's metadata sync (key
// LeaseKey(mirror, "metadata-sync")). A holder acquires it with a TTL and
// renews it well within the TTL (kmirror: every TTL/3). The holder must
// consider the lease its own only until TTL after it started the call that
// last acquired or renewed it, measured on its own clock: other holders
// start counting no earlier than that call's write, so the holder stops
// before anyone else can take the lease.
type Lease struct {
	// Key is the lease's key in the store.
	Key string
	// Holder names the holder, as it passed it to AcquireLease.
	Holder string
	// Version is the version of the lease's record in the store. It
	// changes with every acquire and renew and never repeats, so work done
	// under a lease can be fenced with it.
	Version int64
	// TTL is the TTL of the last acquire or renew (a store may round it
	// up to its granularity, e.g. etcd's whole seconds).
	TTL time.Duration
	// RenewedAt is when the lease was last acquired or renewed, on the
	// holder's wall clock, and ExpiresAt is RenewedAt+TTL. They are for
	// people and tools: whether a lease expired is judged by the store
	// (native leases) or on the reader's own monotonic clock (generic
	// leases), never by comparing wall clocks of different hosts.
	RenewedAt time.Time
	ExpiresAt time.Time
}

// Leaser is the lease protocol. It is optional for a store: one that can
// expire keys itself (etcd) implements it natively; [Leases] gives every
// other store the generic leases of [NewCASLeases], written with
// compare-and-set. All methods are safe for concurrent use; an empty holder
// or a TTL that is not positive fails with an error wrapping
// ErrInvalidArgument.
type Leaser interface {
	// AcquireLease takes the lease under key for holder for ttl, if it is
	// free, expired, or already holder's (then it is renewed). Otherwise
	// it fails with an error wrapping ErrLeaseHeld that names the holder.
	AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (Lease, error)

	// RenewLease extends holder's lease by ttl from now. If holder does not
	// hold it (never taken, released, or taken by another holder after it
	// expired) it fails with an error wrapping ErrLeaseNotHeld, and the
	// caller must stop acting as the holder. A holder whose lease expired
	// but was not taken by anyone renews it.
	RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (Lease, error)

	// ReleaseLease gives holder's lease up, so that another holder takes it
	// at once instead of after a TTL. If holder does not hold it, it fails
	// with an error wrapping ErrLeaseNotHeld and changes nothing. A caller
	// that knows a holder is gone for good (a crashed process of its own
	// host) may release the lease in that holder's name.
	ReleaseLease(ctx context.Context, key, holder string) error

	// GetLease returns the lease under key, or an error wrapping
	// ErrNotFound when nobody holds it. With generic leases the record of
	// an expired holder stays until another holder takes it or it is
	// released; with native leases it may disappear when it expires.
	GetLease(ctx context.Context, key string) (Lease, error)
}

// MaxHolderLen is the longest lease holder name, in bytes.
const MaxHolderLen = 256

// ValidateLease checks the arguments of AcquireLease and RenewLease
// (ReleaseLease: pass a ttl of 1): holder non-empty, at most MaxHolderLen
// bytes, UTF-8 without NUL; ttl positive. The error wraps
// ErrInvalidArgument.
func ValidateLease(holder string, ttl time.Duration) error {
	switch {
	case holder == "":
		return fmt.Errorf("%w: empty lease holder", ErrInvalidArgument)
	case len(holder) > MaxHolderLen:
		return fmt.Errorf("%w: lease holder %.40q... is %d bytes, longer than %d", ErrInvalidArgument, holder, len(holder), MaxHolderLen)
	case !utf8.ValidString(holder) || strings.IndexByte(holder, 0) >= 0:
		return fmt.Errorf("%w: lease holder %q is not UTF-8 without NUL bytes", ErrInvalidArgument, holder)
	case ttl <= 0:
		return fmt.Errorf("%w: lease TTL %s (must be positive)", ErrInvalidArgument, ttl)
	}
	return nil
}

// Leases returns s's leases: s itself if it implements [Leaser], else
// NewCASLeases(s). The generic leases remember what they have seen, so a
// caller keeps the returned Leaser for as long as it uses leases instead of
// calling Leases for each operation.
func Leases(s Store) Leaser {
	if l, ok := s.(Leaser); ok {
		return l
	}
	return NewCASLeases(s)
}

// UnreadableLeaseHolder is the holder reported for a lease record that is
// not a lease record (written by something else): it is treated as held by
// someone else and expires like any other.
const UnreadableLeaseHolder = "(unreadable lease record)"

// leaseRecord is the stored value of a generic lease. The JSON is the one
// kmirror's metadata-sync lease wrote before leases were part of the
// contract (holder, renewed_at, expires_at), plus ttl, so daemons of both
// generations agree on who holds a lease.
type leaseRecord struct {
	Holder    string    `json:"holder"`
	RenewedAt time.Time `json:"renewed_at"`
	ExpiresAt time.Time `json:"expires_at"`
	TTL       string    `json:"ttl,omitempty"`
}

// CASLeases are leases over any Store, written with compare-and-set only.
// The lease is one key whose value is the holder's record (JSON: holder,
// renewed_at, expires_at, ttl):
//
//   - absent: acquired with Put(Absent);
//   - held by the caller: renewed with Put(version read);
//   - held by another holder: taken with Put(version read) only once it
//     expired: its version has not changed for a whole TTL (the caller's)
//     since this CASLeases first saw that version, on this process's
//     monotonic clock. Clock skew between hosts does not matter; a
//     CASLeases that has just started waits a whole TTL before it takes a
//     lease somebody else held.
//
// Of two holders racing for a free or expired lease, compare-and-set lets
// exactly one win; the other gets ErrLeaseHeld.
type CASLeases struct {
	store Store
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]observation // key → another holder's record, as first seen
}

// observation is a version of another holder's lease record and when this
// CASLeases first saw it.
type observation struct {
	version int64
	at      time.Time
}

// CASLeasesOption configures NewCASLeases.
type CASLeasesOption func(*CASLeases)

// WithLeaseClock sets the clock expiry is judged on. Default: time.Now
// (whose monotonic reading is what durations are measured with).
func WithLeaseClock(now func() time.Time) CASLeasesOption {
	return func(l *CASLeases) { l.now = now }
}

// NewCASLeases returns generic leases over s.
func NewCASLeases(s Store, opts ...CASLeasesOption) *CASLeases {
	l := &CASLeases{store: s, now: time.Now, seen: make(map[string]observation)}
	for _, o := range opts {
		o(l)
	}
	return l
}

var _ Leaser = (*CASLeases)(nil)

// AcquireLease implements Leaser.
func (l *CASLeases) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (Lease, error) {
	if err := ValidateLease(holder, ttl); err != nil {
		return Lease{}, fmt.Errorf("acquire lease %q: %w", key, err)
	}
	start := l.now()
	expect := Absent
	cur, err := l.GetLease(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return Lease{}, fmt.Errorf("acquire lease: %w", err)
	default:
		if cur.Holder != holder {
			if held, since := l.observe(key, cur.Version, start, ttl); held {
				return Lease{}, fmt.Errorf("lease %q is held by %q (its record, version %d, unchanged for %s of a %s TTL as seen here): %w",
					key, cur.Holder, cur.Version, since.Round(time.Millisecond), ttl, ErrLeaseHeld)
			}
		}
		expect = cur.Version
	}
	lease, err := l.write(ctx, key, holder, ttl, start, expect)
	if errors.Is(err, ErrVersionMismatch) {
		return Lease{}, fmt.Errorf("lease %q was written concurrently by another holder: %w", key, ErrLeaseHeld)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	return lease, nil
}

// RenewLease implements Leaser.
func (l *CASLeases) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (Lease, error) {
	if err := ValidateLease(holder, ttl); err != nil {
		return Lease{}, fmt.Errorf("renew lease %q: %w", key, err)
	}
	start := l.now()
	cur, err := l.heldBy(ctx, "renew", key, holder)
	if err != nil {
		return Lease{}, err
	}
	lease, err := l.write(ctx, key, holder, ttl, start, cur.Version)
	if errors.Is(err, ErrVersionMismatch) {
		return Lease{}, fmt.Errorf("renew lease %q: written concurrently by another holder: %w", key, ErrLeaseNotHeld)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	return lease, nil
}

// ReleaseLease implements Leaser.
func (l *CASLeases) ReleaseLease(ctx context.Context, key, holder string) error {
	if err := ValidateLease(holder, 1); err != nil {
		return fmt.Errorf("release lease %q: %w", key, err)
	}
	cur, err := l.heldBy(ctx, "release", key, holder)
	if err != nil {
		return err
	}
	err = l.store.Delete(ctx, key, cur.Version)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrVersionMismatch) {
		return fmt.Errorf("release lease %q: written concurrently by another holder: %w", key, ErrLeaseNotHeld)
	}
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// GetLease implements Leaser.
func (l *CASLeases) GetLease(ctx context.Context, key string) (Lease, error) {
	e, err := l.store.Get(ctx, key)
	if err != nil {
		return Lease{}, err
	}
	var rec leaseRecord
	if json.Unmarshal(e.Value, &rec) != nil || rec.Holder == "" {
		return Lease{Key: key, Holder: UnreadableLeaseHolder, Version: e.Version}, nil
	}
	lease := Lease{Key: key, Holder: rec.Holder, Version: e.Version, RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt}
	if d, err := time.ParseDuration(rec.TTL); err == nil {
		lease.TTL = d
	} else {
		lease.TTL = rec.ExpiresAt.Sub(rec.RenewedAt)
	}
	return lease, nil
}

// heldBy reads the lease and checks that holder holds it; the error wraps
// ErrLeaseNotHeld when it does not.
func (l *CASLeases) heldBy(ctx context.Context, op, key, holder string) (Lease, error) {
	cur, err := l.GetLease(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return Lease{}, fmt.Errorf("%s lease %q: nobody holds it: %w", op, key, ErrLeaseNotHeld)
	case err != nil:
		return Lease{}, fmt.Errorf("%s lease: %w", op, err)
	case cur.Holder != holder:
		return Lease{}, fmt.Errorf("%s lease %q: held by %q, not by %q: %w", op, key, cur.Holder, holder, ErrLeaseNotHeld)
	}
	return cur, nil
}

// observe records that another holder's record of key is at version, seen
// at now, and reports whether it is still held (its version has not
// changed for ttl) and for how long it has been unchanged.
func (l *CASLeases) observe(key string, version int64, now time.Time, ttl time.Duration) (held bool, since time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.seen[key]
	if !ok || o.version != version {
		o = observation{version: version, at: now}
		l.seen[key] = o
	}
	since = now.Sub(o.at)
	return since < ttl, since
}

// write puts holder's record under key with expected version expect.
func (l *CASLeases) write(ctx context.Context, key, holder string, ttl time.Duration, start time.Time, expect int64) (Lease, error) {
	rec := leaseRecord{Holder: holder, RenewedAt: start.Round(0), ExpiresAt: start.Add(ttl).Round(0), TTL: ttl.String()}
	val, err := json.Marshal(rec)
	if err != nil {
		return Lease{}, fmt.Errorf("encode lease %q: %w", key, err)
	}
	v, err := l.store.Put(ctx, key, val, expect)
	if err != nil {
		return Lease{}, err
	}
	l.mu.Lock()
	delete(l.seen, key) // ours now: a later holder's record is observed afresh
	l.mu.Unlock()
	return Lease{Key: key, Holder: holder, Version: v, TTL: ttl, RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt}, nil
}
