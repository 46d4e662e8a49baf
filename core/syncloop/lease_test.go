package syncloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/internal/faultstore"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// fakeClock is a settable clock; it keeps Go's monotonic reading, so
// Sub and Before behave as with time.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testLease is a lease of mirror "m" with a 3 s TTL on clock, logging into
// a buffer.
func testLease(store statestore.Store, clock *fakeClock, id string) (*Lease, *bytes.Buffer, *int) {
	var buf bytes.Buffer
	acquired := 0
	l := NewLease(store, "m", time.Second, hclog.New(&hclog.LoggerOptions{Output: &buf}), func() { acquired++ })
	l.id, l.ttl, l.now = id, 3*time.Second, clock.now
	return l, &buf, &acquired
}

func wantLease(t *testing.T, l *Lease, held bool, holder string) {
	t.Helper()
	h, who := l.Status()
	if h != held || who != holder || l.Held() != held {
		t.Fatalf("lease of %s: held %v, holder %q; want held %v, holder %q", l.id, h, who, held, holder)
	}
}

func TestLeaseTTLIsThreeRefreshIntervalsAndAtLeastTheMinimum(t *testing.T) {
	t.Parallel()
	if got := LeaseTTL(time.Second); got != MinLeaseTTL {
		t.Fatalf("LeaseTTL(1s) = %v, want the minimum %v", got, MinLeaseTTL)
	}
	if got := LeaseTTL(time.Minute); got != 3*time.Minute {
		t.Fatalf("LeaseTTL(1m) = %v, want 3m", got)
	}
}

func TestHolderIDNamesHostAndProcessAndDiffersPerLease(t *testing.T) {
	t.Parallel()
	a, b := newHolderID(), newHolderID()
	host, pid, ok := parseHolderID(a)
	want, _ := os.Hostname()
	if !ok || host != strings.ReplaceAll(want, "/", "_") || pid != os.Getpid() {
		t.Fatalf("holder id %q: host %q pid %d ok %v; want host %q pid %d", a, host, pid, ok, want, os.Getpid())
	}
	if a == b {
		t.Fatalf("two holder ids are both %q", a)
	}
}

// TestSyncLeaseHasOneHolderAndPassesOnAtOnceWhenReleased: of two daemons on
// one store, the first to ask holds the lease, the other sees who; a renewal
// keeps it; a release hands it over at the other's next attempt. Each change
// is logged once.
func TestSyncLeaseHasOneHolderAndPassesOnAtOnceWhenReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	clock := &fakeClock{t: time.Now()}
	a, _, aAcq := testLease(store, clock, "host-a/1/aa")
	b, bLog, bAcq := testLease(store, clock, "host-b/2/bb")
	a.Attempt(ctx)
	wantLease(t, a, true, "host-a/1/aa")
	for range 3 {
		clock.advance(time.Second)
		b.Attempt(ctx)
		a.Attempt(ctx) // renewal
	}
	wantLease(t, b, false, "host-a/1/aa")
	wantLease(t, a, true, "host-a/1/aa")
	if n := strings.Count(bLog.String(), "held by another daemon"); n != 1 {
		t.Fatalf("the other holder was logged %d times, want once:\n%s", n, bLog)
	}
	e, err := store.Get(ctx, statestore.LeaseKey("m", "metadata-sync"))
	if err != nil {
		t.Fatal(err)
	}
	var rec leaseRecord
	if err := json.Unmarshal(e.Value, &rec); err != nil || rec.Holder != "host-a/1/aa" || rec.ExpiresAt.Sub(rec.RenewedAt) != 3*time.Second {
		t.Fatalf("stored lease %s (%v)", e.Value, err)
	}
	a.Release(ctx)
	wantLease(t, a, false, "")
	if _, err := store.Get(ctx, statestore.LeaseKey("m", "metadata-sync")); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("lease record after release: %v, want it deleted", err)
	}
	b.Attempt(ctx)
	wantLease(t, b, true, "host-b/2/bb")
	if *aAcq != 1 || *bAcq != 1 {
		t.Fatalf("onAcquired called %d and %d times, want once each", *aAcq, *bAcq)
	}
}

// TestSyncLeaseOfAStoppedHolderIsTakenOnlyAfterItStayedUnchangedForTheTTL:
// expiry is judged on the reader's clock from when it first saw the current
// version; each renewal starts the wait again. The old holder stops
// considering the lease its own by then, and learns at its next attempt that
// it is someone else's.
func TestSyncLeaseOfAStoppedHolderIsTakenOnlyAfterItStayedUnchangedForTheTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	clock := &fakeClock{t: time.Now()}
	a, _, _ := testLease(store, clock, "host-a/1/aa")
	b, _, _ := testLease(store, clock, "host-b/2/bb")
	a.Attempt(ctx)
	b.Attempt(ctx) // b first sees a's version now
	clock.advance(2 * time.Second)
	a.Attempt(ctx) // renewed: a new version
	clock.advance(2 * time.Second)
	b.Attempt(ctx) // 4 s after b first saw the lease, but only 2 s after the renewal
	wantLease(t, b, false, "host-a/1/aa")
	// a stops renewing (crashed, or cut off from the store).
	clock.advance(time.Second + 500*time.Millisecond)
	wantLease(t, a, false, "") // 3.5 s after its last write: no longer a's own
	b.Attempt(ctx)
	wantLease(t, b, false, "host-a/1/aa") // b saw this version only 1.5 s ago
	clock.advance(1500 * time.Millisecond)
	b.Attempt(ctx)
	wantLease(t, b, true, "host-b/2/bb")
	a.Attempt(ctx)
	wantLease(t, a, false, "host-b/2/bb")
}

// TestSyncLeaseIsLostOnAVersionMismatch: another daemon writes the lease
// between the holder's read and its renewal; the renewal fails on the
// version, and the holder stops at once.
func TestSyncLeaseIsLostOnAVersionMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	store := faultstore.New(mem)
	clock := &fakeClock{t: time.Now()}
	a, aLog, _ := testLease(store, clock, "host-a/1/aa")
	a.Attempt(ctx)
	wantLease(t, a, true, "host-a/1/aa")
	store.BeforePut(func() {
		store.BeforePut(nil)
		v, _ := json.Marshal(leaseRecord{Holder: "host-c/3/cc"})
		if _, err := mem.Put(ctx, statestore.LeaseKey("m", "metadata-sync"), v, statestore.AnyVersion); err != nil {
			t.Error(err)
		}
	})
	clock.advance(time.Second)
	a.Attempt(ctx)
	wantLease(t, a, false, "")
	if !strings.Contains(aLog.String(), "lease lost") {
		t.Fatalf("the loss is not logged:\n%s", aLog)
	}
	a.Attempt(ctx)
	wantLease(t, a, false, "host-c/3/cc")
}

// TestSyncLeaseHolderCutOffFromTheStoreKeepsItOnlyUntilTheTTL.
func TestSyncLeaseHolderCutOffFromTheStoreKeepsItOnlyUntilTheTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := faultstore.New(memstore.New())
	clock := &fakeClock{t: time.Now()}
	a, aLog, _ := testLease(store, clock, "host-a/1/aa")
	a.Attempt(ctx)
	store.Fail(true)
	clock.advance(2 * time.Second)
	a.Attempt(ctx)
	wantLease(t, a, true, "host-a/1/aa")
	clock.advance(1100 * time.Millisecond)
	a.Attempt(ctx)
	wantLease(t, a, false, "")
	if n := strings.Count(aLog.String(), faultstore.ErrDown.Error()); n != 1 {
		t.Fatalf("the store error was logged %d times, want once:\n%s", n, aLog)
	}
	store.Fail(false)
	a.Attempt(ctx) // its own record: renewed
	wantLease(t, a, true, "host-a/1/aa")
}

// TestSyncLeaseOfAGoneProcessOnThisHostIsTakenAtOnce: a daemon restarted
// after a crash does not wait for its predecessor's lease to expire; a live
// process's lease, or another host's, is waited for.
func TestSyncLeaseOfAGoneProcessOnThisHostIsTakenAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host, pid, _ := parseHolderID(newHolderID())
	cases := []struct {
		name    string
		rec     leaseRecord
		takenAt bool
	}{
		{"a pid that does not exist on this host", leaseRecord{Holder: host + "/1073741824/dead", RenewedAt: time.Now()}, true},
		{"this pid, renewed before this process started (a restarted container)", leaseRecord{Holder: host + "/" + strconv.Itoa(pid) + "/old", RenewedAt: processStart.Add(-time.Second)}, true},
		{"this pid, renewed since this process started (another engine here)", leaseRecord{Holder: host + "/" + strconv.Itoa(pid) + "/live", RenewedAt: time.Now()}, false},
		{"a live process of this host", leaseRecord{Holder: host + "/1/init", RenewedAt: time.Now()}, false},
		{"another host", leaseRecord{Holder: "other-" + host + "/1073741824/x", RenewedAt: time.Now()}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New()
			v, _ := json.Marshal(c.rec)
			if _, err := store.Put(ctx, statestore.LeaseKey("m", "metadata-sync"), v, statestore.Absent); err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{t: time.Now()}
			me := host + "/" + strconv.Itoa(pid) + "/me"
			l, _, _ := testLease(store, clock, me)
			l.Attempt(ctx)
			if c.takenAt {
				wantLease(t, l, true, me)
			} else {
				wantLease(t, l, false, c.rec.Holder)
			}
		})
	}
}

// shortLeases makes the lease TTL follow the tests' short refresh interval.
