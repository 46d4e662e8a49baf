package load

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/report"
	"github.com/kmirror/kmirror/bench/internal/scenario"
	"github.com/kmirror/kmirror/bench/internal/stats"
)

// LatencyPhase produces rate records/s of size bytes to topic on the source
// for d, each value starting with its send time (Unix nanoseconds), and reads
// them on the destination from the offsets in from, timing each record from
// its send to its arrival. It waits up to grace after the last send for the
// stragglers.
func LatencyPhase(ctx context.Context, srcOpts, dstOpts []kgo.Opt, topic string, from map[int32]int64, sc scenario.Scenario, grace time.Duration) (*report.Latency, error) {
	codec := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}[sc.Codec]
	prod, err := kgo.NewClient(append(srcOpts,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(scenario.DefaultLinger),
		kgo.ProducerBatchMaxBytes(scenario.DefaultBatch),
		kgo.ProducerBatchCompression(codec),
	)...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	offsets := map[int32]kgo.Offset{}
	for p, o := range from {
		offsets[p] = kgo.NewOffset().At(o)
	}
	cons, err := kgo.NewClient(append(dstOpts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(time.Second),
	)...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()

	want := int64(sc.LatencyRate) * int64(sc.LatencyFor.Seconds())
	samples := make([]time.Duration, 0, want)
	var received atomic.Int64
	cctx, stopConsumer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sent atomic.Int64
	var target atomic.Int64 // set once the last record is sent
	var produceErr atomic.Value
	allIn := make(chan struct{})
	wg.Go(func() {
		defer close(allIn)
		for cctx.Err() == nil {
			if t := target.Load(); t > 0 && received.Load() >= t {
				return
			}
			fs := cons.PollFetches(cctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) < 8 {
					return
				}
				at := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				samples = append(samples, now.Sub(at))
				received.Add(1)
			})
		}
	})

	filler := make([]byte, sc.RecordSize)
	for i := range filler {
		filler[i] = 'a' + byte(i%26)
	}
	const tick = 10 * time.Millisecond
	perTick := float64(sc.LatencyRate) * tick.Seconds()
	began := time.Now()
	t := time.NewTicker(tick)
	var due float64
	for time.Since(began) < sc.LatencyFor && ctx.Err() == nil {
		<-t.C
		due += perTick
		for ; due >= 1; due-- {
			v := make([]byte, sc.RecordSize)
			copy(v, filler)
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			sent.Add(1)
			prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.CompareAndSwap(nil, err)
				}
			})
		}
	}
	t.Stop()
	if err := prod.Flush(ctx); err != nil {
		stopConsumer()
		wg.Wait()
		return nil, err
	}
	target.Store(sent.Load())
	if received.Load() < sent.Load() {
		select {
		case <-allIn:
		case <-time.After(grace):
		case <-ctx.Done():
		}
	}
	stopConsumer()
	wg.Wait()
	if v := produceErr.Load(); v != nil {
		return nil, fmt.Errorf("latency producer: %w", v.(error))
	}
	q := stats.Quantiles(samples, 0.5, 0.99, 0.999, 1)
	return &report.Latency{
		Rate: sc.LatencyRate, Sent: sent.Load(), Received: received.Load(),
		P50: q[0], P99: q[1], P999: q[2], Max: q[3], Duration: sc.LatencyFor,
		ProducerSettings: fmt.Sprintf("franz-go producer, linger 5 ms, batches up to 16 KiB, %s", sc.Codec),
	}, nil
}
