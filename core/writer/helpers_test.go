package writer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/writer/internal/produce"
	"github.com/kmirror/kmirror/core/writer/internal/txn"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

const testTopic = "mirrored"

// The request versions the writer pins: transaction protocol v1 (see the
// package doc). Produce v12 would add partitions to transactions implicitly
// and EndTxn v5 would bump the epoch after every transaction (KIP-890 part 2).
const (
	produceVersion            int16 = produce.Version
	initProducerIDVersion     int16 = txn.InitProducerIDVersion
	addPartitionsToTxnVersion int16 = txn.AddPartitionsToTxnVersion
	endTxnVersion             int16 = txn.EndTxnVersion
)

// newCluster starts the package's default cluster, closed with the test:
// three brokers and testTopic with one partition; opts apply after these.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	return kfaketest.NewCluster(t, append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(1, testTopic)}, opts...)...)
}

// newWriter returns a Writer over a new client of c, closed with the test.
func newWriter(t *testing.T, c *kfake.Cluster, opts ...Option) *Writer {
	t.Helper()
	w, err := New(kfaketest.NewClient(t, c), append([]Option{MirrorName("test"), RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

// recorder is an OnTxnWriter hook that keeps what it was given, as a state
// store would.
type recorder struct {
	mu    sync.Mutex
	infos []TxnWriterInfo
	fail  error
}

func (r *recorder) hook(_ context.Context, info TxnWriterInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	for i := range r.infos {
		if r.infos[i].SourceProducerID == info.SourceProducerID {
			r.infos[i] = info
			return nil
		}
	}
	r.infos = append(r.infos, info)
	return nil
}

func (r *recorder) recorded() []TxnWriterInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]TxnWriterInfo(nil), r.infos...)
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.infos)
}

func openPartition(t *testing.T, w *Writer, topic string, partition int32, r *recorder) *Partition {
	t.Helper()
	p, err := w.Partition(topic, partition, r.hook)
	if err != nil {
		t.Fatalf("Partition: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// markerBatch builds a source control batch: one marker of type ct from
// source producer srcPID at offset off.
func markerBatch(t *testing.T, off, srcPID int64, ct batch.ControlType) batch.Batch {
	t.Helper()
	b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: off, ProducerID: srcPID, ProducerEpoch: 3}, ct, 7, 1_700_000_000_000+off)
	if err != nil {
		t.Fatalf("EncodeControl: %v", err)
	}
	return b
}

func mustAppend(t *testing.T, p *Partition, b batch.Batch) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	off := b.BaseOffset()
	res, err := p.Append(ctx, b)
	if err != nil {
		t.Fatalf("Append at %d: %v", off, err)
	}
	if res.BaseOffset != off {
		t.Fatalf("Append at %d landed at %d", off, res.BaseOffset)
	}
	if b.BaseOffset() != off {
		t.Fatalf("Append did not restore the batch's base offset: %d, want %d", b.BaseOffset(), off)
	}
	return res
}

// consume reads topic/partition from the start with the isolation level
// until it has seen a record at offset last or later (or the deadline).
func consume(t *testing.T, c *kfake.Cluster, topic string, partition int32, committed bool, last int64) []*kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := kfaketest.NewClient(t, c,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s/%d (read_committed=%v): timed out before offset %d; got %d records", topic, partition, committed, last, len(out))
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		var done bool
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset >= last {
				done = true
			}
		})
		if done {
			return out
		}
	}
}

// listOffset returns the latest offset of topic/partition at an isolation
// level: the high watermark (read_uncommitted) or the last stable offset.
func listOffset(t *testing.T, cl *kgo.Client, topic string, partition int32, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: error code %d", p.ErrorCode)
	}
	return p.Offset
}

// requestLog counts the requests a kfake cluster handles, by key, and keeps
// copies of those of the keys it was asked to keep.
type requestLog struct {
	mu     sync.Mutex
	counts map[int16]int
	kept   []kmsg.Request
	keep   map[int16]bool
}

func observe(c *kfake.Cluster, keep ...int16) *requestLog {
	l := &requestLog{counts: make(map[int16]int), keep: make(map[int16]bool)}
	for _, k := range keep {
		l.keep[k] = true
	}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.counts[req.Key()]++
		if l.keep[req.Key()] {
			l.kept = append(l.kept, req)
		}
		return nil, nil, false
	})
	return l
}

func (l *requestLog) count(key int16) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[key]
}

func (l *requestLog) requests(key int16) []kmsg.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []kmsg.Request
	for _, r := range l.kept {
		if r.Key() == key {
			out = append(out, r)
		}
	}
	return out
}
