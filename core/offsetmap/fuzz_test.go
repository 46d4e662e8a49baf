package offsetmap

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// checkRanges fails t unless rs keep the Map invariants: non-empty,
// non-negative, increasing and not overlapping on both sides.
func checkRanges(t *testing.T, rs []Range) {
	t.Helper()
	for i, r := range rs {
		if r.Len <= 0 || r.Source < 0 || r.Dest < 0 {
			t.Fatalf("range %d %+v of %v", i, r, rs)
		}
		if i > 0 && (r.Source < rs[i-1].Source+rs[i-1].Len || r.Dest < rs[i-1].Dest+rs[i-1].Len) {
			t.Fatalf("ranges %d and %d overlap or go back: %v", i-1, i, rs)
		}
	}
}

// journalValues runs a journal through appends (with small segments) and a
// truncation, and returns what it stored: the snapshot and the segments in
// order.
func journalValues(f *testing.F) (snap []byte, segs [][]byte) {
	ctx := context.Background()
	store := memstore.New()
	j := NewJournal(store, "m", "t", 0, JournalOptions{SegmentRanges: 2, MinCompactRanges: 64})
	m := &Map{}
	for i, src := range []int64{0, 1, 2, 5, 9, 10, 20, 30, 31} {
		if err := m.Add(src, int64(i)); err != nil {
			f.Fatal(err)
		}
		if err := j.Append(ctx, m); err != nil {
			f.Fatal(err)
		}
		if i == 5 {
			m.TruncateDest(4)
		}
	}
	ents, err := store.List(ctx, "mirrors/")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		if e.Key == statestore.OffsetMapKey("m", "t", 0) {
			snap = e.Value
		} else {
			segs = append(segs, e.Value)
		}
	}
	return snap, segs
}

// FuzzJournal stores an arbitrary snapshot and two arbitrary segments (at
// arbitrary numbers) of one partition's offset map and loads it. Load never
// panics; it fails with ErrCorrupt naming the map's key, or returns a map
// that keeps the invariants, that stores again (Rewrite, then Append) and
// loads back the same.
func FuzzJournal(f *testing.F) {
	snap, segs := journalValues(f)
	for len(segs) < 2 {
		segs = append(segs, nil)
	}
	var legacy Map
	_ = legacy.AddRun(3, 0, 10)
	v1, _ := legacy.MarshalBinary()
	f.Add(snap, segs[0], segs[1], uint8(0), uint8(1))
	f.Add(snap, segs[len(segs)-2], segs[len(segs)-1], uint8(len(segs)-2), uint8(len(segs)-1))
	f.Add(v1, []byte(nil), []byte(nil), uint8(0), uint8(0))
	f.Add(v1, segs[0], segs[1], uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, snap, seg1, seg2 []byte, n1, n2 uint8) {
		ctx := context.Background()
		store := memstore.New()
		key := statestore.OffsetMapKey("m", "t", 0)
		put := func(k string, v []byte) {
			if v == nil {
				return
			}
			if _, err := store.Put(ctx, k, v, statestore.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		put(key, snap)
		put(statestore.OffsetMapSegmentKey("m", "t", 0, int64(n1)), seg1)
		put(statestore.OffsetMapSegmentKey("m", "t", 0, int64(n2)), seg2)
		m, err := Load(ctx, store, "m", "t", 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
				t.Fatalf("error %v: want ErrCorrupt naming %s", err, key)
			}
			return
		}
		rs := m.Ranges()
		checkRanges(t, rs)
		j := NewJournal(store, "m", "t", 0, JournalOptions{SegmentRanges: 2})
		if err := j.Rewrite(ctx, m); err != nil {
			t.Fatal(err)
		}
		if src, dst := m.SourceNext(), m.DestNext(); src < 1<<61 && dst < 1<<61 {
			if err := m.AddRun(src+1, dst, 2); err != nil {
				t.Fatal(err)
			}
			if err := j.Append(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		back, err := Load(ctx, store, "m", "t", 0)
		if err != nil {
			t.Fatalf("loading what was stored again: %v", err)
		}
		if got, want := back.Ranges(), m.Ranges(); !reflect.DeepEqual(got, want) {
			t.Fatalf("stored %v, loaded %v", want, got)
		}
	})
}
