package offsetmap

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// compacted builds a map for a source log whose surviving offsets are src,
// copied to consecutive destination offsets from 0.
func compacted(t *testing.T, src []int64) *Map {
	t.Helper()
	var m Map
	for i, s := range src {
		if err := m.Add(s, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	return &m
}

func TestRangesCompressConsecutiveOffsets(t *testing.T) {
	t.Parallel()
	m := compacted(t, []int64{0, 1, 2, 5, 6, 9})
	want := []Range{{0, 0, 3}, {5, 3, 2}, {9, 5, 1}}
	got := m.Ranges()
	if len(got) != len(want) {
		t.Fatalf("ranges = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ranges = %v, want %v", got, want)
		}
	}
	if m.SourceNext() != 10 || m.DestNext() != 6 {
		t.Fatalf("next = %d/%d, want 10/6", m.SourceNext(), m.DestNext())
	}
}

func TestLookupIsExactAndTranslateFindsNextRecord(t *testing.T) {
	t.Parallel()
	m := compacted(t, []int64{0, 1, 2, 5, 6, 9})
	for src, want := range map[int64]int64{0: 0, 2: 2, 5: 3, 6: 4, 9: 5} {
		if got, ok := m.Lookup(src); !ok || got != want {
			t.Errorf("Lookup(%d) = %d,%v want %d", src, got, ok, want)
		}
	}
	for _, gap := range []int64{3, 4, 7, 8, 10, -1} {
		if _, ok := m.Lookup(gap); ok {
			t.Errorf("Lookup(%d) found a record in a gap", gap)
		}
	}
	// committed offset 3 means "next to read is 3": the next record is 5 → dest 3.
	for src, want := range map[int64]int64{0: 0, 3: 3, 4: 3, 6: 4, 7: 5, 9: 5} {
		if got, ok := m.Translate(src); !ok || got != want {
			t.Errorf("Translate(%d) = %d,%v want %d", src, got, ok, want)
		}
	}
	if got, ok := m.Translate(10); ok || got != 6 {
		t.Errorf("Translate(10) = %d,%v want 6,false (end of what is mirrored)", got, ok)
	}
}

func TestAddRejectsOffsetsThatDoNotIncrease(t *testing.T) {
	t.Parallel()
	m := compacted(t, []int64{10, 11})
	if err := m.Add(11, 5); !errors.Is(err, ErrNotIncreasing) {
		t.Fatalf("re-adding source 11: %v", err)
	}
	if err := m.Add(12, 1); !errors.Is(err, ErrNotIncreasing) {
		t.Fatalf("destination going backwards: %v", err)
	}
	if err := m.Add(12, 2); err != nil {
		t.Fatal(err)
	}
}

func TestBinaryRoundTripOfARandomCompactedLog(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var src []int64
	var off int64 = 1000
	for i := 0; i < 5000; i++ {
		off += 1 + int64(r.IntN(3)) // gaps of 0–2 offsets
		src = append(src, off)
	}
	m := compacted(t, src)
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Map
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for i, s := range src {
		if got, ok := back.Lookup(s); !ok || got != int64(i) {
			t.Fatalf("after round trip Lookup(%d) = %d,%v want %d", s, got, ok, i)
		}
	}
	if back.Len() != m.Len() {
		t.Fatalf("round trip changed range count %d → %d", m.Len(), back.Len())
	}
}

func TestUnmarshalRejectsCorruptData(t *testing.T) {
	t.Parallel()
	m := compacted(t, []int64{0, 1, 5})
	b, _ := m.MarshalBinary()
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		var x Map
		if err := x.UnmarshalBinary(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("UnmarshalBinary(%v) = %v, want ErrCorrupt", bad, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	m := Map{}
	_ = m.AddRun(3, 0, 10)
	b, _ := m.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var x Map
		if x.UnmarshalBinary(data) != nil {
			return
		}
		// A decoded map keeps the invariants, and survives a round trip
		// unchanged.
		rs := x.Ranges()
		checkRanges(t, rs)
		out, _ := x.MarshalBinary()
		var y Map
		if err := y.UnmarshalBinary(out); err != nil || !reflect.DeepEqual(y.Ranges(), rs) {
			t.Fatalf("round trip of %v gave %v, %v", rs, y.Ranges(), err)
		}
	})
}

func TestTruncateDestDropsMappingsNotAppended(t *testing.T) {
	t.Parallel()
	m := compacted(t, []int64{0, 1, 2, 5, 6, 9}) // dest 0..5
	m.TruncateDest(4)                            // dest 4 and 5 were never appended
	if m.DestNext() != 4 || m.SourceNext() != 6 {
		t.Fatalf("after TruncateDest(4): next = %d/%d, want source 6, dest 4", m.SourceNext(), m.DestNext())
	}
	if _, ok := m.Lookup(9); ok {
		t.Fatal("source 9 still mapped")
	}
	m.TruncateDest(0)
	if !m.Empty() {
		t.Fatalf("TruncateDest(0) left %v", m.Ranges())
	}
}

func TestSourceOfIsLookupReversed(t *testing.T) {
	t.Parallel()
	var m Map
	for _, r := range []Range{{Source: 0, Dest: 0, Len: 3}, {Source: 5, Dest: 3, Len: 2}, {Source: 9, Dest: 10, Len: 1}} {
		if err := m.AddRun(r.Source, r.Dest, r.Len); err != nil {
			t.Fatal(err)
		}
	}
	for src := int64(0); src < 12; src++ {
		dst, ok := m.Lookup(src)
		if !ok {
			continue
		}
		if got, ok := m.SourceOf(dst); !ok || got != src {
			t.Fatalf("SourceOf(%d) = %d, %v; want %d", dst, got, ok, src)
		}
	}
	for _, dst := range []int64{5, 6, 7, 8, 9, 11, -1} {
		if src, ok := m.SourceOf(dst); ok {
			t.Fatalf("SourceOf(%d) = %d, want nothing mapped there", dst, src)
		}
	}
}

func TestTrimDestKeepsTheLastRangeBelowTheLogStart(t *testing.T) {
	t.Parallel()
	m := compacted(t, []int64{0, 1, 2, 5, 6, 9, 12}) // ranges at destination 0, 3, 5, 6
	if n := m.TrimDest(0); n != 0 {
		t.Fatalf("TrimDest(0) dropped %d ranges", n)
	}
	if n := m.TrimDest(4); n != 1 {
		t.Fatalf("TrimDest(4) dropped %d ranges, want 1 (the range at 0–2; the one at 3–4 is kept)", n)
	}
	if got := m.Ranges()[0]; got != (Range{5, 3, 2}) {
		t.Fatalf("first range %+v, want {5 3 2}", got)
	}
	if d, ok := m.Translate(0); !ok || d != 3 {
		t.Fatalf("Translate(0) = %d,%v after the trim, want 3 (the first record kept)", d, ok)
	}
	// Beyond the end: the last range stays, so the map never empties and
	// SourceNext still says where mirroring continues.
	if n := m.TrimDest(100); n != 2 || m.Len() != 1 || m.SourceNext() != 13 || m.DestNext() != 7 {
		t.Fatalf("TrimDest(100) dropped %d, left %v", n, m.Ranges())
	}
}

// The runner adds mappings while group sync translates: -race checks it.
func TestMapIsSafeForOneWriterAndConcurrentReaders(t *testing.T) {
	t.Parallel()
	var m Map
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); i < 2000; i++ {
			if err := m.Add(2*i, i); err != nil {
				t.Error(err)
				return
			}
			if i%100 == 99 {
				m.TruncateDest(i)
				m.TrimDest(i / 2)
			}
		}
	}()
	for {
		select {
		case <-done:
			if d, ok := m.Translate(3990); !ok || d != 1995 {
				t.Fatalf("Translate(3990) = %d,%v want 1995", d, ok)
			}
			return
		default:
			m.Translate(m.SourceNext() - 1)
			m.Ranges()
		}
	}
}
