package mirror

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/syncloop"
	"github.com/kmirror/kmirror/internal/faultstore"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// shortLeases lets a lease's TTL be three refresh intervals of 500 ms. It
// changes a package variable every engine reads, so the tests that call it
// do not run in parallel (no t.Parallel): Go runs them before any parallel
// test starts.
func shortLeases(t *testing.T) {
	old := syncloop.MinLeaseTTL
	syncloop.MinLeaseTTL = 0
	t.Cleanup(func() { syncloop.MinLeaseTTL = old })
}

func wantLeaseMetric(t *testing.T, e *Engine, want float64) {
	t.Helper()
	if v, ok, err := e.opts.Metrics.Value("kmirror_metadata_sync_lease_held", map[string]string{"mirror": "test"}); err != nil || !ok || v != want {
		t.Fatalf("kmirror_metadata_sync_lease_held{mirror=test} = %v (found %v, %v), want %v", v, ok, err, want)
	}
}

// TestOnlyTheSyncLeaseHolderSyncsAndAnotherTakesOverWhenItStops: two
// engines share one state store. Only the lease holder creates topics and
// starts partitions; the other says who syncs. When the holder stops
// cleanly (releasing the lease), the other takes over within the TTL and
// mirrors on, offsets preserved.
func TestOnlyTheSyncLeaseHolderSyncsAndAnotherTakesOverWhenItStops(t *testing.T) {
	shortLeases(t)
	f := newFixture(t)
	f.createTopic(t, "leased", 2)
	f.produce(t, "leased", 20, "tx-l1")
	store := memstore.New()
	cfg := f.config(t, "leased.*") // refresh 500ms: TTL 1.5s
	ttl := syncloop.LeaseTTL(cfg.MetadataRefreshInterval)
	a := startEngine(t, cfg, store)
	f.waitMirrored(t, a, "leased", 2)
	holder := mirrorStatus(a).SyncLeaseHolder
	if !mirrorStatus(a).SyncLeaseHeld || holder == "" {
		t.Fatalf("first engine: %+v, want it to hold the lease", mirrorStatus(a))
	}
	wantLeaseMetric(t, a, 1)
	bStore := &readCounter{Store: store, key: statestore.LeaseKey("test", "metadata-sync")}
	b := startEngine(t, cfg, bStore)
	kfaketest.WaitFor(t, "second engine sees the holder", func() (bool, string) {
		st := mirrorStatus(b)
		return st.SyncLeaseHolder == holder, fmt.Sprintf("%+v", st)
	})
	f.createTopic(t, "leased-2", 1)
	f.produce(t, "leased-2", 5, "tx-l2")
	f.waitMirrored(t, a, "leased-2", 1)
	// The second engine tries for the lease once a refresh interval: two
	// more tries are two intervals in which it would have synced.
	tries := bStore.reads()
	kfaketest.WaitFor(t, "two more lease attempts of the second engine", func() (bool, string) {
		n := bStore.reads()
		return n >= tries+2, fmt.Sprintf("%d attempts, %d before", n, tries)
	})
	st := mirrorStatus(b)
	if st.SyncLeaseHeld || len(st.Partitions) != 0 || st.Error != "" {
		t.Fatalf("second engine without the lease: held %v, %d partitions, error %q; want no sync", st.SyncLeaseHeld, len(st.Partitions), st.Error)
	}
	if !strings.Contains(strings.Join(st.Notes, " "), holder) {
		t.Fatalf("second engine's notes %q do not name the holder %s", st.Notes, holder)
	}
	wantLeaseMetric(t, b, 0)
	stopEngine(t, a)
	stopped := time.Now()
	kfaketest.WaitFor(t, "second engine takes the lease", func() (bool, string) {
		st := mirrorStatus(b)
		return st.SyncLeaseHeld, fmt.Sprintf("%+v", st)
	})
	if took := time.Since(stopped); took > ttl {
		t.Fatalf("takeover after a clean stop took %v, want within the TTL %v", took, ttl)
	}
	wantLeaseMetric(t, b, 1)
	f.produce(t, "leased", 20, "tx-l3")
	f.waitMirrored(t, b, "leased", 2)
	f.waitMirrored(t, b, "leased-2", 1)
	f.verify(t, "leased", 2)
	f.verify(t, "leased-2", 1)
}

// TestSyncLeaseOfADaemonCutOffFromTheStoreIsTakenOverAfterTheTTL: the
// holder loses its state store (as a killed daemon would: no release). The
// other engine waits until the lease has not been renewed for a TTL, then
// takes over and creates the topics that appeared meanwhile.
func TestSyncLeaseOfADaemonCutOffFromTheStoreIsTakenOverAfterTheTTL(t *testing.T) {
	shortLeases(t)
	f := newFixture(t)
	f.createTopic(t, "cut", 1)
	f.produce(t, "cut", 10, "tx-c1")
	mem := memstore.New()
	aStore := faultstore.New(mem)
	cfg := f.config(t, "cut.*")
	ttl := syncloop.LeaseTTL(cfg.MetadataRefreshInterval)
	a := startEngine(t, cfg, aStore)
	f.waitMirrored(t, a, "cut", 1)
	b := startEngine(t, cfg, mem)
	kfaketest.WaitFor(t, "second engine sees the holder", func() (bool, string) {
		st := mirrorStatus(b)
		return st.SyncLeaseHolder != "" && !st.SyncLeaseHeld, fmt.Sprintf("%+v", st)
	})
	aStore.Fail(true)
	cut := time.Now()
	f.createTopic(t, "cut-2", 1)
	f.produce(t, "cut-2", 5, "tx-c2")
	kfaketest.WaitFor(t, "the cut-off engine stops syncing", func() (bool, string) {
		st := mirrorStatus(a)
		return !st.SyncLeaseHeld, fmt.Sprintf("%+v", st)
	})
	kfaketest.WaitFor(t, "second engine takes the lease", func() (bool, string) {
		st := mirrorStatus(b)
		return st.SyncLeaseHeld, fmt.Sprintf("%+v", st)
	})
	if took := time.Since(cut); took < ttl/2 || took > 3*ttl {
		t.Fatalf("takeover %v after the holder was cut off, want after about one TTL (%v)", took, ttl)
	}
	kfaketest.WaitFor(t, "second engine creates the new topic", func() (bool, string) {
		n := partitionCount(t, f.dstCl, "cut-2")
		return n == 1, fmt.Sprintf("%d partitions", n)
	})
	if st := mirrorStatus(a); st.SyncLeaseHeld {
		t.Fatalf("cut-off engine still holds the lease: %+v", st)
	}
}
