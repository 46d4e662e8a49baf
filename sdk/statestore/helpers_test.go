package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// plainStore hides every optional interface of the store it wraps, so that
// the helpers fall back to their generic implementations.
type plainStore struct{ s statestore.Store }

func (p plainStore) Get(ctx context.Context, key string) (statestore.Entry, error) {
	return p.s.Get(ctx, key)
}

func (p plainStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	return p.s.Put(ctx, key, value, expect)
}

func (p plainStore) Delete(ctx context.Context, key string, expect int64) error {
	return p.s.Delete(ctx, key, expect)
}

func (p plainStore) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	return p.s.List(ctx, prefix)
}

func (p plainStore) Close() error { return p.s.Close() }

// TestGenericHelpersConformance runs the suite against a store with none of
// the optional interfaces: DefaultInfo, paging over List and CAS leases
// must meet the contract on their own.
func TestGenericHelpersConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Store { return plainStore{memstore.New()} })
}

func TestInfoOfFallsBackToDefaultInfo(t *testing.T) {
	t.Parallel()
	if got := statestore.InfoOf(plainStore{memstore.New()}); got != statestore.DefaultInfo() || !got.Shared || got.NativeLeases {
		t.Fatalf("InfoOf(store without Info) = %+v, want DefaultInfo %+v", got, statestore.DefaultInfo())
	}
	if got := statestore.InfoOf(memstore.New()); got.Name != "memstore" || got.Shared || got.NativeLeases {
		t.Fatalf("InfoOf(memstore) = %+v", got)
	}
}

func TestInfoValidate(t *testing.T) {
	t.Parallel()
	ok := statestore.Info{Name: "etcd_v3-x", ProtocolMajor: statestore.ProtocolMajor, ProtocolMinor: 7}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid Info: %v", err)
	}
	for _, c := range []struct {
		info statestore.Info
		msg  string
	}{
		{statestore.Info{Name: "", ProtocolMajor: statestore.ProtocolMajor}, `name ""`},
		{statestore.Info{Name: "Etcd", ProtocolMajor: statestore.ProtocolMajor}, `name "Etcd"`},
		{statestore.Info{Name: "etcd", ProtocolMajor: statestore.ProtocolMajor + 1, ProtocolMinor: 3}, `speaks statestore protocol 2.3, this host speaks 1.x`},
		{statestore.Info{Name: "etcd", ProtocolMajor: 0}, `speaks statestore protocol 0.0`},
		{statestore.Info{Name: "etcd", ProtocolMajor: statestore.ProtocolMajor, ProtocolMinor: -1}, `negative protocol minor`},
	} {
		err := c.info.Validate()
		if !errors.Is(err, statestore.ErrIncompatible) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Validate(%+v) = %v, want ErrIncompatible saying %q", c.info, err, c.msg)
		}
	}
}

// clock is a settable clock for CASLeases.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestCASLeaseExpiresAfterItsVersionStoodStillForTTL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := statestore.NewCASLeases(memstore.New(), statestore.WithLeaseClock(c.Now))
	const key, ttl = "mirrors/m/leases/metadata-sync", 15 * time.Second
	if _, err := l.AcquireLease(ctx, key, "a", ttl); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour) // b has not seen the record yet: its TTL starts at b's first look
	if _, err := l.AcquireLease(ctx, key, "b", ttl); !errors.Is(err, statestore.ErrLeaseHeld) || !strings.Contains(err.Error(), `held by "a"`) {
		t.Fatalf("first look by b: %v, want ErrLeaseHeld naming a", err)
	}
	c.Advance(ttl - time.Nanosecond)
	if _, err := l.AcquireLease(ctx, key, "b", ttl); !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("b just before the TTL ran out: %v", err)
	}
	if _, err := l.RenewLease(ctx, key, "a", ttl); err != nil { // a renews: a new version, whose TTL starts when b sees it
		t.Fatal(err)
	}
	c.Advance(time.Nanosecond)
	if _, err := l.AcquireLease(ctx, key, "b", ttl); !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("b once the TTL of a's first record ran out, after a renewed: %v", err)
	}
	c.Advance(ttl - time.Nanosecond)
	if _, err := l.AcquireLease(ctx, key, "b", ttl); !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("b after a renewed: %v", err)
	}
	c.Advance(time.Nanosecond)
	lease, err := l.AcquireLease(ctx, key, "b", ttl)
	if err != nil || lease.Holder != "b" {
		t.Fatalf("b once a's renewed record stood still for the TTL: %+v, %v", lease, err)
	}
	if want := c.Now(); !lease.RenewedAt.Equal(want) || !lease.ExpiresAt.Equal(want.Add(ttl)) || lease.TTL != ttl {
		t.Fatalf("lease %+v, want renewed at %s for %s", lease, want, ttl)
	}
}

// TestCASLeaseReadsTheSyncLoopRecord: a record written by kmirror's
// metadata-sync lease before leases were in the contract ({holder,
// renewed_at, expires_at}) is understood, and anything else is a holder
// nobody knows, whose lease expires like any other.
func TestCASLeaseReadsTheSyncLoopRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	const key = "mirrors/m/leases/metadata-sync"
	renewed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old, _ := json.Marshal(map[string]any{"holder": "host/42/abcd", "renewed_at": renewed, "expires_at": renewed.Add(45 * time.Second)})
	v, err := s.Put(ctx, key, old, statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	l := statestore.NewCASLeases(s)
	lease, err := l.GetLease(ctx, key)
	if err != nil || lease.Holder != "host/42/abcd" || lease.Version != v || lease.TTL != 45*time.Second || !lease.RenewedAt.Equal(renewed) {
		t.Fatalf("GetLease of a sync-loop record = %+v, %v", lease, err)
	}
	if err := l.ReleaseLease(ctx, key, "host/42/abcd"); err != nil {
		t.Fatalf("release in the name of a holder known to be gone: %v", err)
	}
	if _, err := s.Put(ctx, key, []byte("not json"), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	if lease, err := l.GetLease(ctx, key); err != nil || lease.Holder != statestore.UnreadableLeaseHolder {
		t.Fatalf("GetLease of an unreadable record = %+v, %v", lease, err)
	}
	if _, err := l.AcquireLease(ctx, key, "a", time.Minute); !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("acquire over an unreadable record seen for the first time: %v", err)
	}
}

func TestListAllRefusesABrokenPager(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]pagerFunc{
		"empty page with more": func(string, string, int) ([]statestore.Entry, bool, error) { return nil, true, nil },
		"out of order": func(_, after string, _ int) ([]statestore.Entry, bool, error) {
			return []statestore.Entry{{Key: "b"}, {Key: "a"}}, false, nil
		},
		"outside the prefix": func(string, string, int) ([]statestore.Entry, bool, error) {
			return []statestore.Entry{{Key: "zzz"}}, false, nil
		},
	} {
		if _, err := statestore.ListAll(t.Context(), p, "a", 10); err == nil {
			t.Errorf("%s: ListAll accepted it", name)
		}
	}
}

type pagerFunc func(prefix, after string, limit int) ([]statestore.Entry, bool, error)

func (f pagerFunc) ListPage(_ context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	return f(prefix, after, limit)
}
