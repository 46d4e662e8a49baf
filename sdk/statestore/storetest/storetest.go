// Package storetest is the conformance suite of statestore.Store. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) statestore.Store {
//			s, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// open must return a new, empty store for each call; the suite closes it.
//
// Besides Store's methods the suite checks what every store offers through
// the helpers of package statestore, natively or not: statestore.InfoOf
// (valid and stable), statestore.ListPage (pages that add up to List) and
// statestore.Leases (acquire, refusal while held, takeover after expiry,
// renew and release only by the holder). The expiry case waits for a
// lease of 200ms to expire (a store that rounds TTLs up, such as etcd's
// whole seconds, makes it wait longer).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// Run runs the conformance suite against stores made by open, one fresh
// store per subtest.
func Run(t *testing.T, open func(t *testing.T) statestore.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s statestore.Store)
	}{
		{"GetMissingIsNotFound", testGetMissing},
		{"CreateThenGet", testCreateThenGet},
		{"CreateExistingIsMismatch", testCreateExisting},
		{"PutCompareAndSet", testPutCAS},
		{"PutAnyVersion", testPutAnyVersion},
		{"DeleteCompareAndSet", testDeleteCAS},
		{"RecreateNeverReusesVersion", testRecreate},
		{"InvalidKeysRejected", testInvalidKeys},
		{"InvalidVersionsRejected", testInvalidVersions},
		{"AwkwardKeysRoundTrip", testAwkwardKeys},
		{"EmptyAndLargeValues", testValues},
		{"ListByPrefixSorted", testList},
		{"ValuesAreCopied", testCopies},
		{"ConcurrentPutSameVersionOneWins", testConcurrentSameVersion},
		{"ConcurrentCreateOneWins", testConcurrentCreate},
		{"ConcurrentDistinctKeys", testConcurrentDistinct},
		{"ListPage", testListPage},
		{"ListPageInvalidLimit", testListPageInvalidLimit},
		{"InfoValidAndStable", testInfo},
		{"LeaseHeldIsRefused", testLeaseHeld},
		{"LeaseTakenAfterExpiry", testLeaseExpiry},
		{"LeaseConcurrentAcquireOneWins", testLeaseConcurrent},
		{"LeaseInvalidArguments", testLeaseInvalid},
		{"CanceledContext", testCanceledContext},
		{"ClosedStoreErrors", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustPut(t *testing.T, s statestore.Store, key string, val []byte, expect int64) int64 {
	t.Helper()
	v, err := s.Put(ctx(t), key, val, expect)
	if err != nil {
		t.Fatalf("Put(%q, expect %d): %v", key, expect, err)
	}
	if v <= 0 {
		t.Fatalf("Put(%q) returned version %d, want > 0", key, v)
	}
	return v
}

func mustGet(t *testing.T, s statestore.Store, key string) statestore.Entry {
	t.Helper()
	e, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if e.Key != key {
		t.Fatalf("Get(%q) returned key %q", key, e.Key)
	}
	return e
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func wantEntry(t *testing.T, s statestore.Store, key string, val []byte, version int64) {
	t.Helper()
	e := mustGet(t, s, key)
	if !bytes.Equal(e.Value, val) || e.Version != version {
		t.Fatalf("Get(%q) = (%q, v%d), want (%q, v%d)", key, e.Value, e.Version, val, version)
	}
}

func testGetMissing(t *testing.T, s statestore.Store) {
	_, err := s.Get(ctx(t), "missing")
	wantErr(t, "Get of a missing key", err, statestore.ErrNotFound)
	wantErr(t, "Delete of a missing key", s.Delete(ctx(t), "missing", statestore.AnyVersion), statestore.ErrNotFound)
	wantErr(t, "Delete of a missing key with a version", s.Delete(ctx(t), "missing", 7), statestore.ErrNotFound)
}

func testCreateThenGet(t *testing.T, s statestore.Store) {
	v := mustPut(t, s, "a/b", []byte("one"), statestore.Absent)
	wantEntry(t, s, "a/b", []byte("one"), v)
}

func testCreateExisting(t *testing.T, s statestore.Store) {
	v := mustPut(t, s, "k", []byte("first"), statestore.Absent)
	_, err := s.Put(ctx(t), "k", []byte("second"), statestore.Absent)
	wantErr(t, "second create", err, statestore.ErrVersionMismatch)
	wantEntry(t, s, "k", []byte("first"), v)
}

func testPutCAS(t *testing.T, s statestore.Store) {
	v1 := mustPut(t, s, "k", []byte("1"), statestore.Absent)
	v2 := mustPut(t, s, "k", []byte("2"), v1)
	if v2 <= v1 {
		t.Fatalf("version after update %d, want > %d", v2, v1)
	}
	_, err := s.Put(ctx(t), "k", []byte("stale"), v1)
	wantErr(t, "Put with a stale version", err, statestore.ErrVersionMismatch)
	wantEntry(t, s, "k", []byte("2"), v2)

	_, err = s.Put(ctx(t), "other", []byte("x"), v2)
	wantErr(t, "Put with a version on a missing key", err, statestore.ErrVersionMismatch)
	_, err = s.Get(ctx(t), "other")
	wantErr(t, "Get after failed Put", err, statestore.ErrNotFound)

	prev := v2
	for i := range 20 {
		v := mustPut(t, s, "k", fmt.Appendf(nil, "w%d", i), prev)
		if v <= prev {
			t.Fatalf("write %d: version %d, want > %d", i, v, prev)
		}
		prev = v
	}
	wantEntry(t, s, "k", []byte("w19"), prev)
}

func testPutAnyVersion(t *testing.T, s statestore.Store) {
	v1 := mustPut(t, s, "k", []byte("1"), statestore.AnyVersion)
	wantEntry(t, s, "k", []byte("1"), v1)
	v2 := mustPut(t, s, "k", []byte("2"), statestore.AnyVersion)
	if v2 <= v1 {
		t.Fatalf("version after unconditional update %d, want > %d", v2, v1)
	}
	wantEntry(t, s, "k", []byte("2"), v2)
}

func testDeleteCAS(t *testing.T, s statestore.Store) {
	v1 := mustPut(t, s, "k", []byte("1"), statestore.Absent)
	v2 := mustPut(t, s, "k", []byte("2"), v1)
	wantErr(t, "Delete with a stale version", s.Delete(ctx(t), "k", v1), statestore.ErrVersionMismatch)
	wantEntry(t, s, "k", []byte("2"), v2)
	if err := s.Delete(ctx(t), "k", v2); err != nil {
		t.Fatalf("Delete with the current version: %v", err)
	}
	_, err := s.Get(ctx(t), "k")
	wantErr(t, "Get after Delete", err, statestore.ErrNotFound)

	mustPut(t, s, "j", []byte("x"), statestore.Absent)
	if err := s.Delete(ctx(t), "j", statestore.AnyVersion); err != nil {
		t.Fatalf("unconditional Delete: %v", err)
	}
	_, err = s.Get(ctx(t), "j")
	wantErr(t, "Get after unconditional Delete", err, statestore.ErrNotFound)
}

func testRecreate(t *testing.T, s statestore.Store) {
	seen := map[int64]bool{}
	var last int64
	for i := range 5 {
		v1 := mustPut(t, s, "k", []byte("a"), statestore.Absent)
		v2 := mustPut(t, s, "k", []byte("b"), v1)
		for _, v := range []int64{v1, v2} {
			if seen[v] || v <= last {
				t.Fatalf("round %d: version %d reused or not increasing (last %d)", i, v, last)
			}
			seen[v] = true
			last = v
		}
		if err := s.Delete(ctx(t), "k", v2); err != nil {
			t.Fatalf("round %d: Delete: %v", i, err)
		}
		// A writer holding a version from before the Delete must lose.
		_, err := s.Put(ctx(t), "k", []byte("stale"), v1)
		wantErr(t, "Put with a version from before Delete", err, statestore.ErrVersionMismatch)
	}
}

func testInvalidKeys(t *testing.T, s statestore.Store) {
	bad := []string{"", "a\x00b", "bad\xffutf8", strings.Repeat("k", statestore.MaxKeyLen+1)}
	for _, k := range bad {
		_, err := s.Put(ctx(t), k, []byte("v"), statestore.AnyVersion)
		wantErr(t, fmt.Sprintf("Put(%.20q)", k), err, statestore.ErrInvalidKey)
		_, err = s.Get(ctx(t), k)
		wantErr(t, fmt.Sprintf("Get(%.20q)", k), err, statestore.ErrInvalidKey)
		wantErr(t, fmt.Sprintf("Delete(%.20q)", k), s.Delete(ctx(t), k, statestore.AnyVersion), statestore.ErrInvalidKey)
	}
	all, err := s.List(ctx(t), "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(all) != 0 {
		t.Fatalf("invalid keys left entries behind: %v", keysOf(all))
	}
}

func testInvalidVersions(t *testing.T, s statestore.Store) {
	_, err := s.Put(ctx(t), "k", []byte("v"), -2)
	wantErr(t, "Put with version -2", err, statestore.ErrInvalidVersion)
	v := mustPut(t, s, "k", []byte("v"), statestore.Absent)
	wantErr(t, "Delete with Absent", s.Delete(ctx(t), "k", statestore.Absent), statestore.ErrInvalidVersion)
	wantErr(t, "Delete with version -5", s.Delete(ctx(t), "k", -5), statestore.ErrInvalidVersion)
	wantEntry(t, s, "k", []byte("v"), v)
}

// awkwardKeys are keys a naive mapping (to file names, paths, URLs) gets
// wrong; every one must be distinct and round-trip.
func awkwardKeys() []string {
	return []string{
		"a", "a/", "a/b", "a%2Fb", "a%b", "A", ".", "..", ".hidden", "./x", "../x",
		"mirrors/m_1-x/partitions/my.topic_name-1/0",
		"mirrors/m/partitions/t/2147483647",
		"with space", "tab\tnew\nline", "ünïcødé/キー", "back\\slash", "colon:star*?\"<>|",
		"~tilde", "-dash", "%", "%%", "trailing.", "x.tmp", "LOCK", "lock",
		strings.Repeat("long.topic-name_", 16),
		strings.Repeat("/", 3),
		strings.Repeat("é", statestore.MaxKeyLen/2),       // exactly MaxKeyLen bytes
		strings.Repeat("z", statestore.MaxKeyLen),         // exactly MaxKeyLen bytes
		strings.Repeat("z", statestore.MaxKeyLen-1) + "y", // shares a long prefix with the one above
	}
}

func testAwkwardKeys(t *testing.T, s statestore.Store) {
	keys := awkwardKeys()
	versions := map[string]int64{}
	for _, k := range keys {
		versions[k] = mustPut(t, s, k, []byte("value of "+k), statestore.Absent)
	}
	for _, k := range keys {
		wantEntry(t, s, k, []byte("value of "+k), versions[k])
	}
	all, err := s.List(ctx(t), "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(all) != len(keys) {
		t.Fatalf("List returned %d entries, want %d: %q", len(all), len(keys), keysOf(all))
	}
	for _, e := range all {
		if string(e.Value) != "value of "+e.Key || e.Version != versions[e.Key] {
			t.Fatalf("List entry %.40q = (%.40q, v%d), want v%d", e.Key, e.Value, e.Version, versions[e.Key])
		}
	}
	for _, k := range keys {
		if err := s.Delete(ctx(t), k, versions[k]); err != nil {
			t.Fatalf("Delete(%.40q): %v", k, err)
		}
	}
	if all, _ := s.List(ctx(t), ""); len(all) != 0 {
		t.Fatalf("after deleting every key List returned %q", keysOf(all))
	}
}

func testValues(t *testing.T, s statestore.Store) {
	v := mustPut(t, s, "empty", []byte{}, statestore.Absent)
	e := mustGet(t, s, "empty")
	if len(e.Value) != 0 || e.Version != v {
		t.Fatalf("empty value came back as (%q, v%d)", e.Value, e.Version)
	}
	v = mustPut(t, s, "nil", nil, statestore.Absent)
	e = mustGet(t, s, "nil")
	if len(e.Value) != 0 || e.Version != v {
		t.Fatalf("nil value came back as (%q, v%d)", e.Value, e.Version)
	}
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	v = mustPut(t, s, "big", big, statestore.Absent)
	wantEntry(t, s, "big", big, v)
	bin := []byte{0, 1, 2, 0xff, 0, '\n'}
	v = mustPut(t, s, "binary", bin, statestore.Absent)
	wantEntry(t, s, "binary", bin, v)
}

func testList(t *testing.T, s statestore.Store) {
	keys := []string{
		"mirrors/m1/partitions/t/1",
		"mirrors/m1/partitions/t/0",
		"mirrors/m1/partitions/t/10",
		"mirrors/m1/offsetmaps/t/0",
		"mirrors/m10/partitions/t/0",
		"mirrors/m2/partitions/u/3",
		"other",
	}
	versions := map[string]int64{}
	for _, k := range keys {
		versions[k] = mustPut(t, s, k, []byte(k), statestore.Absent)
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"", []string{
			"mirrors/m1/offsetmaps/t/0", "mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/1",
			"mirrors/m1/partitions/t/10", "mirrors/m10/partitions/t/0", "mirrors/m2/partitions/u/3", "other",
		}},
		{"mirrors/m1/", []string{
			"mirrors/m1/offsetmaps/t/0", "mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/1", "mirrors/m1/partitions/t/10",
		}},
		{"mirrors/m1/partitions/t/1", []string{"mirrors/m1/partitions/t/1", "mirrors/m1/partitions/t/10"}},
		{"mirrors/m1", []string{
			"mirrors/m1/offsetmaps/t/0", "mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/1",
			"mirrors/m1/partitions/t/10", "mirrors/m10/partitions/t/0",
		}},
		{"other", []string{"other"}},
		{"nothing/", nil},
		{"mirrors/m1/partitions/t/10/", nil},
	}
	for _, c := range cases {
		got, err := s.List(ctx(t), c.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", c.prefix, err)
		}
		if fmt.Sprint(keysOf(got)) != fmt.Sprint(c.want) {
			t.Fatalf("List(%q) = %q, want %q", c.prefix, keysOf(got), c.want)
		}
		for _, e := range got {
			if string(e.Value) != e.Key || e.Version != versions[e.Key] {
				t.Fatalf("List(%q): entry %q = (%q, v%d), want v%d", c.prefix, e.Key, e.Value, e.Version, versions[e.Key])
			}
		}
	}
	if err := s.Delete(ctx(t), "mirrors/m1/partitions/t/1", statestore.AnyVersion); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx(t), "mirrors/m1/partitions/")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"mirrors/m1/partitions/t/0", "mirrors/m1/partitions/t/10"}; fmt.Sprint(keysOf(got)) != fmt.Sprint(want) {
		t.Fatalf("List after Delete = %q, want %q", keysOf(got), want)
	}
}

func testCopies(t *testing.T, s statestore.Store) {
	in := []byte("original")
	v := mustPut(t, s, "k", in, statestore.Absent)
	copy(in, "MUTATED!")
	wantEntry(t, s, "k", []byte("original"), v)

	e := mustGet(t, s, "k")
	copy(e.Value, "MUTATED!")
	wantEntry(t, s, "k", []byte("original"), v)

	list, err := s.List(ctx(t), "")
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v; want one entry", list, err)
	}
	copy(list[0].Value, "MUTATED!")
	wantEntry(t, s, "k", []byte("original"), v)
}

const writers = 16

func testConcurrentSameVersion(t *testing.T, s statestore.Store) {
	base := mustPut(t, s, "k", []byte("base"), statestore.Absent)
	for round := range 5 {
		results := raceWriters(t, s, "k", base)
		winner, v := oneWinner(t, results)
		wantEntry(t, s, "k", fmt.Appendf(nil, "writer %d", winner), v)
		if v <= base {
			t.Fatalf("round %d: winning version %d, want > %d", round, v, base)
		}
		base = v
	}
}

func testConcurrentCreate(t *testing.T, s statestore.Store) {
	results := raceWriters(t, s, "new", statestore.Absent)
	winner, v := oneWinner(t, results)
	wantEntry(t, s, "new", fmt.Appendf(nil, "writer %d", winner), v)
}

type putResult struct {
	version int64
	err     error
}

func raceWriters(t *testing.T, s statestore.Store, key string, expect int64) []putResult {
	results := make([]putResult, writers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range writers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			v, err := s.Put(ctx(t), key, fmt.Appendf(nil, "writer %d", i), expect)
			results[i] = putResult{v, err}
		}()
	}
	start.Done()
	done.Wait()
	return results
}

func oneWinner(t *testing.T, results []putResult) (int, int64) {
	t.Helper()
	winner := -1
	var version int64
	for i, r := range results {
		switch {
		case r.err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both won the same compare-and-set", winner, i)
		case r.err == nil:
			winner, version = i, r.version
		case !errors.Is(r.err, statestore.ErrVersionMismatch):
			t.Fatalf("writer %d: got %v, want an error wrapping ErrVersionMismatch", i, r.err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer won the compare-and-set")
	}
	return winner, version
}

func testConcurrentDistinct(t *testing.T, s statestore.Store) {
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("mirrors/m/partitions/t/%d", i)
			var expect int64 = statestore.Absent
			for j := range 10 {
				v, err := s.Put(ctx(t), key, fmt.Appendf(nil, "%d/%d", i, j), expect)
				if err != nil {
					errs[i] = fmt.Errorf("key %s write %d: %w", key, j, err)
					return
				}
				expect = v
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx(t), "mirrors/m/partitions/t/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != writers {
		t.Fatalf("List returned %d keys, want %d", len(list), writers)
	}
	for _, e := range list {
		var i int
		if _, err := fmt.Sscanf(e.Key, "mirrors/m/partitions/t/%d", &i); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d/9", i); string(e.Value) != want {
			t.Fatalf("%s = %q, want %q", e.Key, e.Value, want)
		}
	}
}

func testCanceledContext(t *testing.T, s statestore.Store) {
	v := mustPut(t, s, "k", []byte("kept"), statestore.Absent)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	_, err := s.Put(c, "k", []byte("lost"), v)
	wantErr(t, "Put with a canceled context", err, context.Canceled)
	_, err = s.Put(c, "new", []byte("lost"), statestore.Absent)
	wantErr(t, "create with a canceled context", err, context.Canceled)
	_, err = s.Get(c, "k")
	wantErr(t, "Get with a canceled context", err, context.Canceled)
	_, err = s.List(c, "")
	wantErr(t, "List with a canceled context", err, context.Canceled)
	wantErr(t, "Delete with a canceled context", s.Delete(c, "k", v), context.Canceled)
	_, _, err = statestore.ListPage(c, s, "", "", 10)
	wantErr(t, "ListPage with a canceled context", err, context.Canceled)
	leases := statestore.Leases(s)
	_, err = leases.AcquireLease(c, "lease", "a", time.Minute)
	wantErr(t, "AcquireLease with a canceled context", err, context.Canceled)
	_, err = leases.RenewLease(c, "lease", "a", time.Minute)
	wantErr(t, "RenewLease with a canceled context", err, context.Canceled)
	wantErr(t, "ReleaseLease with a canceled context", leases.ReleaseLease(c, "lease", "a"), context.Canceled)
	_, err = leases.GetLease(c, "lease")
	wantErr(t, "GetLease with a canceled context", err, context.Canceled)
	_, err = leases.GetLease(ctx(t), "lease")
	wantErr(t, "GetLease of a lease acquired with a canceled context", err, statestore.ErrNotFound)
	wantEntry(t, s, "k", []byte("kept"), v)
	_, err = s.Get(ctx(t), "new")
	wantErr(t, "Get of a key created with a canceled context", err, statestore.ErrNotFound)
}

func testClosed(t *testing.T, s statestore.Store) {
	v := mustPut(t, s, "k", []byte("v"), statestore.Absent)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.Get(ctx(t), "k")
	wantErr(t, "Get after Close", err, statestore.ErrClosed)
	_, err = s.Put(ctx(t), "k", []byte("w"), v)
	wantErr(t, "Put after Close", err, statestore.ErrClosed)
	wantErr(t, "Delete after Close", s.Delete(ctx(t), "k", v), statestore.ErrClosed)
	_, err = s.List(ctx(t), "")
	wantErr(t, "List after Close", err, statestore.ErrClosed)
	_, _, err = statestore.ListPage(ctx(t), s, "", "", 10)
	wantErr(t, "ListPage after Close", err, statestore.ErrClosed)
	leases := statestore.Leases(s)
	_, err = leases.AcquireLease(ctx(t), "lease", "a", time.Minute)
	wantErr(t, "AcquireLease after Close", err, statestore.ErrClosed)
	_, err = leases.GetLease(ctx(t), "lease")
	wantErr(t, "GetLease after Close", err, statestore.ErrClosed)
	if err := statestore.InfoOf(s).Validate(); err != nil {
		t.Fatalf("Info after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func keysOf(es []statestore.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}
