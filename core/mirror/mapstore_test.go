package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// mapStoreSpy counts what a mirror does with the offset map keys of one
// partition: snapshot and segment Puts, and reads (Get or List).
type mapStoreSpy struct {
	statestore.Store
	snapshot, segments string
	failSegmentPut     atomic.Int32 // > 0: fail the segment Put with this number, once
	mu                 sync.Mutex
	snapshotPuts       int
	segmentPuts        int
	maxSegment         int
	reads              int
}

func newMapStoreSpy(topic string) *mapStoreSpy {
	return &mapStoreSpy{Store: memstore.New(), snapshot: statestore.OffsetMapKey("test", topic, 0), segments: statestore.OffsetMapSegmentsPrefix("test", topic, 0)}
}

func (s *mapStoreSpy) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s.mu.Lock()
	switch {
	case key == s.snapshot:
		s.snapshotPuts++
	case strings.HasPrefix(key, s.segments):
		s.segmentPuts++
		s.maxSegment = max(s.maxSegment, len(value))
		if s.failSegmentPut.CompareAndSwap(int32(s.segmentPuts), 0) {
			s.mu.Unlock()
			return 0, errors.New("injected state store failure")
		}
	}
	s.mu.Unlock()
	return s.Store.Put(ctx, key, value, expect)
}

func (s *mapStoreSpy) Get(ctx context.Context, key string) (statestore.Entry, error) {
	s.read(key)
	return s.Store.Get(ctx, key)
}

func (s *mapStoreSpy) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	s.read(prefix)
	return s.Store.List(ctx, prefix)
}

func (s *mapStoreSpy) read(key string) {
	if strings.HasPrefix(key, s.snapshot) {
		s.mu.Lock()
		s.reads++
		s.mu.Unlock()
	}
}

func (s *mapStoreSpy) counts() (snapshotPuts, segmentPuts, maxSegment, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotPuts, s.segmentPuts, s.maxSegment, s.reads
}

// produceCompactable writes n one-record batches: even offsets carry a key
// of their own, odd ones one shared key, so that compaction leaves a gap at
// every odd offset but the last.
func (f *fixture) produceCompactable(t *testing.T, topic string, from, n int) {
	t.Helper()
	cl := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic(topic))
	for i := from; i < from+n; i++ {
		key := fmt.Sprintf("u%d", i)
		if i%2 == 1 {
			key = "dup"
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkMapped compares the source and destination logs through the offset
// map stored for the partition.
func (f *fixture) checkMapped(t *testing.T, store statestore.Store, topic string) *offsetmap.Map {
	t.Helper()
	ctx := context.Background()
	src, err := verify.ReadLog(ctx, f.srcCl, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := verify.ReadLog(ctx, f.dstCl, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := offsetmap.Load(ctx, store, "test", topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := verify.DiffMapped(src, dst, m.Lookup); diff != "" {
		t.Fatalf("%s (offset map %v)", diff, m.Ranges())
	}
	return m
}

// TestMapModeAppendsSegmentsAndGroupSyncTranslatesInMemory: a compacted
// source runs in map mode; each batch's mappings are written ahead of it as
// a small segment, never as the whole map; group offset sync translates
// through the runner's map without reading the state store; and the map
// reloaded from the store maps every record exactly.
func TestMapModeAppendsSegmentsAndGroupSyncTranslatesInMemory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "squeezed", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	f.produceCompactable(t, "squeezed", 0, 300)
	f.src.Compact()
	store := newMapStoreSpy("squeezed")
	e := startEngine(t, f.config(t, "squeezed"), store)
	f.waitMirrored(t, e, "squeezed", 1)
	if ps := e.Status().Mirrors[0].Partitions[0]; ps.Mode != "map" {
		t.Fatalf("mode %q, want map (the compacted source has gaps)", ps.Mode)
	}
	m := f.checkMapped(t, store, "squeezed")
	if m.Len() < 100 {
		t.Fatalf("the offset map has %d ranges; the compacted source should leave ~150 (test premise)", m.Len())
	}
	snapPuts, segPuts, maxSeg, _ := store.counts()
	if snapPuts > 2 {
		t.Fatalf("the whole offset map was written %d times for ~150 batches; it must be written only when the partition switches to map mode", snapPuts)
	}
	if segPuts < 100 {
		t.Fatalf("%d segment writes for ~150 map-mode batches: each batch's mapping must be written ahead of it", segPuts)
	}
	if maxSeg > 4096 {
		t.Fatalf("a segment write took %d bytes", maxSeg)
	}

	// A group committed in a gap (source 101, compacted away) resumes on
	// the destination at the next record; group sync reads no map from
	// the store to say so.
	ctx := context.Background()
	_, _, _, readsBefore := store.counts()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "squeezed", Partition: 0, At: 101})
	if _, err := kadm.NewClient(f.srcCl).CommitOffsets(ctx, "readers", os); err != nil {
		t.Fatal(err)
	}
	want, ok := m.Translate(101)
	if !ok {
		t.Fatal("source offset 101 does not translate")
	}
	kfaketest.WaitFor(t, "the group offset reaches the destination", func() (bool, string) {
		offs, err := kadm.NewClient(f.dstCl).FetchOffsets(ctx, "readers")
		if err != nil {
			return false, err.Error()
		}
		o, ok := offs.Lookup("squeezed", 0)
		return ok && o.At == want, fmt.Sprintf("destination offset %d, want %d", o.At, want)
	})
	if _, _, _, reads := store.counts(); reads != readsBefore {
		t.Fatalf("group sync read the offset map from the state store %d times; it must translate through the runner's map", reads-readsBefore)
	}
}

// TestMapModeWritesEachMappingAheadOfItsBatch: two crashes on either
// side of the write-ahead, simulated in process. (1) The state store refuses
// a batch's mapping: the batch must not have been appended (were the map
// written after the append, the destination would hold a batch the map does
// not know, and the partition could only fail). (2) The destination refuses
// an append after its mapping was saved: the resume cuts the mapping that
// never landed. Either way the partition continues, and the stored map maps
// every record exactly; a restart reloads it from the store.
func TestMapModeWritesEachMappingAheadOfItsBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "flaky", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	f.produceCompactable(t, "flaky", 0, 40)
	f.src.Compact()
	store := newMapStoreSpy("flaky")
	cfg := f.config(t, "flaky")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "flaky", 1)

	// (1) The store refuses the third mapping from now on.
	_, segs, _, _ := store.counts()
	store.failSegmentPut.Store(int32(segs + 3))
	f.produceCompactable(t, "flaky", 40, 20)
	f.waitMirrored(t, e, "flaky", 1)
	if store.failSegmentPut.Load() != 0 {
		t.Fatal("no mapping write was refused (test premise)")
	}
	f.checkMapped(t, store, "flaky")

	// (2) The destination refuses the next append.
	var armed, refused atomic.Bool
	f.dst.ControlKey(kmsg.Produce.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if !armed.Load() || refused.Load() || req.TransactionID != nil {
			return nil, nil, false
		}
		refused.Store(true)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, kerr.InvalidRecord.Code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	_, segsBefore, _, _ := store.counts()
	armed.Store(true)
	f.produceCompactable(t, "flaky", 60, 20)
	f.waitMirrored(t, e, "flaky", 1)
	if !refused.Load() {
		t.Fatal("no append was refused (test premise)")
	}
	if _, segs, _, _ := store.counts(); segs <= segsBefore {
		t.Fatal("no mapping was saved after the refusal")
	}
	f.checkMapped(t, store, "flaky")

	stopEngine(t, e)
	f.produceCompactable(t, "flaky", 80, 20)
	e2 := startEngine(t, cfg, store)
	f.waitMirrored(t, e2, "flaky", 1)
	f.checkMapped(t, store, "flaky")
}
