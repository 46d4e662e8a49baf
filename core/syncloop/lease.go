package syncloop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The metadata-sync lease: for each mirror, one daemon at a time
// runs the sync loops (topics, topic configs, groups, ACLs, read-only ACLs),
// so that several daemons sharing one state store (etcd, a Kafka topic) do
// not create topics, move group offsets or delete ACLs against each other.
// The file store locks its directory, so with it the lease is always this
// daemon's; it matters for shared stores.
//
// The lease is one key per mirror (statestore.LeaseKey(mirror,
// "metadata-sync")) whose value names the holder and when it renewed. It is
// taken and renewed with compare-and-set only:
//
//   - absent: Put with Absent;
//   - held by this daemon: Put with the version read (renewal);
//   - held by another daemon: taken (Put with the version read) only once it
//     is expired — its version has not changed for a whole TTL on this
//     daemon's own monotonic clock (clock skew between hosts does not matter),
//     or its holder is a process of this host that no longer runs (a daemon
//     restarted after a crash takes its own lease back at once).
//
// The holder renews every TTL/3. It considers the lease its own only until
// TTL after the start of its last successful write, so it stops syncing
// before any other daemon can judge the lease expired (others start their
// TTL no earlier than they see that write). A renewal that meets another
// holder's record, or a version mismatch, loses the lease at once; rounds
// stop until it is taken again. A clean stop deletes the record (with its
// version), so that another daemon takes over at its next attempt.

// metadataSyncLease is the name of the lease, in statestore.LeaseKey.
const metadataSyncLease = "metadata-sync"

// MinLeaseTTL is the shortest lease TTL: a store round trip, a slow renewal
// or a GC pause must not lose the lease. Tests lower it.
var MinLeaseTTL = 15 * time.Second

// LeaseTTL derives the lease TTL from mirror.metadata.refresh.interval.ms:
// three intervals, at least MinLeaseTTL. No key of its own: the interval
// already says how stale metadata may get, and a takeover within a few
// intervals keeps that promise.
func LeaseTTL(refresh time.Duration) time.Duration {
	return max(3*refresh, MinLeaseTTL)
}

// processStart is when this process started (close enough: package init).
var processStart = time.Now()

// newHolderID returns a lease holder id, "<hostname>/<pid>/<random>": it
// names the daemon for operators, never holds a secret, and is new for each
// start of a mirror (so two engines in one process differ too).
func newHolderID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	host = strings.ReplaceAll(host, "/", "_")
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// leaseRecord is the stored value of a lease.
type leaseRecord struct {
	Holder string `json:"holder"`
	// RenewedAt and ExpiresAt are the holder's wall clock, for people and
	// tools reading the store; expiry is judged on the reader's own clock.
	RenewedAt time.Time `json:"renewed_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Lease is one mirror's metadata-sync lease as seen by this daemon.
type Lease struct {
	store statestore.Store
	key   string
	id    string // this daemon's holder id
	ttl   time.Duration
	now   func() time.Time
	log   hclog.Logger
	// onAcquired is called (outside the lock) each time the lease becomes
	// this daemon's, so that the loops run a round at once.
	onAcquired func()

	mu       sync.Mutex
	version  int64     // our record's version while held; 0 when not
	deadline time.Time // held until then (start of the last write + ttl)
	holder   string    // the holder seen last ("" none)
	seenVer  int64     // another holder's record version, as last seen
	seenAt   time.Time // when seenVer was first seen
	lastErr  string    // the last store error, logged once
	reported *bool     // the held state last logged (nil: none yet)
	repHold  string    // the holder last logged
}

func NewLease(store statestore.Store, mirror string, refresh time.Duration, log hclog.Logger, onAcquired func()) *Lease {
	return &Lease{store: store, key: statestore.LeaseKey(mirror, metadataSyncLease), id: newHolderID(), ttl: LeaseTTL(refresh), now: time.Now, log: log, onAcquired: onAcquired}
}

// held reports whether this daemon holds the lease now.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldLocked()
}

func (l *Lease) heldLocked() bool {
	return l.version != 0 && l.now().Before(l.deadline)
}

// status returns whether this daemon holds the lease and who does ("" when
// nobody is known to).
func (l *Lease) Status() (held bool, holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heldLocked() {
		return true, l.id
	}
	if l.holder == l.id {
		return false, "" // ours lapsed: nobody known
	}
	return false, l.holder
}

// run tries to take or renew the lease every TTL/3 until ctx ends. It does
// not release the lease: the owner calls release once the loops have
// stopped.
func (l *Lease) Run(ctx context.Context) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.Attempt(ctx)
	}
}

// attempt makes one attempt to take or renew the lease, then logs a change
// of holder once and calls onAcquired when the lease became this daemon's.
func (l *Lease) Attempt(ctx context.Context) {
	err := l.try(ctx)
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	if err != nil {
		if err.Error() != l.lastErr {
			l.log.Warn("metadata-sync lease: state store error; retrying (this daemon keeps the lease until its TTL runs out)", "key", l.key, "ttl", l.ttl, "error", err)
		}
		l.lastErr = err.Error()
	} else {
		l.lastErr = ""
	}
	held := l.heldLocked()
	holder := l.holder
	first := l.reported == nil
	changed := first || *l.reported != held || (!held && holder != l.repHold)
	l.reported, l.repHold = &held, holder
	l.mu.Unlock()
	if !changed {
		return
	}
	switch {
	case held:
		l.log.Info("metadata-sync lease taken: this daemon runs the mirror's sync loops", "holder", l.id, "ttl", l.ttl)
		if l.onAcquired != nil {
			l.onAcquired()
		}
	case holder != "" && holder != l.id:
		l.log.Info("metadata-sync lease held by another daemon: this daemon skips the mirror's sync rounds until it can take the lease", "holder", holder, "this_daemon", l.id, "ttl", l.ttl)
	case first:
		l.log.Warn("metadata-sync lease not taken yet: this daemon skips the mirror's sync rounds until it takes the lease", "this_daemon", l.id, "ttl", l.ttl)
	default:
		l.log.Warn("metadata-sync lease lost: this daemon skips the mirror's sync rounds until it takes the lease again", "this_daemon", l.id, "ttl", l.ttl)
	}
}

// try reads the lease and writes it if it is absent, this daemon's, or
// expired.
func (l *Lease) try(ctx context.Context) error {
	start := l.now()
	expect := statestore.Absent
	e, err := l.store.Get(ctx, l.key)
	switch {
	case errors.Is(err, statestore.ErrNotFound):
	case err != nil:
		return fmt.Errorf("reading lease %s: %w", l.key, err)
	default:
		var rec leaseRecord
		if json.Unmarshal(e.Value, &rec) != nil || rec.Holder == "" {
			rec.Holder = "(unreadable lease record)"
		}
		if rec.Holder != l.id {
			l.mu.Lock()
			l.version = 0 // whatever we held, it is somebody else's now
			if e.Version != l.seenVer {
				l.seenVer, l.seenAt = e.Version, start
			}
			l.holder = rec.Holder
			expired := start.Sub(l.seenAt) >= l.ttl
			l.mu.Unlock()
			if !expired && !l.holderGone(rec) {
				return nil
			}
		}
		expect = e.Version
	}
	val, err := json.Marshal(leaseRecord{Holder: l.id, RenewedAt: start.Round(0), ExpiresAt: start.Add(l.ttl).Round(0)})
	if err != nil {
		return fmt.Errorf("encoding lease %s: %w", l.key, err)
	}
	v, err := l.store.Put(ctx, l.key, val, expect)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case errors.Is(err, statestore.ErrVersionMismatch):
		// Another daemon wrote in between: it holds the lease now. The
		// next attempt reads who.
		l.version, l.holder = 0, ""
		return nil
	case err != nil:
		return fmt.Errorf("writing lease %s: %w", l.key, err)
	}
	l.version, l.deadline, l.holder = v, start.Add(l.ttl), l.id
	return nil
}

// holderGone reports whether rec's holder is a process of this host that
// no longer runs: a pid that does not exist, or this very pid when the
// record was renewed before this process started (a restarted container
// whose daemon always runs as pid 1). Holders of other hosts are never
// judged gone: their lease expires.
func (l *Lease) holderGone(rec leaseRecord) bool {
	host, pid, ok := parseHolderID(rec.Holder)
	me, mypid, _ := parseHolderID(l.id)
	if !ok || host != me {
		return false
	}
	if pid == mypid {
		return rec.RenewedAt.Before(processStart)
	}
	return !processAlive(pid)
}

func parseHolderID(id string) (host string, pid int, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return parts[0], pid, true
}

// processAlive reports whether a process with pid exists on this host
// (signal 0 checks without sending anything; EPERM means it exists).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// release deletes the lease record if this daemon still holds it, so that
// another daemon takes over at its next attempt instead of after a TTL.
func (l *Lease) Release(ctx context.Context) {
	l.mu.Lock()
	v := l.version
	l.version, l.holder = 0, ""
	l.mu.Unlock()
	if v == 0 {
		return
	}
	err := l.store.Delete(ctx, l.key, v)
	switch {
	case err == nil:
		l.log.Info("metadata-sync lease released", "holder", l.id)
	case errors.Is(err, statestore.ErrNotFound), errors.Is(err, statestore.ErrVersionMismatch):
		// Already somebody else's.
	default:
		l.log.Warn("metadata-sync lease not released; another daemon takes over once it expires", "key", l.key, "ttl", l.ttl, "error", err)
	}
}

// observeLease exports, while the mirror runs, whether this daemon holds
// its metadata-sync lease: kmirror_metadata_sync_lease_held{mirror} is 1 or
// 0 (summed over daemons it should be 1). The returned function stops it.
func ObserveLease(p *metrics.Provider, mirror string, l *Lease) (func(), error) {
	m := p.Meter("github.com/kmirror/kmirror/core/mirror")
	g, err := m.Int64ObservableGauge("metadata.sync.lease.held",
		metric.WithDescription("1 while this daemon holds the mirror's metadata-sync lease and runs its sync loops, else 0; by mirror."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(attribute.String("mirror", mirror))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var v int64
		if l.Held() {
			v = 1
		}
		o.ObserveInt64(g, v, attrs)
		return nil
	}, g)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}

// ID names this daemon as a holder (host and process).
func (l *Lease) ID() string { return l.id }
