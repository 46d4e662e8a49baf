package mirror

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// requestCounter counts the requests of some kinds that reach a kfake
// cluster (and the partitions they name, for ListOffsets).
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
}

func countRequests(c *kfake.Cluster, keys ...kmsg.Key) *requestCounter {
	rc := &requestCounter{counts: map[int16]int{}}
	for _, k := range keys {
		c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
			rc.mu.Lock()
			rc.counts[int16(k)]++
			rc.mu.Unlock()
			return nil, nil, false // observed only: the cluster answers as usual
		})
	}
	return rc
}

func (rc *requestCounter) get(k kmsg.Key) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.counts[int16(k)]
}

func (rc *requestCounter) String() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var parts []string
	for _, k := range []kmsg.Key{kmsg.ListOffsets, kmsg.Metadata, kmsg.DescribeProducers, kmsg.DescribeTransactions} {
		parts = append(parts, fmt.Sprintf("%s=%d", k.Name(), rc.counts[int16(k)]))
	}
	return strings.Join(parts, " ")
}

// startupFixture is a source topic with many partitions, each holding a few
// records, and an engine configured to mirror it into an empty destination.
type startupFixture struct {
	src, dst   *kfake.Cluster
	topic      string
	partitions int32
	ends       kadm.ListedOffsets
	cfg        *config.Config
}

func newStartupFixture(tb testing.TB, topic string, partitions int32, perPartition int) *startupFixture {
	tb.Helper()
	src := kfaketest.NewCluster(tb)
	cl := kfaketest.NewClient(tb, src, kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(10*time.Millisecond))
	defer cl.Close()
	ctx := kfaketest.Context(tb)
	kfaketest.CreateTopic(tb, cl, topic, partitions, nil)
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-r%d", p, i)}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	return &startupFixture{src: src, topic: topic, partitions: partitions, ends: ends}
}

// engine starts a fresh destination (closed when the test ends, or
// earlier by the caller) and an engine mirroring the topic into it, without
// starting it.
func (f *startupFixture) engine(tb testing.TB, store statestore.Store) *Engine {
	tb.Helper()
	dst := kfaketest.NewCluster(tb)
	f.dst = dst
	var err error
	f.cfg, err = config.Parse([]byte(fmt.Sprintf("mirror.metadata.refresh.interval.ms: 60000\ndestination:\n  bootstrap.servers: %s\nstate:\n  dir: /unused\nmirrors:\n  - name: startup\n    bootstrap.servers: %s\n    mirror.topics.include: %s\n",
		strings.Join(dst.ListenAddrs(), ","), strings.Join(f.src.ListenAddrs(), ","), f.topic)), "yaml", nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	mp, _ := metrics.New()
	e, err := New(Options{Store: store, Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard}), Metrics: mp})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// caughtUp reports how many partitions mirrored every record of the source
// and are MIRRORING, with a description of one that has not.
func (f *startupFixture) caughtUp(e *Engine) (int, string) {
	done, state := 0, "no partition yet"
	for _, m := range e.Status().Mirrors {
		for _, p := range m.Partitions {
			o, ok := f.ends.Lookup(f.topic, p.Partition)
			if ok && p.State == "MIRRORING" && p.Mode == "preserve" && p.LastMirroredOffset+1 == o.Offset {
				done++
			} else {
				state = fmt.Sprintf("partition %d: %s %s mode, last mirrored %d, source end %d, %s", p.Partition, p.State, p.Mode, p.LastMirroredOffset, o.Offset, p.LastError)
			}
		}
	}
	return done, state
}

func (f *startupFixture) waitCaughtUp(tb testing.TB, e *Engine, timeout time.Duration) {
	tb.Helper()
	kfaketest.WaitForWithin(tb, timeout, fmt.Sprintf("%d partitions caught up", f.partitions), func() (bool, string) {
		done, state := f.caughtUp(e)
		return done == int(f.partitions), fmt.Sprintf("%d caught up; %s", done, state)
	})
}

// BenchmarkMirrorStartManyPartitionsKfake measures the start-up of a mirror
// of one topic with 2,000 partitions of 10 records each, between two
// in-process kfake clusters, until every partition is MIRRORING and caught
// up (issue #11: per-partition fixed costs at start). Each iteration starts
// a fresh engine into a fresh destination.
func BenchmarkMirrorStartManyPartitionsKfake(b *testing.B) {
	const partitions, perPartition = 2000, 10
	f := newStartupFixture(b, "many", partitions, perPartition)
	ctx := context.Background()
	kinds := []kmsg.Key{kmsg.ListOffsets, kmsg.Metadata, kmsg.DescribeProducers}
	srcCount := countRequests(f.src, kinds...)
	var requests int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := f.engine(b, memstore.New())
		dstCount := countRequests(f.dst, kinds...)
		before := 0
		for _, k := range kinds {
			before += srcCount.get(k)
		}
		b.StartTimer()
		if err := e.Start(ctx, f.cfg); err != nil {
			b.Fatal(err)
		}
		f.waitCaughtUp(b, e, 10*time.Minute)
		b.StopTimer()
		for _, k := range kinds {
			requests += srcCount.get(k) + dstCount.get(k)
		}
		requests -= before
		b.Logf("source: %s; destination: %s", srcCount, dstCount)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = e.Stop(sctx)
		cancel()
		f.dst.Close()
		b.StartTimer()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/start")
	b.ReportMetric(float64(requests)/float64(b.N), "offset+metadata+producer-requests/start")
}

// TestStartManyPartitionsAsksPerTopicNotPerPartition starts a mirror of one
// topic with 1,000 partitions, then a second engine on the same state
// (every partition resumes: DescribeProducers, the destination proven),
// and counts the ListOffsets, Metadata and DescribeProducers requests that
// reach both clusters: preparation batches them per topic and broker, so
// they stay a small number however many partitions the topic has, and every
// partition mirrors every record at its own offsets.
func TestStartManyPartitionsAsksPerTopicNotPerPartition(t *testing.T) {
	t.Parallel()
	const partitions, perPartition = 1000, 3
	// Per start, a batch per preparation step and a few for the partitions
	// that do not start together; one request per partition would be
	// thousands.
	const limit = 60
	f := newStartupFixture(t, "wide", partitions, perPartition)
	kinds := []kmsg.Key{kmsg.ListOffsets, kmsg.Metadata, kmsg.DescribeProducers}
	store := memstore.New()
	run := func(what string, e *Engine) {
		t.Helper()
		src := countRequests(f.src, kinds...)
		dst := countRequests(f.dst, kinds...)
		ctx := context.Background()
		if err := e.Start(ctx, f.cfg); err != nil {
			t.Fatal(err)
		}
		f.waitCaughtUp(t, e, 2*time.Minute)
		t.Logf("%s: source %s; destination %s", what, src, dst)
		for _, k := range kinds {
			if n := src.get(k) + dst.get(k); n > limit {
				t.Errorf("%s: %d %s requests for %d partitions of one topic (source %s; destination %s); want at most %d", what, n, k.Name(), partitions, src, dst, limit)
			}
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := e.Stop(sctx); err != nil {
			t.Fatal(err)
		}
	}
	e := f.engine(t, store)
	run("first start", e)

	// The same destination, a new engine on the same records: every
	// partition is MIRRORING and resumes from the destination.
	mp, _ := metrics.New()
	e2, err := New(Options{Store: store, Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard}), Metrics: mp})
	if err != nil {
		t.Fatal(err)
	}
	run("restart", e2)

	// Offsets kept: partition p's destination log is its source log.
	ctx := context.Background()
	dcl := kfaketest.NewClient(t, f.dst)
	ends, err := kadm.NewClient(dcl).ListEndOffsets(ctx, f.topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if want, _ := f.ends.Lookup(f.topic, o.Partition); o.Err != nil || o.Offset != want.Offset {
			t.Errorf("destination partition %d ends at %d (%v), source at %d", o.Partition, o.Offset, o.Err, want.Offset)
		}
	})
	if len(ends[f.topic]) != partitions {
		t.Errorf("destination has %d partitions, want %d", len(ends[f.topic]), partitions)
	}
}
