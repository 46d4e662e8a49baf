package writer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// BenchmarkAppendKfake measures appends of 100-record (about 12 KiB) source
// batches through a one-broker kfake cluster: bytes/s through the whole
// path (re-stamp, sink, ProduceRequest, offset check) and allocations per
// append, for one partition and for eight appending concurrently.
func BenchmarkAppendKfake(b *testing.B) {
	recs := make([]batch.Record, 100)
	for i := range recs {
		recs[i] = batch.Record{Offset: int64(i), Timestamp: 1_700_000_000_000, Key: fmt.Appendf(nil, "key-%03d", i), Value: make([]byte, 100)}
	}
	src, err := batch.Encode(batch.EncodeOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		b.Fatal(err)
	}
	noHook := func(context.Context, TxnWriterInfo) error { return nil }

	b.Run("partitions=1", func(b *testing.B) {
		c := newCluster(b, kfake.NumBrokers(1), kfake.SeedTopics(1, "bench"))
		w, err := New(kfaketest.NewClient(b, c))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		p, err := w.Partition("bench", 0, noHook)
		if err != nil {
			b.Fatal(err)
		}
		bb := append(batch.Batch(nil), src...)
		ctx := context.Background()
		var next int64
		b.SetBytes(int64(len(bb)))
		b.ReportAllocs()
		for b.Loop() {
			bb.SetBaseOffset(next)
			if _, err := p.Append(ctx, bb); err != nil {
				b.Fatal(err)
			}
			next += 100
		}
	})

	b.Run("partitions=8", func(b *testing.B) {
		const parts = 8
		c := newCluster(b, kfake.NumBrokers(1), kfake.SeedTopics(parts, "bench"))
		w, err := New(kfaketest.NewClient(b, c))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		ps := make([]*Partition, parts)
		for i := range ps {
			if ps[i], err = w.Partition("bench", int32(i), noHook); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		b.ResetTimer()
		var wg sync.WaitGroup
		var failed atomic.Bool
		for i, p := range ps {
			n := b.N / parts
			if i < b.N%parts {
				n++
			}
			bb := append(batch.Batch(nil), src...)
			wg.Go(func() {
				var next int64
				for range n {
					bb.SetBaseOffset(next)
					if _, err := p.Append(context.Background(), bb); err != nil {
						if failed.CompareAndSwap(false, true) {
							b.Error(err)
						}
						return
					}
					next += 100
				}
			})
		}
		wg.Wait()
	})
}
