package offsetmap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// Defaults of JournalOptions.
const (
	// DefaultSegmentRanges is the number of ranges after which a segment is
	// closed and the next append starts a new one: a segment is rewritten
	// with every append until then, so it bounds the bytes an append writes
	// (a few KiB).
	DefaultSegmentRanges = 512
	// DefaultMinCompactRanges is the fewest ranges the segments hold before
	// they are folded into the snapshot.
	DefaultMinCompactRanges = 16384
)

// Formats of the values a Journal stores. The snapshot's first byte tells
// its format: snapshotV1 is MarshalBinary's (written by kmirror before
// journals existed, and still read), snapshotV2 adds the number of the first
// segment that follows it.
const (
	snapshotV1 = 1
	snapshotV2 = 2
	segmentV1  = 1
)

// JournalOptions tune a Journal. The zero value uses the defaults.
type JournalOptions struct {
	// SegmentRanges closes a segment once it holds this many ranges.
	// Default DefaultSegmentRanges.
	SegmentRanges int
	// MinCompactRanges: the segments are folded into a new snapshot once
	// they hold max(MinCompactRanges, half the snapshot's ranges), so that
	// the snapshot's size is paid once per as many appended ranges as it
	// holds (geometric growth). Default DefaultMinCompactRanges.
	MinCompactRanges int
	// LogStart, when set, returns the destination partition's log start
	// offset (ok false: not known now). A compaction trims the mappings
	// below it (Map.TrimDest) before it writes the snapshot.
	LogStart func(ctx context.Context) (logStart int64, ok bool)
	// Warn, when set, is told of a stale segment that could not be deleted
	// (an hclog.Logger's Warn fits).
	Warn func(msg string, args ...any)
}

// Journal keeps one partition's Map durable in a state store, at a cost per
// append that does not depend on the map's size:
//
//	OffsetMapKey                 snapshot: the map up to segment `next`
//	OffsetMapSegmentKey(n), n>=next  segments: what was appended since, in order
//
// An append rewrites the open segment only (at most SegmentRanges ranges
// plus the ones just added); once the segments hold half as many ranges as
// the snapshot (at least MinCompactRanges), a compaction writes the whole
// map as a new snapshot whose `next` is beyond every segment, which makes
// them stale, and they are deleted two per later write. Each segment stores the
// destination offset it truncates the map to before adding its ranges, so
// that a Map.TruncateDest (the resume after a crash cuts the mappings
// written ahead of batches that were never appended) is stored like an
// append.
//
// A Journal belongs to one goroutine (the partition's runner). It describes
// one Map: the one Load returned or the last one written; Append of another
// Map rewrites the snapshot.
type Journal struct {
	store      statestore.Store
	key        string // the snapshot's
	prefix     string // the segments'
	mirror     string
	topic      string
	partition  int32
	opts       JournalOptions
	m          *Map    // the map whose stored copy the fields below describe
	known      bool    // every segment key in the store is known (loaded or listed)
	needSnap   bool    // the next Append writes a snapshot (none stored, or in the format before journals)
	seq        int64   // number of the open segment
	written    bool    // segment seq may hold a value
	base       int64   // the map's DestNext when segment seq was opened
	liveFrom   int64   // the snapshot's next: segments liveFrom..seq are live
	stale      []int64 // stale segments not deleted yet, oldest first
	buf        []byte  // the last segment encoded, reused
	snapRanges int     // ranges in the snapshot
	logRanges  int     // ranges in the closed live segments
	logSegs    int     // closed live segments
}

// NewJournal returns the journal of the offset map of one mirrored
// partition, stored under statestore.OffsetMapKey and
// statestore.OffsetMapSegmentKey.
func NewJournal(store statestore.Store, mirror, topic string, partition int32, opts JournalOptions) *Journal {
	if opts.SegmentRanges <= 0 {
		opts.SegmentRanges = DefaultSegmentRanges
	}
	if opts.MinCompactRanges <= 0 {
		opts.MinCompactRanges = DefaultMinCompactRanges
	}
	return &Journal{store: store, key: statestore.OffsetMapKey(mirror, topic, partition),
		prefix: statestore.OffsetMapSegmentsPrefix(mirror, topic, partition), mirror: mirror, topic: topic, partition: partition, opts: opts}
}

// Load reads the offset map of one partition (snapshot and segments) from
// store; a partition without one has an empty map. It only reads.
func Load(ctx context.Context, store statestore.Store, mirror, topic string, partition int32) (*Map, error) {
	return NewJournal(store, mirror, topic, partition, JournalOptions{}).Load(ctx)
}

// Delete removes the offset map of one partition from store: its segments,
// then its snapshot (an operator's reset). A map that does not exist is no
// error; a Delete interrupted midway can be called again.
func Delete(ctx context.Context, store statestore.Store, mirror, topic string, partition int32) error {
	key := statestore.OffsetMapKey(mirror, topic, partition)
	segs, err := store.List(ctx, statestore.OffsetMapSegmentsPrefix(mirror, topic, partition))
	if err != nil {
		return fmt.Errorf("offset map %s: listing its segments: %w", key, err)
	}
	for _, e := range segs {
		if err := store.Delete(ctx, e.Key, statestore.AnyVersion); err != nil && !errors.Is(err, statestore.ErrNotFound) {
			return fmt.Errorf("offset map %s: deleting segment %s: %w", key, e.Key, err)
		}
	}
	if err := store.Delete(ctx, key, statestore.AnyVersion); err != nil && !errors.Is(err, statestore.ErrNotFound) {
		return fmt.Errorf("offset map %s: deleting its snapshot: %w", key, err)
	}
	return nil
}

// errorf builds an error that names the map by its key (which names the
// mirror, topic and partition).
func (j *Journal) errorf(format string, args ...any) error {
	return fmt.Errorf("offset map %s: %w", j.key, fmt.Errorf(format, args...))
}

// Map returns the map the journal describes (nil before Load or a write).
func (j *Journal) Map() *Map { return j.m }

// Load reads the map: the snapshot, then every live segment in order. An
// unreadable value, or a segment missing between two others, is an error
// wrapping ErrCorrupt: mappings would be lost. It only reads; stale
// segments are deleted by later writes.
func (j *Journal) Load(ctx context.Context) (*Map, error) {
	m := &Map{}
	var next int64
	needSnap := false
	snapRanges := 0
	e, err := j.store.Get(ctx, j.key)
	switch {
	case errors.Is(err, statestore.ErrNotFound):
		needSnap = true
	case err != nil:
		return nil, j.errorf("reading the snapshot: %w", err)
	default:
		rs, n, err := decodeSnapshot(e.Value)
		if err != nil {
			return nil, j.errorf("snapshot: %w", err)
		}
		m.ranges, next, snapRanges = rs, n, len(rs)
		needSnap = e.Value[0] == snapshotV1
	}
	segs, err := j.store.List(ctx, j.prefix)
	if err != nil {
		return nil, j.errorf("listing the segments: %w", err)
	}
	var stale []int64
	expect := next // the next live segment
	seq := next    // beyond every segment found
	logRanges, logSegs := 0, 0
	for _, s := range segs {
		n, err := strconv.ParseInt(strings.TrimPrefix(s.Key, j.prefix), 10, 64)
		if err != nil || n < 0 {
			return nil, j.errorf("%w: unexpected key %s among the segments", ErrCorrupt, s.Key)
		}
		seq = max(seq, n+1)
		if needSnap || n < next {
			// Folded into the snapshot (or older than it): deleted later.
			stale = append(stale, n)
			continue
		}
		if n != expect {
			return nil, j.errorf("%w: segment %d is missing (found %d)", ErrCorrupt, expect, n)
		}
		seq, base, low, rs, err := decodeSegment(s.Value)
		if err != nil {
			return nil, j.errorf("segment %s: %w", s.Key, err)
		}
		switch {
		case seq != n:
			return nil, j.errorf("%w: segment %s holds segment number %d", ErrCorrupt, s.Key, seq)
		case base != m.destNext():
			return nil, j.errorf("%w: segment %d continues a map that ends at destination offset %d, but the map before it ends at %d",
				ErrCorrupt, n, base, m.destNext())
		case low > base:
			return nil, j.errorf("%w: segment %d truncates the map at destination offset %d, beyond its end %d", ErrCorrupt, n, low, base)
		}
		m.TruncateDest(low)
		for i, r := range rs {
			if err := m.addRun(r.Source, r.Dest, r.Len); err != nil {
				return nil, j.errorf("%w: segment %s range %d: %w", ErrCorrupt, s.Key, i, err)
			}
		}
		expect++
		logRanges += len(rs)
		logSegs++
	}
	liveFrom := next
	if needSnap {
		liveFrom = seq // no live segment: the snapshot to write comes after all
	}
	*j = Journal{store: j.store, key: j.key, prefix: j.prefix, mirror: j.mirror, topic: j.topic, partition: j.partition, opts: j.opts, buf: j.buf,
		known: true, needSnap: needSnap, seq: seq, liveFrom: liveFrom, stale: stale, snapRanges: snapRanges,
		logRanges: logRanges, logSegs: logSegs}
	j.adopt(m)
	return m, nil
}

// adopt makes m the map the journal describes, stored up to now: the next
// segment continues it.
func (j *Journal) adopt(m *Map) {
	j.m = m
	j.base = m.DestNext()
	m.mark()
}

// Rewrite stores m whole, as a new snapshot after which every segment in the
// store is stale. It is the write of rare paths (a new map, a recovery that
// rebuilt it), so it lists the segments in the store first rather than trust
// what the journal knows: whoever wrote them, none is applied to m.
func (j *Journal) Rewrite(ctx context.Context, m *Map) error {
	j.known = false
	if err := j.snapshot(ctx, m); err != nil {
		return err
	}
	j.deleteStale(ctx)
	return nil
}

// snapshot writes m as the snapshot, making every segment in the store stale.
func (j *Journal) snapshot(ctx context.Context, m *Map) error {
	if !j.known {
		// A journal that did not load the map does not know which
		// segments exist: the new snapshot must come after all of them.
		segs, err := j.store.List(ctx, j.prefix)
		if err != nil {
			return j.errorf("listing the segments: %w", err)
		}
		j.stale, j.seq, j.written = nil, 0, false
		for _, s := range segs {
			if n, err := strconv.ParseInt(strings.TrimPrefix(s.Key, j.prefix), 10, 64); err == nil && n >= 0 {
				j.stale = append(j.stale, n)
				j.seq = max(j.seq, n+1)
			}
		}
		j.liveFrom, j.known = j.seq, true
	}
	next := j.seq
	if j.written {
		next++
	}
	for n := j.liveFrom; n < next; n++ {
		j.stale = append(j.stale, n)
	}
	// From here on, whether the Put lands or not, segments below next are
	// stale for any snapshot this journal writes: new ones start at next.
	j.seq, j.written, j.liveFrom = next, false, next
	m.mu.RLock()
	buf := make([]byte, 0, 12+len(m.ranges)*6)
	buf = append(buf, snapshotV2)
	buf = appendUvarint(buf, next)
	buf = appendRanges(buf, m.ranges)
	n := len(m.ranges)
	m.mu.RUnlock()
	if _, err := j.store.Put(ctx, j.key, buf, statestore.AnyVersion); err != nil {
		j.needSnap = true
		return j.errorf("writing the snapshot: %w", err)
	}
	j.needSnap, j.snapRanges, j.logRanges, j.logSegs = false, n, 0, 0
	j.adopt(m)
	return nil
}

// Append stores what was added to m (and cut from its end by TruncateDest)
// since the last write, before the batches it maps are appended
// (write-ahead): when it returns nil, Load returns m (up to ranges TrimDest
// dropped). It writes the open segment, or a snapshot when the segments
// are due for compaction, or when m is not the map the journal describes.
func (j *Journal) Append(ctx context.Context, m *Map) error {
	if m != j.m || !j.known || j.needSnap {
		if err := j.snapshot(ctx, m); err != nil {
			return err
		}
		j.deleteStale(ctx)
		return nil
	}
	buf := append(j.buf[:0], segmentV1)
	buf = appendUvarint(buf, j.seq)
	buf = appendUvarint(buf, j.base)
	buf, n := m.appendUnsaved(buf)
	j.buf = buf
	due := max(j.opts.MinCompactRanges, j.snapRanges/2)
	if j.logRanges+n >= due || j.logSegs >= 2+2*due/j.opts.SegmentRanges {
		return j.compact(ctx, m)
	}
	j.written = true // a failed Put may have landed
	if _, err := j.store.Put(ctx, statestore.OffsetMapSegmentKey(j.mirror, j.topic, j.partition, j.seq), buf, statestore.AnyVersion); err != nil {
		return j.errorf("writing segment %d: %w", j.seq, err)
	}
	if n >= j.opts.SegmentRanges {
		j.logRanges += n
		j.logSegs++
		j.seq, j.written = j.seq+1, false
		j.adopt(m)
	}
	j.deleteStale(ctx)
	return nil
}

// compact trims m below the destination log start and writes it as the
// snapshot.
func (j *Journal) compact(ctx context.Context, m *Map) error {
	if j.opts.LogStart != nil {
		if ls, ok := j.opts.LogStart(ctx); ok {
			m.TrimDest(ls)
		}
	}
	if err := j.snapshot(ctx, m); err != nil {
		return err
	}
	j.deleteStale(ctx)
	return nil
}

// deleteStale deletes up to two stale segments, oldest first: never fewer
// than writes create, and never a long pause in the write path. Deleting is
// best effort: a segment that cannot be deleted now is tried again at the
// next write (and Load ignores it meanwhile).
func (j *Journal) deleteStale(ctx context.Context) {
	for range 2 {
		if len(j.stale) == 0 {
			return
		}
		s := j.stale[0]
		err := j.store.Delete(ctx, statestore.OffsetMapSegmentKey(j.mirror, j.topic, j.partition, s), statestore.AnyVersion)
		if err != nil && !errors.Is(err, statestore.ErrNotFound) {
			if j.opts.Warn != nil {
				j.opts.Warn("cannot delete a stale segment of the offset map; retrying at the next write", "key", j.key, "segment", s, "error", err)
			}
			return
		}
		j.stale = j.stale[1:]
	}
}

func appendUvarint(buf []byte, v int64) []byte { return binary.AppendUvarint(buf, uint64(v)) }

// decodeSnapshot decodes a snapshot of either format; next is the number of
// the first segment after it (0 for the format before journals).
func decodeSnapshot(v []byte) (rs []Range, next int64, err error) {
	if len(v) == 0 || (v[0] != snapshotV1 && v[0] != snapshotV2) {
		return nil, 0, fmt.Errorf("%w: unknown version", ErrCorrupt)
	}
	d := decoder{v[1:]}
	if v[0] == snapshotV2 {
		if next, err = d.uvarint(); err != nil {
			return nil, 0, fmt.Errorf("%w: segment number", ErrCorrupt)
		}
	}
	if rs, err = d.ranges(); err != nil {
		return nil, 0, err
	}
	return rs, next, d.end()
}

// decodeSegment decodes a segment: its number, the map's destination end
// when it was opened, the destination offset it truncates the map to, and
// the ranges it adds.
func decodeSegment(v []byte) (seq, base, low int64, rs []Range, err error) {
	if len(v) == 0 || v[0] != segmentV1 {
		return 0, 0, 0, nil, fmt.Errorf("%w: unknown segment version", ErrCorrupt)
	}
	d := decoder{v[1:]}
	seq, err1 := d.uvarint()
	base, err2 := d.uvarint()
	low, err3 := d.uvarint()
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("%w: segment header", ErrCorrupt)
	}
	if rs, err = d.ranges(); err != nil {
		return 0, 0, 0, nil, err
	}
	if len(rs) > 0 && rs[0].Dest < low {
		return 0, 0, 0, nil, fmt.Errorf("%w: segment adds destination offset %d below its start %d", ErrCorrupt, rs[0].Dest, low)
	}
	return seq, base, low, rs, d.end()
}
