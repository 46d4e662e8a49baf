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
package offsetmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
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
// ready to use. A Map is not safe for concurrent use.
type Map struct {
	ranges []Range
}

// Add maps one source offset to one destination offset.
func (m *Map) Add(src, dst int64) error { return m.AddRun(src, dst, 1) }

// AddRun maps n consecutive source offsets from src to n consecutive
// destination offsets from dst. Both must be beyond everything mapped so far.
func (m *Map) AddRun(src, dst, n int64) error {
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
func (m *Map) Ranges() []Range { return append([]Range(nil), m.ranges...) }

// Len returns the number of ranges (the map's size, not the records it covers).
func (m *Map) Len() int { return len(m.ranges) }

// Empty reports whether nothing is mapped.
func (m *Map) Empty() bool { return len(m.ranges) == 0 }

// SourceNext returns the source offset after the last one mapped (0 when empty).
func (m *Map) SourceNext() int64 {
	if len(m.ranges) == 0 {
		return 0
	}
	l := m.ranges[len(m.ranges)-1]
	return l.Source + l.Len
}

// DestNext returns the destination offset after the last one mapped (0 when empty).
func (m *Map) DestNext() int64 {
	if len(m.ranges) == 0 {
		return 0
	}
	l := m.ranges[len(m.ranges)-1]
	return l.Dest + l.Len
}

// Lookup returns the destination offset of the record at source offset src;
// ok is false when src had no record copied (a gap, or outside the map).
func (m *Map) Lookup(src int64) (dst int64, ok bool) {
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
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Source+m.ranges[i].Len > src })
	if i == len(m.ranges) {
		return m.DestNext(), false
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
	buf := make([]byte, 0, 2+len(m.ranges)*6)
	buf = append(buf, 1)
	buf = binary.AppendUvarint(buf, uint64(len(m.ranges)))
	var srcEnd, dstEnd int64
	for _, r := range m.ranges {
		buf = binary.AppendUvarint(buf, uint64(r.Source-srcEnd))
		buf = binary.AppendUvarint(buf, uint64(r.Dest-dstEnd))
		buf = binary.AppendUvarint(buf, uint64(r.Len))
		srcEnd, dstEnd = r.Source+r.Len, r.Dest+r.Len
	}
	return buf, nil
}

// UnmarshalBinary decodes what MarshalBinary produced, replacing m's content.
func (m *Map) UnmarshalBinary(data []byte) error {
	if len(data) == 0 || data[0] != 1 {
		return fmt.Errorf("%w: unknown version", ErrCorrupt)
	}
	data = data[1:]
	next := func() (int64, error) {
		v, n := binary.Uvarint(data)
		if n <= 0 || v > 1<<62 {
			return 0, ErrCorrupt
		}
		data = data[n:]
		return int64(v), nil
	}
	count, err := next()
	if err != nil {
		return err
	}
	if count > int64(len(data)) { // every range takes at least 3 bytes
		return fmt.Errorf("%w: %d ranges in %d bytes", ErrCorrupt, count, len(data))
	}
	var out Map
	var srcEnd, dstEnd int64
	for i := int64(0); i < count; i++ {
		ds, err1 := next()
		dd, err2 := next()
		n, err3 := next()
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("%w: range %d", ErrCorrupt, i)
		}
		if n == 0 {
			return fmt.Errorf("%w: empty range %d", ErrCorrupt, i)
		}
		out.ranges = append(out.ranges, Range{Source: srcEnd + ds, Dest: dstEnd + dd, Len: n})
		srcEnd, dstEnd = srcEnd+ds+n, dstEnd+dd+n
		if srcEnd < 0 || dstEnd < 0 {
			return fmt.Errorf("%w: overflow in range %d", ErrCorrupt, i)
		}
	}
	if len(data) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(data))
	}
	*m = out
	return nil
}

// TruncateDest drops every mapping whose destination offset is at or beyond
// destEnd. The runner writes a batch's mappings before appending the batch
// (write-ahead); after a crash, the destination's end offset says which of
// them were appended, and the rest are dropped with TruncateDest.
func (m *Map) TruncateDest(destEnd int64) {
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
