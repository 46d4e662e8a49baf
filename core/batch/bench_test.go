package batch_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kmirror/kmirror/core/batch"
)

// benchRecords returns n records shaped like application events: a 16-byte
// key and a JSON-ish value of about 400 bytes mixing repeated field names
// with random ids and numbers, so zstd compresses them about as well as it
// compresses real event streams (3-5x), not as well as repeated bytes.
func benchRecords(rng *rand.Rand, n int) []batch.Record {
	const ts = 1_700_000_000_000
	recs := make([]batch.Record, n)
	for i := range recs {
		key := fmt.Appendf(nil, "user-%011d", rng.IntN(1e11))
		value := fmt.Appendf(nil, `{"event":"page_view","id":"%016x%016x","user":%q,"ts":%d,`+
			`"session":{"id":"%016x","start":%d,"ua":"Mozilla/5.0 (X11; Linux x86_64) kmirror-bench/%d"},`+
			`"page":{"path":"/catalog/item/%d","referrer":"https://example.com/search?q=%x","load_ms":%d},`+
			`"geo":{"country":"%s","lat":%.5f,"lon":%.5f},"flags":[%d,%d,%d]}`,
			rng.Uint64(), rng.Uint64(), key, ts+int64(i), rng.Uint64(), ts-rng.Int64N(1e7), rng.IntN(100),
			rng.IntN(1e6), rng.Uint32(), rng.IntN(5000),
			[]string{"DE", "FR", "US", "JP", "BR"}[rng.IntN(5)], rng.Float64()*180-90, rng.Float64()*360-180,
			rng.IntN(2), rng.IntN(2), rng.IntN(2))
		recs[i] = batch.Record{Offset: int64(i), Timestamp: ts + int64(i), Key: key, Value: value}
	}
	return recs
}

// benchBatch encodes one batch of about target bytes on the wire with codec
// c, resizing the record count until the encoded size is within 2% (or one
// kilobyte, a couple of records, for small batches).
func benchBatch(b *testing.B, c batch.Compression, target int) batch.Batch {
	b.Helper()
	n := 16
	for range 8 {
		enc := mustEncode(b, batch.EncodeOptions{Compression: c, ProducerID: 1, BaseSequence: 0},
			benchRecords(rand.New(rand.NewPCG(1, 2)), n))
		tolerance := max(target/50, 1<<10)
		if diff := len(enc) - target; diff > -tolerance && diff < tolerance {
			return enc
		}
		n = max(1, int(float64(n)*float64(target)/float64(len(enc))))
	}
	b.Fatalf("could not size a %s batch to %d bytes", c, target)
	return nil
}

var benchShapes = []struct {
	name  string
	codec batch.Compression
	size  int
}{
	{"none/16KiB", batch.CompressionNone, 16 << 10},
	{"zstd/16KiB", batch.CompressionZstd, 16 << 10},
	{"none/1MiB", batch.CompressionNone, 1 << 20},
	{"zstd/1MiB", batch.CompressionZstd, 1 << 20},
}

// BenchmarkRestamp measures the forward path's per-batch work: write the
// producer fields and recompute the CRC-32C over the batch.
func BenchmarkRestamp(b *testing.B) {
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			bt := benchBatch(b, shape.codec, shape.size)
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			var seq int32
			for b.Loop() {
				bt.Restamp(9000, 1, seq)
				seq++
			}
			b.ReportMetric(float64(bt.RecordCount()), "records/batch")
		})
	}
}

// BenchmarkSplit measures cutting a partition's fetched Records bytes into
// CRC-verified batches: a fetch response of 64 16 KiB batches, or of one
// 1 MiB batch, each followed by a partial batch cut at the fetch limit.
// Throughput counts the whole batches' bytes (the ones read and verified).
// Split allocates its result slice; Scanner allocates nothing.
func BenchmarkSplit(b *testing.B) {
	for _, shape := range benchShapes {
		bt := benchBatch(b, shape.codec, shape.size)
		var fetched []byte
		for len(fetched)+len(bt) <= 1<<20 || len(fetched) == 0 {
			fetched = append(fetched, bt...)
		}
		fetched = append(fetched, bt[:len(bt)/3]...)
		whole := len(fetched) - len(bt)/3
		want := whole / len(bt)

		b.Run("Split/"+shape.name, func(b *testing.B) {
			b.SetBytes(int64(whole))
			b.ReportAllocs()
			for b.Loop() {
				batches, _, err := batch.Split(fetched)
				if err != nil || len(batches) != want {
					b.Fatalf("Split: %d batches, %v", len(batches), err)
				}
			}
		})
		b.Run("Scanner/"+shape.name, func(b *testing.B) {
			b.SetBytes(int64(whole))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				s := batch.NewScanner(fetched)
				for s.Next() {
					n++
				}
				if s.Err() != nil || n != want {
					b.Fatalf("Scanner: %d batches, %v", n, s.Err())
				}
			}
		})
	}
}
