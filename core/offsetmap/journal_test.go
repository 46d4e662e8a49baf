package offsetmap

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// countingStore records the Puts and Deletes made through it.
type countingStore struct {
	statestore.Store
	mu      sync.Mutex
	puts    map[string]int
	bytes   int
	deletes int
}

func newCountingStore() *countingStore {
	return &countingStore{Store: memstore.New(), puts: map[string]int{}}
}

func (s *countingStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s.mu.Lock()
	s.puts[key]++
	s.bytes += len(value)
	s.mu.Unlock()
	return s.Store.Put(ctx, key, value, expect)
}

func (s *countingStore) Delete(ctx context.Context, key string, expect int64) error {
	s.mu.Lock()
	s.deletes++
	s.mu.Unlock()
	return s.Store.Delete(ctx, key, expect)
}

func (s *countingStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts, s.bytes, s.deletes = map[string]int{}, 0, 0
}

func (s *countingStore) segments(t *testing.T) []string {
	t.Helper()
	es, err := s.List(context.Background(), statestore.OffsetMapSegmentsPrefix("m", "t", 0))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range es {
		keys = append(keys, e.Key)
	}
	return keys
}

// gappy appends n ranges to m, each one record after a gap of one source
// offset (a compacted log), and returns the batch's mappings count.
func gappy(t testing.TB, m *Map, n int) {
	t.Helper()
	for range n {
		if err := m.Add(m.SourceNext()+1, m.DestNext()); err != nil {
			t.Fatal(err)
		}
	}
}

func load(t *testing.T, store statestore.Store) *Map {
	t.Helper()
	m, err := Load(context.Background(), store, "m", "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameRanges(t *testing.T, what string, got, want *Map) {
	t.Helper()
	if g, w := got.Ranges(), want.Ranges(); !slices.Equal(g, w) {
		t.Fatalf("%s: %d ranges %v..., want %d ranges %v...", what, len(g), g[:min(len(g), 4)], len(w), w[:min(len(w), 4)])
	}
}

// An append writes the open segment only, never the map's snapshot: its
// bytes do not grow with the map.
func TestJournalAppendWritesTheOpenSegmentOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newCountingStore()
	j := NewJournal(store, "m", "t", 0, JournalOptions{})
	m := &Map{}
	gappy(t, m, 100_000)
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	snapBytes := store.bytes
	store.reset()
	for range 10 {
		gappy(t, m, 3)
		if err := j.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.puts[statestore.OffsetMapKey("m", "t", 0)]; n != 0 {
		t.Fatalf("%d appends rewrote the snapshot %d times", 10, n)
	}
	if store.bytes > 2000 {
		t.Fatalf("10 appends of 3 ranges wrote %d bytes (the snapshot is %d bytes)", store.bytes, snapBytes)
	}
	sameRanges(t, "reloaded", load(t, store), m)
}

// Write-ahead: a mapping appended to the journal is in the store before the
// batch it maps is appended; after a crash in between, the reloaded map has
// it, and the resume's TruncateDest (the batch never reached the
// destination) is stored with the next append.
func TestJournalCrashBetweenSaveAndAppendKeepsTheMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	j := NewJournal(store, "m", "t", 0, JournalOptions{})
	m := &Map{}
	if err := m.AddRun(100, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The batch at source 115–119 goes to destination 10–14: saved, then
	// the daemon dies before the append.
	if err := m.AddRun(115, 10, 5); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ctx, m); err != nil {
		t.Fatal(err)
	}

	j2 := NewJournal(store, "m", "t", 0, JournalOptions{})
	back, err := j2.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := back.Lookup(117); !ok || d != 12 {
		t.Fatalf("after the crash source 117 maps to %d (found %v), want 12: the mapping written ahead is lost", d, ok)
	}
	// Resume: the destination ends at 10, so the batch is not there.
	back.TruncateDest(10)
	if back.DestNext() != 10 || back.SourceNext() != 110 {
		t.Fatalf("after TruncateDest(10): next %d/%d, want source 110, destination 10", back.SourceNext(), back.DestNext())
	}
	// The source was compacted meanwhile: the batch is now 118–119.
	if err := back.AddRun(118, 10, 2); err != nil {
		t.Fatal(err)
	}
	if err := j2.Append(ctx, back); err != nil {
		t.Fatal(err)
	}
	again := load(t, store)
	sameRanges(t, "reloaded after the resume", again, back)
	if _, ok := again.Lookup(115); ok {
		t.Fatal("source 115 still mapped after the resume truncated it")
	}
}

// Segments are folded into a new snapshot once they hold half as many
// ranges as it (at least MinCompactRanges), and the stale ones are deleted:
// the keys in the store stay bounded, and the map reloads the same.
func TestJournalCompactionFoldsSegmentsIntoTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newCountingStore()
	opts := JournalOptions{SegmentRanges: 8, MinCompactRanges: 64}
	j := NewJournal(store, "m", "t", 0, opts)
	m := &Map{}
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	snapKey := statestore.OffsetMapKey("m", "t", 0)
	maxSegs := 0
	for i := range 2000 {
		gappy(t, m, 1+i%3)
		if err := j.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
		maxSegs = max(maxSegs, len(store.segments(t)))
	}
	if store.puts[snapKey] < 3 {
		t.Fatalf("the snapshot was written %d times over 2000 appends (4000 ranges), want compactions", store.puts[snapKey])
	}
	// Geometric compaction: far fewer snapshots than appends.
	if store.puts[snapKey] > 40 {
		t.Fatalf("the snapshot was written %d times over 2000 appends: compaction is not amortised", store.puts[snapKey])
	}
	// Half the snapshot (~2000 ranges) in segments of 8: about 250.
	if maxSegs > 300 {
		t.Fatalf("up to %d segments in the store", maxSegs)
	}
	if store.deletes == 0 {
		t.Fatal("no stale segment was deleted")
	}
	sameRanges(t, "reloaded", load(t, store), m)
}

// A compaction drops the mappings below the destination log start (asked
// through LogStart); offsets from the log start on translate as before.
func TestJournalCompactionTrimsBelowTheDestinationLogStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	logStart := int64(-1)
	opts := JournalOptions{SegmentRanges: 4, MinCompactRanges: 16, LogStart: func(context.Context) (int64, bool) { return logStart, logStart >= 0 }}
	j := NewJournal(store, "m", "t", 0, opts)
	m := &Map{}
	gappy(t, m, 100) // source 1,3,5,...,199 → destination 0..99
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	before := &Map{}
	before.ranges = m.Ranges()
	logStart = 60
	for m.Len() <= 100+50 {
		gappy(t, m, 1)
		if err := j.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// Compacted at least once (50 ≥ 100/2): trimmed in memory and in store.
	if first := m.Ranges()[0]; first.Dest != 59 {
		t.Fatalf("first range after the trim %+v, want the one at destination 59 (the last one starting below the log start 60)", first)
	}
	back := load(t, store)
	if got := back.Ranges()[0]; got.Dest > 59 {
		t.Fatalf("the stored map starts at destination %d: mappings from the log start on were dropped", got.Dest)
	}
	if back.Len() > m.Len() {
		t.Fatalf("the stored map holds %d ranges, the trimmed one %d: the trim was not stored", back.Len(), m.Len())
	}
	for src := int64(119); src < 200; src++ {
		b1, ok1 := before.Translate(src)
		b2, ok2 := back.Translate(src)
		if b1 != b2 || ok1 != ok2 {
			t.Fatalf("Translate(%d) = %d,%v after the trim, %d,%v before", src, b2, ok2, b1, ok1)
		}
	}
	if _, ok := back.Lookup(1); ok {
		t.Fatal("source 1 (destination 0, below the log start) is still mapped")
	}
}

// A map stored by kmirror before journals (one MarshalBinary value under
// OffsetMapKey) loads, and the first append replaces it with a snapshot
// that segments follow; segments that a newer kmirror left next to an old
// value (a downgrade) are stale, never applied.
func TestJournalLoadsTheFormatBeforeJournals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	old := &Map{}
	gappy(t, old, 1000)
	b, err := old.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, statestore.OffsetMapKey("m", "t", 0), b, statestore.Absent); err != nil {
		t.Fatal(err)
	}
	// A segment of a newer kmirror, written before a downgrade rewrote the
	// map in the old format: it must not be applied.
	strayKey := statestore.OffsetMapSegmentKey("m", "t", 0, 7)
	if _, err := store.Put(ctx, strayKey, []byte{segmentV1, 7, 0, 0, 1, 0, 0, 1}, statestore.Absent); err != nil {
		t.Fatal(err)
	}
	j := NewJournal(store, "m", "t", 0, JournalOptions{})
	m, err := j.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameRanges(t, "the old format", m, old)
	gappy(t, m, 2)
	if err := j.Append(ctx, m); err != nil {
		t.Fatal(err)
	}
	e, err := store.Get(ctx, statestore.OffsetMapKey("m", "t", 0))
	if err != nil {
		t.Fatal(err)
	}
	if e.Value[0] != snapshotV2 {
		t.Fatalf("snapshot format %d after the first append, want %d", e.Value[0], snapshotV2)
	}
	if _, err := store.Get(ctx, strayKey); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("the stale segment is still there: %v", err)
	}
	gappy(t, m, 2)
	if err := j.Append(ctx, m); err != nil {
		t.Fatal(err)
	}
	sameRanges(t, "reloaded", load(t, store), m)
}

// A live segment missing between others means lost mappings: Load fails
// with ErrCorrupt rather than returning a map with a hole.
func TestJournalMissingSegmentIsCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	j := NewJournal(store, "m", "t", 0, JournalOptions{SegmentRanges: 2, MinCompactRanges: 1000})
	m := &Map{}
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		gappy(t, m, 2)
		if err := j.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := store.List(ctx, statestore.OffsetMapSegmentsPrefix("m", "t", 0))
	if err != nil || len(segs) != 3 {
		t.Fatalf("segments %v, %v; want 3", segs, err)
	}
	if err := store.Delete(ctx, segs[1].Key, statestore.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, store, "m", "t", 0); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Load with a segment missing: %v, want ErrCorrupt", err)
	}
}

// A journal that did not load the map (a new map) writes a snapshot after
// every segment already in the store, so that none of them is applied to it.
func TestJournalRewriteOfANewMapMakesOldSegmentsStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	j := NewJournal(store, "m", "t", 0, JournalOptions{SegmentRanges: 2})
	m := &Map{}
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		gappy(t, m, 2)
		if err := j.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	fresh := &Map{}
	if err := fresh.AddRun(0, 0, 3); err != nil {
		t.Fatal(err)
	}
	j2 := NewJournal(store, "m", "t", 0, JournalOptions{})
	if err := j2.Rewrite(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	sameRanges(t, "reloaded", load(t, store), fresh)
	// The stale segments go a few per write, never applied meanwhile.
	for range 3 {
		gappy(t, fresh, 1)
		if err := j2.Append(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		sameRanges(t, "reloaded", load(t, store), fresh)
	}
	segs, err := store.List(ctx, statestore.OffsetMapSegmentsPrefix("m", "t", 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || !strings.HasSuffix(segs[0].Key, "05") {
		var keys []string
		for _, s := range segs {
			keys = append(keys, s.Key)
		}
		t.Fatalf("segments %v after the stale ones were deleted, want the new one only (number 5)", keys)
	}
}

// Random appends, truncations (resumes), trims and crashes (a new journal
// loading the store): whatever happens, the map reloaded from the store is
// the map in memory at its last write, up to the ranges a trim dropped.
func TestJournalSurvivesRandomOperationsAndCrashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 7))
		store := memstore.New()
		logStart := int64(0)
		opts := JournalOptions{SegmentRanges: 1 + r.IntN(6), MinCompactRanges: 1 + r.IntN(40),
			LogStart: func(context.Context) (int64, bool) { return logStart, true }}
		j := NewJournal(store, "m", "t", 0, opts)
		m := &Map{}
		var saved []Range // m at its last write
		write := func(f func(context.Context, *Map) error) {
			t.Helper()
			if err := f(ctx, m); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			saved = m.Ranges()
		}
		trimmed := func(rs []Range) *Map {
			x := &Map{ranges: slices.Clone(rs)}
			x.TrimDest(logStart)
			return x
		}
		write(j.Rewrite)
		for step := range 500 {
			switch op := r.IntN(10); {
			case op < 6: // a batch: mappings with gaps, then the append
				for range 1 + r.IntN(4) {
					if err := m.AddRun(m.SourceNext()+int64(r.IntN(3)), m.DestNext()+int64(r.IntN(2)), 1+int64(r.IntN(3))); err != nil {
						t.Fatal(err)
					}
				}
				write(j.Append)
			case op < 8: // crash and resume: reload, cut what was not appended
				j = NewJournal(store, "m", "t", 0, opts)
				back, err := j.Load(ctx)
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				sameRanges(t, "reloaded", trimmed(back.Ranges()), trimmed(saved))
				m = back
				if end := m.DestNext(); end > logStart {
					m.TruncateDest(max(logStart, end-int64(r.IntN(6))))
				}
			case op < 9: // the destination log start moves
				logStart = max(logStart, m.DestNext()-int64(r.IntN(20)))
			default: // a rare full rewrite
				write(j.Rewrite)
			}
		}
		sameRanges(t, "reloaded at the end", trimmed(load(t, store).Ranges()), trimmed(saved))
	}
}

// failingDeletes refuses every Delete.
type failingDeletes struct{ statestore.Store }

func (failingDeletes) Delete(context.Context, string, int64) error {
	return errors.New("injected delete failure")
}

// Deleting stale segments is best effort: a store that refuses deletes does
// not fail the write ahead of a batch; the journal warns and tries again.
func TestJournalAppendSucceedsWhenStaleSegmentsCannotBeDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := failingDeletes{memstore.New()}
	var warned int
	opts := JournalOptions{SegmentRanges: 2, MinCompactRanges: 4, Warn: func(string, ...any) { warned++ }}
	j := NewJournal(store, "m", "t", 0, opts)
	m := &Map{}
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		gappy(t, m, 2)
		if err := j.Append(ctx, m); err != nil {
			t.Fatalf("append with a store that refuses deletes: %v", err)
		}
	}
	if warned == 0 {
		t.Fatal("no warning about the stale segments left behind")
	}
	sameRanges(t, "reloaded", load(t, store), m)
}

// A journal's Rewrite does not trust what it knows of the store: segments
// another journal appended since (the partition ran elsewhere meanwhile)
// are stale after it too.
func TestJournalRewriteListsSegmentsWrittenByAnotherJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	opts := JournalOptions{SegmentRanges: 2}
	j := NewJournal(store, "m", "t", 0, opts)
	m := &Map{}
	if err := j.Rewrite(ctx, m); err != nil {
		t.Fatal(err)
	}
	gappy(t, m, 2)
	if err := j.Append(ctx, m); err != nil {
		t.Fatal(err)
	}
	other := NewJournal(store, "m", "t", 0, opts)
	om, err := other.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		gappy(t, om, 2)
		if err := other.Append(ctx, om); err != nil {
			t.Fatal(err)
		}
	}
	fresh := &Map{}
	if err := fresh.AddRun(7, 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := j.Rewrite(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	sameRanges(t, "reloaded", load(t, store), fresh)
}
