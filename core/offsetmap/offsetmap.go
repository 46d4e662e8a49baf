// Package offsetmap owns the exact source→destination offset map of a
// partition that runs in `map` mode (a log that cannot be reproduced offset for
// offset: compaction gaps, a log start beyond the filler budget, a destination
// that already held data).
//
// The map is range-compressed: a run of source offsets s, s+1, … s+n-1 copied
// to d, d+1, … d+n-1 is one Range. Invariants: ranges are sorted, strictly
// increasing in both source and destination offsets, and never overlap; a
// source offset that is not in any range had no record (a compaction gap, or
// an offset before the mirrored range).
//
// A [Journal] keeps a Map durable in a state store at a cost per append that
// does not grow with the map (journal.go).
package offsetmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrNotIncreasing is returned when an offset pair does not come after the
// last one mapped.
var ErrNotIncreasing = errors.New("offset map: offsets must increase")

// ErrCorrupt is returned by UnmarshalBinary for data it cannot decode.
var ErrCorrupt = errors.New("offset map: corrupt encoding")

// Range maps source offsets [Source, Source+Len) to destination offsets
// [Dest, Dest+Len).
type Range struct {
	Source int64 `json:"source"`
	Dest   int64 `json:"dest"`
	Len    int64 `json:"len"`
}

// Map is an exact, range-compressed offset map. The zero value is empty and
// ready to use. A Map is safe for concurrent use: the partition's runner
// changes it while group offset sync reads it.
type Map struct {
	mu     sync.RWMutex
	ranges []Range
	// low is the lowest DestNext the map had since the last mark (a
	// Journal's segment start): TruncateDest lowers it. Mappings at or
	// beyond it are the ones a Journal has not stored yet.
	low int64
}

// Add maps one source offset to one destination offset.
func (m *Map) Add(src, dst int64) error { return m.AddRun(src, dst, 1) }

// AddRun maps n consecutive source offsets from src to n consecutive
// destination offsets from dst. Both must be beyond everything mapped so far.
func (m *Map) AddRun(src, dst, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addRun(src, dst, n)
}

func (m *Map) addRun(src, dst, n int64) error {
	if n <= 0 {
		return nil
	}
	if src < 0 || dst < 0 {
		return fmt.Errorf("%w: negative offset (source %d, destination %d)", ErrNotIncreasing, src, dst)
	}
	if len(m.ranges) > 0 {
		last := &m.ranges[len(m.ranges)-1]
		srcEnd, dstEnd := last.Source+last.Len, last.Dest+last.Len
		if src < srcEnd || dst < dstEnd {
			return fmt.Errorf("%w: source %d → destination %d after source %d → destination %d", ErrNotIncreasing, src, dst, srcEnd-1, dstEnd-1)
		}
		if src == srcEnd && dst == dstEnd {
			last.Len += n
			return nil
		}
	}
	m.ranges = append(m.ranges, Range{Source: src, Dest: dst, Len: n})
	return nil
}

// Ranges returns a copy of the ranges, sorted.
func (m *Map) Ranges() []Range {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]Range(nil), m.ranges...)
}

// Len returns the number of ranges (the map's size, not the records it covers).
func (m *Map) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.ranges)
}

// Empty reports whether nothing is mapped.
func (m *Map) Empty() bool { return m.Len() == 0 }

// SourceNext returns the source offset after the last one mapped (0 when empty).
func (m *Map) SourceNext() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.ranges) == 0 {
		return 0
	}
	l := m.ranges[len(m.ranges)-1]
	return l.Source + l.Len
}

// DestNext returns the destination offset after the last one mapped (0 when empty).
func (m *Map) DestNext() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.destNext()
}

func (m *Map) destNext() int64 {
	if len(m.ranges) == 0 {
		return 0
	}
	l := m.ranges[len(m.ranges)-1]
	return l.Dest + l.Len
}

// Lookup returns the destination offset of the record at source offset src;
// ok is false when src had no record copied (a gap, or outside the map).
func (m *Map) Lookup(src int64) (dst int64, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Source+m.ranges[i].Len > src })
	if i == len(m.ranges) || src < m.ranges[i].Source {
		return 0, false
	}
	r := m.ranges[i]
	return r.Dest + (src - r.Source), true
}

// SourceOf returns the source offset of the record copied to destination
// offset dst; ok is false when nothing mapped lands there (an offset kmirror
// did not write through the map).
func (m *Map) SourceOf(dst int64) (src int64, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Dest+m.ranges[i].Len > dst })
	if i == len(m.ranges) || dst < m.ranges[i].Dest {
		return 0, false
	}
	r := m.ranges[i]
	return r.Source + (dst - r.Dest), true
}

// Translate maps a committed consumer offset ("the next record to read") to
// the destination: the destination offset of the first mirrored record at or
// after src. When src is beyond everything mapped, it returns DestNext and
// false: the caller must not commit beyond what has been mirrored, and
// translates again later.
func (m *Map) Translate(src int64) (dst int64, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Source+m.ranges[i].Len > src })
	if i == len(m.ranges) {
		return m.destNext(), false
	}
	r := m.ranges[i]
	if src <= r.Source {
		return r.Dest, true
	}
	return r.Dest + (src - r.Source), true
}

// MarshalBinary encodes the map compactly: a version byte, the range count,
// then each range as varint deltas from the end of the previous one.
func (m *Map) MarshalBinary() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	buf := make([]byte, 0, 2+len(m.ranges)*6)
	buf = append(buf, 1)
	return appendRanges(buf, m.ranges), nil
}

// appendRanges encodes rs after buf: the count, then each range as varint
// deltas from the end of the previous one (from 0 for the first).
func appendRanges(buf []byte, rs []Range) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(rs)))
	var srcEnd, dstEnd int64
	for _, r := range rs {
		buf = appendRange(buf, r, srcEnd, dstEnd)
		srcEnd, dstEnd = r.Source+r.Len, r.Dest+r.Len
	}
	return buf
}

// appendRange encodes r as deltas from the end of the previous range.
func appendRange(buf []byte, r Range, srcEnd, dstEnd int64) []byte {
	buf = binary.AppendUvarint(buf, uint64(r.Source-srcEnd))
	buf = binary.AppendUvarint(buf, uint64(r.Dest-dstEnd))
	return binary.AppendUvarint(buf, uint64(r.Len))
}

// UnmarshalBinary decodes what MarshalBinary produced, replacing m's content.
func (m *Map) UnmarshalBinary(data []byte) error {
	if len(data) == 0 || data[0] != 1 {
		return fmt.Errorf("%w: unknown version", ErrCorrupt)
	}
	d := decoder{data[1:]}
	rs, err := d.ranges()
	if err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ranges, m.low = rs, 0
	return nil
}

// decoder reads the varints of the encodings.
type decoder struct{ data []byte }

func (d *decoder) uvarint() (int64, error) {
	v, n := binary.Uvarint(d.data)
	if n <= 0 || v > 1<<62 {
		return 0, ErrCorrupt
	}
	d.data = d.data[n:]
	return int64(v), nil
}

// ranges decodes what appendRanges encoded; the ranges it returns keep the
// Map invariants (non-empty, increasing, not overlapping).
func (d *decoder) ranges() ([]Range, error) {
	count, err := d.uvarint()
	if err != nil {
		return nil, fmt.Errorf("%w: range count", ErrCorrupt)
	}
	if count > int64(len(d.data)) { // every range takes at least 3 bytes
		return nil, fmt.Errorf("%w: %d ranges in %d bytes", ErrCorrupt, count, len(d.data))
	}
	out := make([]Range, 0, count)
	var srcEnd, dstEnd int64
	for i := int64(0); i < count; i++ {
		ds, err1 := d.uvarint()
		dd, err2 := d.uvarint()
		n, err3 := d.uvarint()
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%w: range %d", ErrCorrupt, i)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: empty range %d", ErrCorrupt, i)
		}
		out = append(out, Range{Source: srcEnd + ds, Dest: dstEnd + dd, Len: n})
		srcEnd, dstEnd = srcEnd+ds+n, dstEnd+dd+n
		if srcEnd < 0 || dstEnd < 0 {
			return nil, fmt.Errorf("%w: overflow in range %d", ErrCorrupt, i)
		}
	}
	return out, nil
}

func (d *decoder) end() error {
	if len(d.data) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.data))
	}
	return nil
}

// TruncateDest drops every mapping whose destination offset is at or beyond
// destEnd. The runner writes a batch's mappings before appending the batch
// (write-ahead); after a crash, the destination's end offset says which of
// them were appended, and the rest are dropped with TruncateDest.
func (m *Map) TruncateDest(destEnd int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer func() { m.low = min(m.low, m.destNext()) }()
	for len(m.ranges) > 0 {
		last := &m.ranges[len(m.ranges)-1]
		switch {
		case last.Dest >= destEnd:
			m.ranges = m.ranges[:len(m.ranges)-1]
		case last.Dest+last.Len > destEnd:
			last.Len = destEnd - last.Dest
			return
		default:
			return
		}
	}
}

// TrimDest drops the mappings of destination offsets below logStart, the
// destination's log start offset: those records are deleted there, and no
// consumer can be positioned on them. It keeps the last range that starts
// below logStart, so that every question about offsets from logStart on
// (Lookup, Translate, and SourceNext after a TruncateDest at or beyond
// logStart) gets the same answer as before, and a map is never emptied. It
// returns the number of ranges dropped.
func (m *Map) TrimDest(logStart int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	// k: the first range starting at or beyond logStart; keep from k-1.
	k := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Dest >= logStart })
	drop := k - 1
	if drop <= 0 {
		return 0
	}
	// Copy, so that the dropped ranges' memory is released.
	m.ranges = append(make([]Range, 0, len(m.ranges)-drop), m.ranges[drop:]...)
	return drop
}

// mark starts a new Journal segment: mappings added from now on, and those
// a TruncateDest cuts below the current end, are what the segment stores.
func (m *Map) mark() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.low = m.destNext()
}

// appendUnsaved encodes after buf the lowest destination end since the
// last mark, then the ranges at or beyond it (a range across it cut
// there): applied after TruncateDest(low) to the map as it was at the mark,
// they give the map as it is now (up to ranges TrimDest dropped). It
// returns the number of ranges encoded.
func (m *Map) appendUnsaved(buf []byte) ([]byte, int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	low := min(m.low, m.destNext())
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Dest+m.ranges[i].Len > low })
	buf = binary.AppendUvarint(buf, uint64(low))
	rs := m.ranges[i:]
	if len(rs) == 0 || rs[0].Dest >= low {
		return appendRanges(buf, rs), len(rs)
	}
	// The first range crosses low: encode its part from low, then the rest
	// after it (appendRanges' deltas continue from its end either way).
	cut := low - rs[0].Dest
	first := Range{Source: rs[0].Source + cut, Dest: low, Len: rs[0].Len - cut}
	buf = binary.AppendUvarint(buf, uint64(len(rs)))
	buf = appendRange(buf, first, 0, 0)
	srcEnd, dstEnd := first.Source+first.Len, first.Dest+first.Len
	for _, r := range rs[1:] {
		buf = appendRange(buf, r, srcEnd, dstEnd)
		srcEnd, dstEnd = r.Source+r.Len, r.Dest+r.Len
	}
	return buf, len(rs)
}
