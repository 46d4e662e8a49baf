package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// BenchmarkMirrorThroughput measures kmirror copying a topic that is
// already full on the source (3 brokers, replication factor 3) to the
// destination (1 broker), on the real brokers of the e2e clusters: the time
// from starting the daemon until every partition is mirrored (daemon start,
// topic creation and preparation included). Records are 1 KiB (half random
// hex, half repeated text, so codecs have something to do), produced with
// the codec named by the sub-benchmark; kmirror forwards batches without
// decompressing them. `make bench-e2e` runs it; docs/benchmarks.md has the
// figures.
func BenchmarkMirrorThroughput(b *testing.B) {
	const (
		partitions = 4
		records    = 100_000
		size       = 1024
	)
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		b.Run(codec.name, func(b *testing.B) {
			ctx := testContext(b, 15*time.Minute)
			b.SetBytes(records * size)
			var mirrored time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				topic := topicName(b, fmt.Sprintf("%s-%d", codec.name, i))
				createTopic(b, ctx, superAdmin(b, source), topic, partitions, 3, nil)
				fillTopic(b, topic, records, size, codec.codec)
				kmirrorBinary(b) // built once, outside the measurement
				start := time.Now()
				b.StartTimer()
				d := startKmirror(b, regexp.QuoteMeta(topic))
				d.waitMirrored(ctx, topic, partitions)
				b.StopTimer()
				mirrored += time.Since(start)
				d.stop(syscall.SIGTERM)
			}
			b.ReportMetric(float64(records*b.N)/mirrored.Seconds(), "records/s")
		})
	}
}

// fillTopic produces n records of size bytes to topic on the source.
func fillTopic(b *testing.B, topic string, n, size int, codec kgo.CompressionCodec) {
	b.Helper()
	cl := newClient(b, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))
	ctx := testContext(b, 10*time.Minute)
	random := make([]byte, size/4)
	filler := []byte(`{"event":"order-placed","region":"eu-west","status":"ok"} `)
	errs := make(chan error, 1)
	for i := 0; i < n; i++ {
		_, _ = rand.Read(random)
		v := make([]byte, 0, size)
		v = hex.AppendEncode(v, random)
		for len(v) < size {
			v = append(v, filler[:min(len(filler), size-len(v))]...)
		}
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatalf("filling %s: %v", topic, err)
	default:
	}
}
