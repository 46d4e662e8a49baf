package offsetmap_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/plugins/statestore/file"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// byteCounter counts the bytes Put through it.
type byteCounter struct {
	statestore.Store
	n atomic.Int64
}

func (s *byteCounter) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s.n.Add(int64(len(value)))
	return s.Store.Put(ctx, key, value, expect)
}

// BenchmarkMapModeAppend measures the write ahead of one map-mode batch on a
// compacted partition: the batch's records leave a gap (two new ranges),
// then the offset map is stored before the append. The map already holds
// 1e3 or 1e6 ranges (gaps). "journal" is kmirror's path (Journal.Append:
// the open segment, compactions amortised); "whole-map" is the write it
// replaces (the whole map marshalled and Put per batch). stored-B/op counts
// the bytes Put into the state store per batch.
func BenchmarkMapModeAppend(b *testing.B) {
	for _, st := range []string{"mem", "file"} {
		for _, size := range []struct {
			n    int
			name string
		}{{1_000, "1e3"}, {1_000_000, "1e6"}} {
			for _, how := range []string{"journal", "whole-map"} {
				b.Run(fmt.Sprintf("store=%s/ranges=%s/%s", st, size.name, how), func(b *testing.B) {
					benchAppend(b, st, size.n, how == "journal")
				})
			}
		}
	}
}

func benchAppend(b *testing.B, st string, size int, journal bool) {
	ctx := context.Background()
	var inner statestore.Store = memstore.New()
	if st == "file" {
		fs, err := file.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { fs.Close() })
		inner = fs
	}
	store := &byteCounter{Store: inner}
	m := &offsetmap.Map{}
	var src, dst int64
	batch := func() {
		// Ten records, one compacted away after the fifth: two ranges.
		for _, n := range []int64{5, 4} {
			if err := m.AddRun(src, dst, n); err != nil {
				b.Fatal(err)
			}
			src, dst = src+n+1, dst+n
		}
	}
	for m.Len() < size {
		batch()
	}
	j := offsetmap.NewJournal(store, "bench", "compacted", 0, offsetmap.JournalOptions{})
	if err := j.Rewrite(ctx, m); err != nil {
		b.Fatal(err)
	}
	store.n.Store(0)
	ops := 0
	for b.Loop() {
		batch()
		if journal {
			if err := j.Append(ctx, m); err != nil {
				b.Fatal(err)
			}
		} else {
			v, err := m.MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := store.Put(ctx, statestore.OffsetMapKey("bench", "compacted", 0), v, statestore.AnyVersion); err != nil {
				b.Fatal(err)
			}
		}
		ops++
	}
	b.ReportMetric(float64(store.n.Load())/float64(ops), "stored-B/op")
}
