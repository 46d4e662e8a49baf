package runner

import (
	"context"
	"errors"
	"sync"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
)

// mapStore is a runner's handle on the durable copy of its offset map: the
// journal (core/offsetmap.Journal: a snapshot plus segments, so that the
// write ahead of each map-mode batch costs the same whatever the map's
// size) and the map it describes, which group offset sync reads in memory.
// The runner goroutine writes; mu guards the two pointers for readers.
type mapStore struct {
	mu sync.Mutex
	j  *offsetmap.Journal // nil until the map is loaded or written in this process
	m  *offsetmap.Map     // the map j describes
}

func (s *mapStore) set(j *offsetmap.Journal) {
	s.mu.Lock()
	s.j, s.m = j, j.Map()
	s.mu.Unlock()
}

func (s *mapStore) journal() *offsetmap.Journal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j
}

// current returns the offset map the runner loaded or wrote last, or nil
// when it has none in this process. A Map is safe for concurrent reads.
func (s *mapStore) current() *offsetmap.Map {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

func (r *Runner) newJournal() *offsetmap.Journal {
	return offsetmap.NewJournal(r.d.Store, r.d.Mirror, r.topic, r.partition, offsetmap.JournalOptions{LogStart: r.destLogStart, Warn: r.log.Warn})
}

// destLogStart reads the destination partition's log start offset
// (ListOffsets, earliest). A compaction of the offset map calls it to drop
// the mappings of records deleted on the destination; it is rare (the
// journal's compactions grow geometrically), so one request then is cheap.
func (r *Runner) destLogStart(ctx context.Context) (int64, bool) {
	starts, err := r.d.DestAdmin.ListStartOffsets(ctx, r.topic)
	if err == nil {
		if o, ok := starts.Lookup(r.topic, r.partition); !ok {
			return 0, false
		} else if err = o.Err; err == nil {
			return o.Offset, true
		}
	}
	r.log.Warn("cannot read the destination log start; the offset map is compacted without trimming", "error", err)
	return 0, false
}

// loadMap reads the offset map from the state store (its snapshot and
// every segment appended after it).
func (r *Runner) loadMap(ctx context.Context) (*offsetmap.Map, error) {
	j := r.newJournal()
	m, err := j.Load(ctx)
	if errors.Is(err, offsetmap.ErrCorrupt) {
		return nil, partition.NonRetryable(r.errorf("the offset map in the state store is unreadable: %w", err))
	}
	if err != nil {
		return nil, r.errorf("loading the offset map: %w", err)
	}
	r.maps.set(j)
	return m, nil
}

// saveMap writes r.omap whole (write-ahead: before the batches it maps are
// appended). It is for the rare paths that set a new map; forwardMapped
// uses appendMap.
func (r *Runner) saveMap(ctx context.Context) error {
	j := r.maps.journal()
	if j == nil {
		j = r.newJournal()
	}
	if err := j.Rewrite(ctx, r.omap); err != nil {
		return r.errorf("saving the offset map: %w", err)
	}
	r.maps.set(j)
	return nil
}

// appendMap stores the mappings added to r.omap since the last write
// (write-ahead: before the batch they map is appended), at a cost that does
// not grow with the map.
func (r *Runner) appendMap(ctx context.Context) error {
	j := r.maps.journal()
	if j == nil {
		return r.saveMap(ctx)
	}
	if err := j.Append(ctx, r.omap); err != nil {
		return r.errorf("saving the offset map: %w", err)
	}
	r.maps.set(j)
	return nil
}
