// Package mapstore is a runner's handle on the durable copy of its
// partition's offset map (map mode): the journal in the state store
// (core/offsetmap.Journal: a snapshot plus segments, so that the write ahead
// of each map-mode batch costs the same whatever the map's size) and the
// map it describes, which group offset sync reads in memory.
package mapstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Store is the durable copy of one partition's offset map. The runner
// goroutine writes; mu guards the two pointers for readers (Current).
type Store struct {
	store     statestore.Store
	mirror    string
	topic     string
	partition int32
	dest      *kadm.Client
	log       hclog.Logger

	mu sync.Mutex
	j  *offsetmap.Journal // nil until the map is loaded or written in this process
	m  *offsetmap.Map     // the map j describes
}

// New returns the store of the offset map of mirror's topic partition in
// store. dest is the destination's admin client (its log start trims the
// map when the journal compacts); log gets the warnings.
func New(store statestore.Store, mirror, topic string, partition int32, dest *kadm.Client, log hclog.Logger) *Store {
	return &Store{store: store, mirror: mirror, topic: topic, partition: partition, dest: dest, log: log}
}

// errorf builds an error that names the mirror, topic and partition.
func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf("mirror %s: topic %s partition %d: %w", s.mirror, s.topic, s.partition, fmt.Errorf(format, args...))
}

func (s *Store) set(j *offsetmap.Journal) {
	s.mu.Lock()
	s.j, s.m = j, j.Map()
	s.mu.Unlock()
}

func (s *Store) journal() *offsetmap.Journal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j
}

// Current returns the offset map the runner loaded or wrote last, or nil
// when it has none in this process. A Map is safe for concurrent reads.
func (s *Store) Current() *offsetmap.Map {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

func (s *Store) newJournal() *offsetmap.Journal {
	return offsetmap.NewJournal(s.store, s.mirror, s.topic, s.partition, offsetmap.JournalOptions{LogStart: s.destLogStart, Warn: s.log.Warn})
}

// destLogStart reads the destination partition's log start offset
// (ListOffsets, earliest). A compaction of the offset map calls it to drop
// the mappings of records deleted on the destination; it is rare (the
// journal's compactions grow geometrically), so one request then is cheap.
func (s *Store) destLogStart(ctx context.Context) (int64, bool) {
	starts, err := s.dest.ListStartOffsets(ctx, s.topic)
	if err == nil {
		if o, ok := starts.Lookup(s.topic, s.partition); !ok {
			return 0, false
		} else if err = o.Err; err == nil {
			return o.Offset, true
		}
	}
	s.log.Warn("cannot read the destination log start; the offset map is compacted without trimming", "error", err)
	return 0, false
}

// Load reads the offset map from the state store (its snapshot and every
// segment appended after it). An unreadable map is non-retryable.
func (s *Store) Load(ctx context.Context) (*offsetmap.Map, error) {
	j := s.newJournal()
	m, err := j.Load(ctx)
	if errors.Is(err, offsetmap.ErrCorrupt) {
		return nil, partition.NonRetryable(s.errorf("the offset map in the state store is unreadable: %w", err))
	}
	if err != nil {
		return nil, s.errorf("loading the offset map: %w", err)
	}
	s.set(j)
	return m, nil
}

// Save writes m whole (write-ahead: before the batches it maps are
// appended). It is for the rare paths that set a new map; forwarding uses
// Append.
func (s *Store) Save(ctx context.Context, m *offsetmap.Map) error {
	j := s.journal()
	if j == nil {
		j = s.newJournal()
	}
	if err := j.Rewrite(ctx, m); err != nil {
		return s.errorf("saving the offset map: %w", err)
	}
	s.set(j)
	return nil
}

// Append stores the mappings added to m since the last write (write-ahead:
// before the batch they map is appended), at a cost that does not grow with
// the map.
func (s *Store) Append(ctx context.Context, m *offsetmap.Map) error {
	j := s.journal()
	if j == nil {
		return s.Save(ctx, m)
	}
	if err := j.Append(ctx, m); err != nil {
		return s.errorf("saving the offset map: %w", err)
	}
	s.set(j)
	return nil
}
