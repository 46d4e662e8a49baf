package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/statestore"
)

func testListPage(t *testing.T, s statestore.Store) {
	keys := []string{
		"mirrors/m1/partitions/t/1", "mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/10",
		"mirrors/m1/offsetmaps/t/0", "mirrors/m10/partitions/t/0", "mirrors/m2/partitions/u/3", "other",
	}
	for _, k := range keys {
		mustPut(t, s, k, []byte("v:"+k), statestore.Absent)
	}
	for _, prefix := range []string{"", "mirrors/m1/", "mirrors/m1", "other", "nothing/"} {
		want, err := s.List(ctx(t), prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		for _, limit := range []int{1, 2, 3, 100} {
			got := pageThrough(t, s, prefix, "", limit)
			if fmt.Sprint(keysOf(got)) != fmt.Sprint(keysOf(want)) {
				t.Fatalf("pages of %d under %q = %q, want List's %q", limit, prefix, keysOf(got), keysOf(want))
			}
			for i := range got {
				if string(got[i].Value) != "v:"+got[i].Key || got[i].Version != want[i].Version {
					t.Fatalf("pages of %d under %q: entry %q = (%q, v%d), want v%d", limit, prefix, got[i].Key, got[i].Value, got[i].Version, want[i].Version)
				}
			}
		}
	}
	cursors := []struct {
		prefix, after string
		want          []string
	}{
		{"mirrors/m1/", "mirrors/m1/partitions/t/0", []string{"mirrors/m1/partitions/t/1", "mirrors/m1/partitions/t/10"}},
		{"mirrors/m1/", "mirrors/m1/p", []string{"mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/1", "mirrors/m1/partitions/t/10"}},
		{"mirrors/m1/", "a", []string{"mirrors/m1/offsetmaps/t/0", "mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/1", "mirrors/m1/partitions/t/10"}},
		{"mirrors/m1/", "z", nil},
		{"", "mirrors/m2/partitions/u/3", []string{"other"}},
		{"", "other", nil},
	}
	for _, c := range cursors {
		got := pageThrough(t, s, c.prefix, c.after, 2)
		if fmt.Sprint(keysOf(got)) != fmt.Sprint(c.want) {
			t.Fatalf("pages under %q after %q = %q, want %q", c.prefix, c.after, keysOf(got), c.want)
		}
	}
	// A page's values are copies, as List's are.
	page, _, err := statestore.ListPage(ctx(t), s, "other", "", 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("ListPage(other) = %q, %v", keysOf(page), err)
	}
	copy(page[0].Value, "MUTATED")
	if e := mustGet(t, s, "other"); string(e.Value) != "v:other" {
		t.Fatalf("changing a listed value changed the store: %q", e.Value)
	}
}

// pageThrough lists prefix from after to the end, limit entries at a time,
// checking each page against the Pager contract.
func pageThrough(t *testing.T, s statestore.Store, prefix, after string, limit int) []statestore.Entry {
	t.Helper()
	var out []statestore.Entry
	for range 1000 {
		page, more, err := statestore.ListPage(ctx(t), s, prefix, after, limit)
		if err != nil {
			t.Fatalf("ListPage(%q, after %q, %d): %v", prefix, after, limit, err)
		}
		if len(page) > limit {
			t.Fatalf("ListPage(%q, after %q, %d) returned %d entries", prefix, after, limit, len(page))
		}
		if more && len(page) == 0 {
			t.Fatalf("ListPage(%q, after %q, %d): empty page announcing more", prefix, after, limit)
		}
		for _, e := range page {
			if e.Key <= after {
				t.Fatalf("ListPage(%q, after %q, %d): key %q out of order", prefix, after, limit, e.Key)
			}
			after = e.Key
		}
		out = append(out, page...)
		if !more {
			return out
		}
	}
	t.Fatalf("ListPage(%q, %d) did not end after 1000 pages", prefix, limit)
	return nil
}

func testListPageInvalidLimit(t *testing.T, s statestore.Store) {
	mustPut(t, s, "k", []byte("v"), statestore.Absent)
	for _, limit := range []int{0, -1} {
		_, _, err := statestore.ListPage(ctx(t), s, "", "", limit)
		wantErr(t, fmt.Sprintf("ListPage with limit %d", limit), err, statestore.ErrInvalidArgument)
	}
}

func testInfo(t *testing.T, s statestore.Store) {
	info := statestore.InfoOf(s)
	if err := info.Validate(); err != nil {
		t.Fatalf("Info: %v", err)
	}
	if again := statestore.InfoOf(s); fmt.Sprint(again) != fmt.Sprint(info) {
		t.Fatalf("Info changed between calls: %+v, then %+v", info, again)
	}
	if info.ProtocolMinor > statestore.ProtocolMinor {
		t.Logf("store speaks protocol 1.%d, newer than this suite's 1.%d", info.ProtocolMinor, statestore.ProtocolMinor)
	}
}

const leaseKey = "mirrors/m/leases/metadata-sync"

func mustAcquire(t *testing.T, l statestore.Leaser, holder string, ttl time.Duration) statestore.Lease {
	t.Helper()
	lease, err := l.AcquireLease(ctx(t), leaseKey, holder, ttl)
	if err != nil {
		t.Fatalf("AcquireLease by %s: %v", holder, err)
	}
	if lease.Key != leaseKey || lease.Holder != holder || lease.Version <= 0 || lease.TTL < ttl {
		t.Fatalf("AcquireLease by %s with TTL %s returned %+v", holder, ttl, lease)
	}
	return lease
}

func wantHolder(t *testing.T, l statestore.Leaser, holder string, version int64) {
	t.Helper()
	lease, err := l.GetLease(ctx(t), leaseKey)
	if err != nil {
		t.Fatalf("GetLease: %v", err)
	}
	if lease.Holder != holder || lease.Version != version || lease.Key != leaseKey {
		t.Fatalf("GetLease = %+v, want holder %s at version %d", lease, holder, version)
	}
}

// testLeaseHeld: a lease far from its expiry is refused to others, renewed
// and released by its holder only.
func testLeaseHeld(t *testing.T, s statestore.Store) {
	l := statestore.Leases(s)
	const ttl = time.Minute
	_, err := l.GetLease(ctx(t), leaseKey)
	wantErr(t, "GetLease of a lease never taken", err, statestore.ErrNotFound)
	a := mustAcquire(t, l, "daemon-a", ttl)
	wantHolder(t, l, "daemon-a", a.Version)

	_, err = l.AcquireLease(ctx(t), leaseKey, "daemon-b", ttl)
	wantErr(t, "AcquireLease by b while a holds it", err, statestore.ErrLeaseHeld)
	_, err = l.RenewLease(ctx(t), leaseKey, "daemon-b", ttl)
	wantErr(t, "RenewLease by b, which does not hold it", err, statestore.ErrLeaseNotHeld)
	wantErr(t, "ReleaseLease by b, which does not hold it", l.ReleaseLease(ctx(t), leaseKey, "daemon-b"), statestore.ErrLeaseNotHeld)
	wantHolder(t, l, "daemon-a", a.Version)

	again := mustAcquire(t, l, "daemon-a", ttl) // acquiring a lease one holds renews it
	if again.Version <= a.Version {
		t.Fatalf("re-acquire by its holder: version %d, want > %d", again.Version, a.Version)
	}
	renewed, err := l.RenewLease(ctx(t), leaseKey, "daemon-a", 2*ttl)
	if err != nil {
		t.Fatalf("RenewLease by its holder: %v", err)
	}
	if renewed.Holder != "daemon-a" || renewed.Version <= again.Version || renewed.TTL < 2*ttl {
		t.Fatalf("RenewLease = %+v, want holder daemon-a, version > %d, TTL >= %s", renewed, again.Version, 2*ttl)
	}
	_, err = l.AcquireLease(ctx(t), leaseKey, "daemon-b", ttl)
	wantErr(t, "AcquireLease by b after a renewed", err, statestore.ErrLeaseHeld)
	wantHolder(t, l, "daemon-a", renewed.Version)

	if err := l.ReleaseLease(ctx(t), leaseKey, "daemon-a"); err != nil {
		t.Fatalf("ReleaseLease by its holder: %v", err)
	}
	_, err = l.GetLease(ctx(t), leaseKey)
	wantErr(t, "GetLease after release", err, statestore.ErrNotFound)
	_, err = l.RenewLease(ctx(t), leaseKey, "daemon-a", ttl)
	wantErr(t, "RenewLease after release", err, statestore.ErrLeaseNotHeld)
	wantErr(t, "second ReleaseLease", l.ReleaseLease(ctx(t), leaseKey, "daemon-a"), statestore.ErrLeaseNotHeld)

	b := mustAcquire(t, l, "daemon-b", ttl) // at once: released, not expired
	if b.Version <= renewed.Version {
		t.Fatalf("version after release and re-acquire %d, want > %d", b.Version, renewed.Version)
	}
	wantHolder(t, l, "daemon-b", b.Version)
}

// testLeaseExpiry: a lease its holder stops renewing is taken by another
// holder once its TTL ran out, and the old holder can neither renew nor
// release it.
func testLeaseExpiry(t *testing.T, s statestore.Store) {
	l := statestore.Leases(s)
	const ttl = 200 * time.Millisecond
	start := time.Now()
	a := mustAcquire(t, l, "daemon-a", ttl)
	_, err := l.AcquireLease(ctx(t), leaseKey, "daemon-b", ttl)
	if time.Since(start) < ttl {
		// Only checkable when this machine was not slower than the TTL.
		wantErr(t, "AcquireLease by b within the TTL", err, statestore.ErrLeaseHeld)
	}
	var b statestore.Lease
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err = l.AcquireLease(ctx(t), leaseKey, "daemon-b", ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, statestore.ErrLeaseHeld) {
			t.Fatalf("AcquireLease by b while waiting for expiry: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lease of %s not renewed by its holder was still refused after 30s: %v", ttl, err)
		}
		time.Sleep(ttl / 10) // polling the condition: the lease is taken
	}
	if elapsed := time.Since(start); elapsed < ttl {
		t.Fatalf("b took a's lease %s after a acquired it, before its TTL of %s", elapsed, ttl)
	}
	if b.Holder != "daemon-b" || b.Version <= a.Version {
		t.Fatalf("lease taken by b = %+v, want holder daemon-b at a version > %d", b, a.Version)
	}
	wantHolder(t, l, "daemon-b", b.Version)
	_, err = l.RenewLease(ctx(t), leaseKey, "daemon-a", ttl)
	wantErr(t, "RenewLease by a after b took the lease", err, statestore.ErrLeaseNotHeld)
	wantErr(t, "ReleaseLease by a after b took the lease", l.ReleaseLease(ctx(t), leaseKey, "daemon-a"), statestore.ErrLeaseNotHeld)
	wantHolder(t, l, "daemon-b", b.Version)
}

func testLeaseConcurrent(t *testing.T, s statestore.Store) {
	l := statestore.Leases(s)
	errs := make([]error, writers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range writers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			_, errs[i] = l.AcquireLease(ctx(t), leaseKey, fmt.Sprintf("daemon-%d", i), time.Minute)
		}()
	}
	start.Done()
	done.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("daemon-%d and daemon-%d both acquired the lease", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, statestore.ErrLeaseHeld):
			t.Fatalf("daemon-%d: got %v, want an error wrapping ErrLeaseHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no daemon acquired the free lease")
	}
	lease, err := l.GetLease(ctx(t), leaseKey)
	if err != nil || lease.Holder != fmt.Sprintf("daemon-%d", winner) {
		t.Fatalf("GetLease = %+v, %v; want holder daemon-%d", lease, err, winner)
	}
}

func testLeaseInvalid(t *testing.T, s statestore.Store) {
	l := statestore.Leases(s)
	for _, c := range []struct {
		holder string
		ttl    time.Duration
	}{{"", time.Minute}, {"a\x00b", time.Minute}, {"a", 0}, {"a", -time.Second}} {
		_, err := l.AcquireLease(ctx(t), leaseKey, c.holder, c.ttl)
		wantErr(t, fmt.Sprintf("AcquireLease(%q, %s)", c.holder, c.ttl), err, statestore.ErrInvalidArgument)
		_, err = l.RenewLease(ctx(t), leaseKey, c.holder, c.ttl)
		wantErr(t, fmt.Sprintf("RenewLease(%q, %s)", c.holder, c.ttl), err, statestore.ErrInvalidArgument)
	}
	wantErr(t, "ReleaseLease with no holder", l.ReleaseLease(ctx(t), leaseKey, ""), statestore.ErrInvalidArgument)
	_, err := l.AcquireLease(ctx(t), "", "a", time.Minute)
	wantErr(t, "AcquireLease of an empty key", err, statestore.ErrInvalidKey)
	_, err = l.GetLease(ctx(t), "a\x00b")
	wantErr(t, "GetLease of a key with NUL", err, statestore.ErrInvalidKey)
	_, err = l.GetLease(ctx(t), leaseKey)
	wantErr(t, "GetLease after invalid acquires", err, statestore.ErrNotFound)
}
