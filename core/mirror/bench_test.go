package mirror

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// BenchmarkMirrorEndToEndKfake measures the whole data path (fetch sessions,
// batch split, re-stamp, batched produce, offset checks) between two
// in-process kfake clusters: 4 partitions, 100,000 records of ~200 bytes in
// zstd batches. Each iteration mirrors the same source into a fresh
// destination. Bytes/s counts the (zstd-compressed, so small) batch bytes moved;
// records/s is the figure to compare.
func BenchmarkMirrorEndToEndKfake(b *testing.B) {
	const (
		topic      = "bench"
		partitions = 4
		records    = 100_000
	)
	src := kfaketest.NewCluster(b)
	srcCl := kfaketest.NewClient(b, src, kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(256<<10))
	ctx := context.Background()
	kfaketest.CreateTopic(b, srcCl, topic, partitions, nil)
	value := strings.Repeat("v", 180)
	for i := 0; i < records; i++ {
		srcCl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "key-%08d", i), Value: fmt.Appendf(nil, "%s-%d", value, i)}, nil)
	}
	if err := srcCl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	ends, err := kadm.NewClient(srcCl).ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var moved int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst := kfaketest.NewCluster(b) // closed at the end of the iteration
		cfg, err := config.Parse([]byte(fmt.Sprintf("mirror.metadata.refresh.interval.ms: 60000\ndestination:\n  bootstrap.servers: %s\nstate:\n  dir: /unused\nmirrors:\n  - name: bench\n    bootstrap.servers: %s\n    mirror.topics.include: %s\n",
			strings.Join(dst.ListenAddrs(), ","), strings.Join(src.ListenAddrs(), ","), topic)), "yaml", nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		mp, _ := metrics.New()
		e, err := New(Options{Store: memstore.New(), Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard}), Metrics: mp})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := e.Start(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		for {
			done := 0
			for _, m := range e.Status().Mirrors {
				for _, p := range m.Partitions {
					if o, ok := ends.Lookup(topic, p.Partition); ok && p.LastMirroredOffset+1 == o.Offset {
						done++
					}
				}
			}
			if done == partitions {
				break
			}
			// The benchmark's own poll, inside the measured time: 2 ms
			// keeps it fine-grained (kfaketest.WaitFor's pauses grow to
			// 10 ms, which a run of about 120 ms would feel).
			time.Sleep(2 * time.Millisecond)
		}
		b.StopTimer()
		if v, ok, _ := mp.Value("kmirror_mirrored_bytes_total", nil); ok {
			moved = int64(v)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = e.Stop(sctx)
		cancel()
		dst.Close()
		b.StartTimer()
	}
	b.SetBytes(moved)
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
