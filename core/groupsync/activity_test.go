package groupsync

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// captureFilter records the groups each FilterGroups call was given, and
// keeps those keep accepts (every group when keep is nil).
type captureFilter struct {
	mu    sync.Mutex
	calls [][]filter.Group
	keep  func(filter.Group) bool
}

func (c *captureFilter) filter() filter.Filter {
	return filter.Funcs{Name: "capture", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.calls = append(c.calls, slices.Clone(in))
		var out []filter.Group
		for _, g := range in {
			if c.keep == nil || c.keep(g) {
				out = append(out, g)
			}
		}
		return out, nil
	}}
}

// lastSeen returns the LastCommit of every group of the last call.
func (c *captureFilter) lastSeen(t *testing.T) map[string]time.Time {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		t.Fatal("the filter was never called")
	}
	out := map[string]time.Time{}
	for _, g := range c.calls[len(c.calls)-1] {
		out[g.ID] = g.LastCommit
	}
	return out
}

func (e *env) syncerAt(t *testing.T, clock *testClock, f filter.Filter, store statestore.Store) *Syncer {
	t.Helper()
	s, err := New(Options{Mirror: "m1", Source: e.srcAdm, Destination: e.dstAdm, Filter: f, Mirrored: e.mirrored, Now: clock.Now, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func syncWith(t *testing.T, s *Syncer) Report {
	t.Helper()
	rep, err := s.Sync(kfaketest.Context(t))
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return rep
}

// A group that keeps committing keeps its LastCommit fresh; a group that
// stops committing keeps the time of its last change, and so ages. A group
// seen for the first time counts as having committed when it was first seen.
// The filter sees LastCommit, and the report carries it.
func TestLastCommitIsWhenSourceOffsetsLastChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clock := newTestClock()
	capture := &captureFilter{}
	s := e.syncerAt(t, clock, capture.filter(), nil)

	commit(t, e.srcAdm, "busy", "", map[int32]int64{0: 1})
	commit(t, e.srcAdm, "idle", "", map[int32]int64{0: 1, 1: 4})
	first := clock.Now()
	syncWith(t, s)
	if got := capture.lastSeen(t); !got["busy"].Equal(first) || !got["idle"].Equal(first) {
		t.Fatalf("first cycle: the filter saw %v, want both groups at %v (first seen)", got, first)
	}

	var last time.Time
	for i := range 3 {
		last = clock.advance(10 * time.Minute)
		commit(t, e.srcAdm, "busy", "", map[int32]int64{0: int64(2 + i)})
		// idle re-commits the offsets it had: no change, no activity.
		commit(t, e.srcAdm, "idle", "", map[int32]int64{0: 1})
		rep := syncWith(t, s)
		got := capture.lastSeen(t)
		if !got["busy"].Equal(last) {
			t.Fatalf("cycle %d: busy LastCommit %v, want %v (it committed)", i, got["busy"], last)
		}
		if !got["idle"].Equal(first) {
			t.Fatalf("cycle %d: idle LastCommit %v, want %v (no change since)", i, got["idle"], first)
		}
		if g := mustFind(t, rep.Groups, "idle"); !g.LastCommit.Equal(first) {
			t.Fatalf("cycle %d: report of idle %+v, want LastCommit %v", i, g, first)
		}
	}

	// A group appearing later is first seen then.
	late := clock.advance(time.Minute)
	commit(t, e.srcAdm, "late", "", map[int32]int64{1: 7})
	syncWith(t, s)
	if got := capture.lastSeen(t); !got["late"].Equal(late) || !got["busy"].Equal(last) {
		t.Fatalf("the filter saw %v, want late at %v and busy still at %v", got, late, last)
	}
}

// A group the filter drops for being idle is still watched: once it commits
// again, its LastCommit is fresh, the filter keeps it and it is synced.
func TestDroppedGroupIsStillWatchedAndComesBackWhenItCommits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clock := newTestClock()
	capture := &captureFilter{keep: func(g filter.Group) bool {
		return g.LastCommit.IsZero() || clock.Now().Sub(g.LastCommit) <= time.Hour
	}}
	s := e.syncerAt(t, clock, capture.filter(), nil)
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 3})
	if rep := syncWith(t, s); mustFind(t, rep.Groups, "g").Synced != 1 {
		t.Fatalf("first cycle: %+v, want g synced", rep.Groups)
	}
	clock.advance(2 * time.Hour)
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 3}) // the same offset
	if rep := syncWith(t, s); len(rep.Groups) != 0 {
		t.Fatalf("after two idle hours: %+v, want g dropped by the filter", rep.Groups)
	}
	now := clock.advance(time.Minute)
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 5})
	rep := syncWith(t, s)
	if g := mustFind(t, rep.Groups, "g"); g.Synced != 1 || !g.LastCommit.Equal(now) {
		t.Fatalf("after a new commit: %+v, want g synced with LastCommit %v", g, now)
	}
	if at, _ := committed(t, e.dstAdm, "g", 0); at != 5 {
		t.Fatalf("destination offset %d, want 5", at)
	}
}

// The age survives a restart: a syncer started later on the same state store
// gives an unchanged group the LastCommit the previous one saw, not the time
// of the restart; a group that committed while the daemon was down is fresh.
// Without a store, every group looks fresh after a restart.
func TestLastCommitSurvivesARestartThroughTheStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clock := newTestClock()
	store := memstore.New()
	commit(t, e.srcAdm, "idle", "", map[int32]int64{0: 2})
	commit(t, e.srcAdm, "busy", "", map[int32]int64{0: 2})
	first := clock.Now()
	syncWith(t, e.syncerAt(t, clock, nil, store))
	ent, err := store.Get(kfaketest.Context(t), statestore.GroupHistoryKey("m1"))
	if err != nil || !strings.Contains(string(ent.Value), `"last_commit":"2026-12-01T08:00:00Z"`) {
		t.Fatalf("stored history %s (%v), want the groups' last commit", ent.Value, err)
	}

	// The daemon is down for three hours; busy commits meanwhile.
	restart := clock.advance(3 * time.Hour)
	commit(t, e.srcAdm, "busy", "", map[int32]int64{0: 9})
	capture := &captureFilter{}
	after := e.syncerAt(t, clock, capture.filter(), store)
	syncWith(t, after)
	got := capture.lastSeen(t)
	if !got["idle"].Equal(first) {
		t.Fatalf("after the restart idle has LastCommit %v, want %v (stored)", got["idle"], first)
	}
	if !got["busy"].Equal(restart) {
		t.Fatalf("after the restart busy has LastCommit %v, want %v (it committed while down)", got["busy"], restart)
	}

	// A second restart, later: still the stored age.
	clock.advance(time.Hour)
	syncWith(t, e.syncerAt(t, clock, capture.filter(), store))
	if got := capture.lastSeen(t); !got["idle"].Equal(first) || !got["busy"].Equal(restart) {
		t.Fatalf("after a second restart the filter saw %v, want idle %v and busy %v", got, first, restart)
	}

	noStore := &captureFilter{}
	now := clock.Now()
	syncWith(t, e.syncerAt(t, clock, noStore.filter(), nil))
	if got := noStore.lastSeen(t); !got["idle"].Equal(now) {
		t.Fatalf("without a store idle has LastCommit %v, want %v (first seen)", got["idle"], now)
	}
}

// A history stored before LastCommit existed (a bare list of offsets) is
// still read: its never-backwards offsets apply, and groups count as first
// seen.
func TestHistoryOfTheFirstFormatIsStillRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clock := newTestClock()
	store := memstore.New()
	old := `[{"kind":"consumer","group":"g","topic":"orders","partition":0,"offset":6}]`
	if _, err := store.Put(kfaketest.Context(t), statestore.GroupHistoryKey("m1"), []byte(old), statestore.AnyVersion); err != nil {
		t.Fatal(err)
	}
	// The source was rewound below the stored 6; the destination is ahead.
	commit(t, e.dstAdm, "g", "", map[int32]int64{0: 9})
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 2})
	capture := &captureFilter{}
	syncWith(t, e.syncerAt(t, clock, capture.filter(), store))
	if at, _ := committed(t, e.dstAdm, "g", 0); at != 2 {
		t.Fatalf("destination offset %d, want 2 (the stored history says the source moved backwards)", at)
	}
	if got := capture.lastSeen(t); !got["g"].Equal(clock.Now()) {
		t.Fatalf("LastCommit %v, want %v (first seen)", got["g"], clock.Now())
	}
}

// Share groups get a LastCommit from their start offsets.
func TestShareGroupLastCommitFollowsStartOffsets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clock := newTestClock()
	capture := &captureFilter{}
	s := e.syncerAt(t, clock, capture.filter(), nil)
	alter := func(at int64) {
		os := kadm.Offsets{}
		addOffset(os, kadm.Offset{Topic: topic, Partition: 0, At: at})
		if _, err := e.srcAdm.AlterShareGroupOffsets(kfaketest.Context(t), "sg", os); err != nil {
			t.Fatalf("altering the source share group: %v", err)
		}
	}
	alter(3)
	first := clock.Now()
	syncWith(t, s)
	clock.advance(time.Hour)
	rep := syncWith(t, s)
	if got := capture.lastSeen(t); !got["sg"].Equal(first) {
		t.Fatalf("unchanged share group: LastCommit %v, want %v", got["sg"], first)
	}
	if g := mustFind(t, rep.ShareGroups, "sg"); !g.LastCommit.Equal(first) {
		t.Fatalf("share group report %+v, want LastCommit %v", g, first)
	}
	moved := clock.advance(time.Hour)
	alter(5)
	syncWith(t, s)
	if got := capture.lastSeen(t); !got["sg"].Equal(moved) {
		t.Fatalf("moved share group: LastCommit %v, want %v", got["sg"], moved)
	}
}
