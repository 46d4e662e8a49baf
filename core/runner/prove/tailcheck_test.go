package prove

import (
	"context"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/offsetmap"
)

// sliceReader serves batches from a slice, from the batch holding an
// offset on, as verify.Reader does from a broker.
type sliceReader struct{ bs []batch.Batch }

func (s *sliceReader) Next(context.Context) (batch.Batch, bool, error) {
	if len(s.bs) == 0 {
		return nil, false, nil
	}
	b := s.bs[0]
	s.bs = s.bs[1:]
	return b, true, nil
}

func readerFrom(bs []batch.Batch, from int64) *sliceReader {
	for i, b := range bs {
		if b.NextOffset() > from {
			return &sliceReader{bs: bs[i:]}
		}
	}
	return &sliceReader{}
}

// lb builds logs batch by batch for the comparison tests.
type lb struct {
	t  *testing.T
	bs []batch.Batch
}

type rec struct {
	off int64
	val string
}

func (l *lb) data(pid int64, txn bool, recs ...rec) *lb {
	l.t.Helper()
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{Offset: r.off, Timestamp: 1000 + int64(len(r.val)), Key: []byte("k"), Value: []byte(r.val)}
	}
	b, err := batch.Encode(batch.EncodeOptions{BaseOffset: recs[0].off, ProducerID: pid, Transactional: txn, Compression: batch.CompressionGzip}, rs)
	if err != nil {
		l.t.Fatal(err)
	}
	l.bs = append(l.bs, b)
	return l
}

func (l *lb) marker(pid, off int64, t batch.ControlType) *lb {
	l.t.Helper()
	b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: off, ProducerID: pid, Transactional: true}, t, 0, 5000)
	if err != nil {
		l.t.Fatal(err)
	}
	l.bs = append(l.bs, b)
	return l
}

// restamped returns b as kmirror's writer leaves it: another producer id.
func restamped(bs []batch.Batch, pid int64) []batch.Batch {
	out := make([]batch.Batch, len(bs))
	for i, b := range bs {
		c := append(batch.Batch(nil), b...)
		c.Restamp(pid, 0, 0)
		out[i] = c
	}
	return out
}

func checkPreserve(t *testing.T, src, dst []batch.Batch, srcStart, from int64) *Difference {
	t.Helper()
	srcEnd := int64(0)
	if len(src) > 0 {
		srcEnd = src[len(src)-1].NextOffset()
	}
	c := newTailChecker(func(d int64) (int64, bool) { return d, true }, true,
		func(off int64) BatchReader { return readerFrom(src, off) }, srcStart, srcEnd)
	diff, err := c.check(t.Context(), readerFrom(dst, from))
	if err != nil {
		t.Fatal(err)
	}
	return diff
}

func TestTailCheckPreserveMode(t *testing.T) {
	newLog := func() *lb { return &lb{t: t} }
	cases := []struct {
		name     string
		src, dst func() []batch.Batch
		from     int64
		srcStart int64
		wantAt   int64 // -1: no difference
		unsure   bool
		what     string
	}{
		{
			name: "a forwarded copy",
			src: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "a"}, rec{1, "b"}).data(4, true, rec{2, "t"}).marker(4, 3, batch.ControlCommit).bs
			},
			dst: func() []batch.Batch {
				return restamped(newLog().data(3, false, rec{0, "a"}, rec{1, "b"}).data(4, true, rec{2, "t"}).marker(4, 3, batch.ControlCommit).bs, 90)
			},
			wantAt: -1,
		},
		{
			name: "a foreign record beyond the source's end",
			src:  func() []batch.Batch { return newLog().data(3, false, rec{0, "a"}).bs },
			dst: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "a"}).data(66, false, rec{1, "foreign"}).bs
			},
			wantAt: 1, what: "the source ends at offset 1",
		},
		{
			name: "a foreign record where the source has another",
			src: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "a"}).data(3, false, rec{1, "b"}).data(3, false, rec{2, "c"}).bs
			},
			dst: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "a"}).data(66, false, rec{1, "foreign"}).bs
			},
			wantAt: 1, what: "differs from the source",
		},
		{
			// Source 0 committed, 1 open-1, 2 open-2, 3 COMMIT, 4 after; the
			// destination had 0 and 1 when a stop aborted the transaction.
			name: "a stop's ABORT where the source went on and committed",
			src: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "committed"}).data(4, true, rec{1, "open-1"}).data(4, true, rec{2, "open-2"}).
					marker(4, 3, batch.ControlCommit).data(3, false, rec{4, "after"}).bs
			},
			dst: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "committed"}).data(90, true, rec{1, "open-1"}).marker(90, 2, batch.ControlAbort).bs
			},
			wantAt: 1, what: "aborted a replayed transaction",
		},
		{
			name:   "an ABORT where the source has a COMMIT at the same offset",
			src:    func() []batch.Batch { return newLog().data(4, true, rec{0, "t"}).marker(4, 1, batch.ControlCommit).bs },
			dst:    func() []batch.Batch { return newLog().data(90, true, rec{0, "t"}).marker(90, 1, batch.ControlAbort).bs },
			wantAt: 0, what: "aborted a replayed transaction",
		},
		{
			name:   "an ABORT where the source aborted too",
			src:    func() []batch.Batch { return newLog().data(4, true, rec{0, "t"}).marker(4, 1, batch.ControlAbort).bs },
			dst:    func() []batch.Batch { return newLog().data(90, true, rec{0, "t"}).marker(90, 1, batch.ControlAbort).bs },
			wantAt: -1,
		},
		{
			name: "a later marker moves the difference back to its transaction's start",
			src: func() []batch.Batch {
				return newLog().data(4, true, rec{0, "t"}).data(3, false, rec{1, "p"}).data(3, false, rec{2, "q"}).marker(4, 3, batch.ControlCommit).bs
			},
			dst: func() []batch.Batch {
				return newLog().data(90, true, rec{0, "t"}).data(3, false, rec{1, "p"}).data(66, false, rec{2, "foreign"}).marker(90, 3, batch.ControlAbort).bs
			},
			wantAt: 0, what: "differs from the source",
		},
		{
			name: "a marker whose transaction began before the stretch",
			src: func() []batch.Batch {
				return newLog().data(4, true, rec{0, "t"}).data(3, false, rec{1, "p"}).marker(4, 2, batch.ControlCommit).bs
			},
			dst: func() []batch.Batch {
				return newLog().data(90, true, rec{0, "t"}).data(3, false, rec{1, "p"}).marker(90, 2, batch.ControlAbort).bs
			},
			from:   1,
			wantAt: 2, unsure: true,
		},
		{
			name:   "the stretch's first batch differs",
			src:    func() []batch.Batch { return newLog().data(3, false, rec{0, "a"}).data(3, false, rec{1, "b"}).bs },
			dst:    func() []batch.Batch { return newLog().data(3, false, rec{0, "a"}).data(66, false, rec{1, "x"}).bs },
			from:   1,
			wantAt: 1, unsure: true,
		},
		{
			name: "records the source deleted are passed over",
			src:  func() []batch.Batch { return newLog().data(3, false, rec{2, "c"}).bs },
			dst: func() []batch.Batch {
				return newLog().data(3, false, rec{0, "gone"}, rec{1, "gone"}).data(3, false, rec{2, "c"}).bs
			},
			srcStart: 2,
			wantAt:   -1,
		},
		{
			name:   "a record compaction removed on the source is passed over",
			src:    func() []batch.Batch { return newLog().data(3, false, rec{0, "a"}, rec{2, "c"}).bs },
			dst:    func() []batch.Batch { return newLog().data(3, false, rec{0, "a"}, rec{1, "b"}, rec{2, "c"}).bs },
			wantAt: -1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diff := checkPreserve(t, tc.src(), tc.dst(), tc.srcStart, tc.from)
			if tc.wantAt < 0 {
				if diff != nil {
					t.Fatalf("difference %+v, want none", diff)
				}
				return
			}
			if diff == nil {
				t.Fatalf("no difference found, want one from offset %d", tc.wantAt)
			}
			if diff.At != tc.wantAt || diff.Unsure != tc.unsure || !strings.Contains(diff.What, tc.what) {
				t.Fatalf("difference %+v, want from %d (unsure %v) saying %q", diff, tc.wantAt, tc.unsure, tc.what)
			}
		})
	}
}

func TestTailCheckMapMode(t *testing.T) {
	// Source 0 a, 1 (compacted away), 2 c, 3 d; destination 0 a, 1 c, 2 d
	// (re-encoded), then the tail varies.
	src := (&lb{t: t}).data(3, false, rec{0, "a"}, rec{2, "c"}).data(3, false, rec{3, "d"}).bs
	var m offsetmap.Map
	for _, p := range [][2]int64{{0, 0}, {2, 1}, {3, 2}} {
		if err := m.Add(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	check := func(dst []batch.Batch, passOver func(int64) bool) *Difference {
		t.Helper()
		c := newTailChecker(m.SourceOf, false, func(off int64) BatchReader { return readerFrom(src, off) }, 0, 4)
		c.passOver = passOver
		diff, err := c.check(t.Context(), readerFrom(dst, 0))
		if err != nil {
			t.Fatal(err)
		}
		return diff
	}
	base := func() *lb { return (&lb{t: t}).data(90, false, rec{0, "a"}, rec{1, "c"}).data(90, false, rec{2, "d"}) }
	if diff := check(base().bs, nil); diff != nil {
		t.Fatalf("a mapped copy: difference %+v", diff)
	}
	if diff := check(base().data(66, false, rec{3, "foreign"}).bs, nil); diff == nil || diff.At != 3 || !strings.Contains(diff.What, "not in the offset map") {
		t.Fatalf("an unmapped record after the map: difference %+v, want one at 3", diff)
	}
	wrong := (&lb{t: t}).data(90, false, rec{0, "a"}, rec{1, "X"}).bs
	if diff := check(wrong, nil); diff == nil || diff.At != 0 || !strings.Contains(diff.What, "source offset 2") {
		t.Fatalf("a mapped record that differs: difference %+v, want one naming source offset 2", diff)
	}
	// An aborted first copy kmirror left unmapped between mapped ranges.
	if diff := check(base().data(66, false, rec{3, "old copy"}).bs, func(d int64) bool { return d == 3 }); diff != nil {
		t.Fatalf("a hole passed over: difference %+v", diff)
	}
}
