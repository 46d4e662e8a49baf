package fetcher

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// testMaxWait marks the fetch requests of the Manager under test: kgo
// consumers and producers in the tests use other values.
const (
	testMaxWait = 97 * time.Millisecond
	testBackoff = 50 * time.Millisecond
)

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "fetcher", Level: hclog.Warn, Output: tWriter{t}})
}

func newProducer(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	return kfaketest.NewClient(t, c, append([]kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)...)
}

// produce writes one batch of n records to topic/partition; record values
// name their topic, partition and sequence so that tests can compare.
func produce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partition int32, n int, valueSize int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf("%s/%d/%d/", topic, partition, time.Now().UnixNano())
		if pad := valueSize - len(v); pad > 0 {
			v += strings.Repeat("x", pad)
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s-%d: %v", topic, partition, err)
	}
}

func newManager(t *testing.T, cl *kgo.Client, opts ...Option) *Manager {
	t.Helper()
	m, err := New(cl, append([]Option{
		WithMaxWait(testMaxWait),
		WithBackoff(testBackoff),
		WithLogger(testLogger(t)),
	}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// runManager runs m until the test ends (or stop is called) and checks that
// Run returns.
func runManager(t *testing.T, m *Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return 10s after its context was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// collector drains one Queue per partition on its own goroutine (as a
// partition runner would), records every delivery, and acknowledges the
// bytes with Done unless told not to.
type collector struct {
	t  *testing.T
	m  *Manager
	wg sync.WaitGroup

	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	got   map[tp][]Fetched
	noAck map[tp]bool
}

func newCollector(t *testing.T, m *Manager) *collector {
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{t: t, m: m, ctx: ctx, cancel: cancel, got: make(map[tp][]Fetched), noAck: make(map[tp]bool)}
	t.Cleanup(func() { c.cancel(); c.wg.Wait() })
	return c
}

// add adds the partition to the Manager with a queue drained by the
// collector.
func (c *collector) add(spec PartitionSpec, ack bool) {
	c.t.Helper()
	key := tp{spec.Topic, spec.Partition}
	q := NewQueue()
	c.mu.Lock()
	c.noAck[key] = !ack
	c.mu.Unlock()
	if err := c.m.Add(spec, q); err != nil {
		c.t.Fatalf("Add(%v): %v", spec, err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			f, err := q.Next(c.ctx)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.got[key] = append(c.got[key], f)
			ack := !c.noAck[key]
			c.mu.Unlock()
			if ack {
				c.m.Done(f.Topic, f.Partition, f.Bytes())
			}
		}
	}()
}

func (c *collector) setAck(key tp, ack bool) {
	c.mu.Lock()
	c.noAck[key] = !ack
	c.mu.Unlock()
}

func (c *collector) deliveries(key tp) []Fetched {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got[key])
}

func (c *collector) batches(key tp) []batch.Batch {
	var out []batch.Batch
	for _, f := range c.deliveries(key) {
		out = append(out, f.Batches...)
	}
	return out
}

// nextOffset is the NextOffset of the last delivered batch, -1 if none.
func (c *collector) nextOffset(key tp) int64 {
	bs := c.batches(key)
	if len(bs) == 0 {
		return -1
	}
	return bs[len(bs)-1].NextOffset()
}

func (c *collector) errs(key tp) []error {
	var out []error
	for _, f := range c.deliveries(key) {
		if f.Err != nil {
			out = append(out, f.Err)
		}
	}
	return out
}

// waitDelivered waits until key's deliveries reach end (the NextOffset of
// the last batch delivered).
func (c *collector) waitDelivered(what string, key tp, end int64) {
	c.t.Helper()
	kfaketest.WaitFor(c.t, what, func() (bool, string) {
		next := c.nextOffset(key)
		return next == end, fmt.Sprintf("%s delivered up to %d, want %d", key, next, end)
	})
}

// waitError waits until a delivery of key carries an error.
func (c *collector) waitError(what string, key tp) {
	c.t.Helper()
	kfaketest.WaitFor(c.t, what, func() (bool, string) {
		return len(c.errs(key)) > 0, fmt.Sprintf("%s: no error in %d deliveries", key, len(c.deliveries(key)))
	})
}

// checkContiguous checks that bs are in offset order with no gap and no
// overlap, starting with the batch holding from, and ending at end.
func checkContiguous(t *testing.T, key tp, bs []batch.Batch, from, end int64) {
	t.Helper()
	if len(bs) == 0 {
		t.Fatalf("%s: no batch delivered", key)
	}
	if first := bs[0]; first.BaseOffset() > from || first.NextOffset() <= from {
		t.Fatalf("%s: first batch covers %d..%d, want it to hold offset %d", key, first.BaseOffset(), first.LastOffset(), from)
	}
	for i := 1; i < len(bs); i++ {
		if bs[i].BaseOffset() != bs[i-1].NextOffset() {
			t.Fatalf("%s: batch %d starts at %d, previous ends before %d (gap or duplicate)", key, i, bs[i].BaseOffset(), bs[i-1].NextOffset())
		}
	}
	if got := bs[len(bs)-1].NextOffset(); got != end {
		t.Fatalf("%s: delivered up to %d, want %d", key, got, end)
	}
}

// rawLog fetches a partition's whole log from its leader in one
// sessionless request: the bytes kfake stores.
func rawLog(t *testing.T, ctx context.Context, cl *kgo.Client, c *kfake.Cluster, key tp, from int64) []byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 30
	req.MaxWaitMillis = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = key.topic
	rt.TopicID = topicID(t, ctx, cl, key.topic)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = key.partition
	rp.FetchOffset = from
	rp.PartitionMaxBytes = 1 << 30
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(c.LeaderFor(key.topic, key.partition))))
	if err != nil {
		t.Fatalf("raw fetch of %s: %v", key, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("raw fetch of %s: %d topics in the response, want this one partition", key, len(resp.Topics))
	}
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != 0 {
		t.Fatalf("raw fetch of %s: error code %d", key, got.ErrorCode)
	}
	return got.RecordBatches
}

func topicID(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("listing topic %s: %v", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		t.Fatalf("topic %s not found: %v", topic, d.Err)
	}
	return d.ID
}

// checkSameAsSource compares the delivered batches of key with the source:
// byte for byte with kfake's log, and record by record (offset, key, value)
// with what a kgo consumer reads.
func checkSameAsSource(t *testing.T, ctx context.Context, cl *kgo.Client, c *kfake.Cluster, key tp, bs []batch.Batch) {
	t.Helper()
	var got []byte
	for _, b := range bs {
		got = append(got, b...)
	}
	if want := rawLog(t, ctx, cl, c, key, bs[0].BaseOffset()); !bytes.Equal(got, want) {
		t.Fatalf("%s: delivered %d bytes differ from the %d bytes the source stores", key, len(got), len(want))
	}

	var recs []batch.Record
	for _, b := range bs {
		r, err := b.Records()
		if err != nil {
			t.Fatalf("%s: decoding a delivered batch: %v", key, err)
		}
		recs = append(recs, r...)
	}
	consumer := kfaketest.NewClient(t, c,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{key.topic: {key.partition: kgo.NewOffset().At(bs[0].BaseOffset())}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	var consumed []*kgo.Record
	for len(consumed) < len(recs) {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: consumed %d of %d records: %v", key, len(consumed), len(recs), err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("%s: consumer: %v", key, err) })
		consumed = append(consumed, fs.Records()...)
	}
	consumer.Close()
	if len(consumed) != len(recs) {
		t.Fatalf("%s: consumer read %d records, fetcher delivered %d", key, len(consumed), len(recs))
	}
	for i, r := range recs {
		k := consumed[i]
		if r.Offset != k.Offset || !bytes.Equal(r.Key, k.Key) || !bytes.Equal(r.Value, k.Value) {
			t.Fatalf("%s: record %d: fetcher has offset %d key %q value %q, consumer has offset %d key %q value %q",
				key, i, r.Offset, r.Key, r.Value, k.Offset, k.Key, k.Value)
		}
	}
}

// fetchLog records the Manager's fetch requests (those with testMaxWait)
// as kfake receives them.
type fetchLog struct {
	mu   sync.Mutex
	reqs []seenFetch
	ids  map[[16]byte]string
}

type seenFetch struct {
	node      int32
	version   int16
	sessionID int32
	epoch     int32
	parts     []seenPart
	forgotten []tp
}

type seenPart struct {
	key              tp
	offset           int64
	currentEpoch     int32
	lastFetchedEpoch int32
	maxBytes         int32
}

func (s seenFetch) has(key tp) (seenPart, bool) {
	for _, p := range s.parts {
		if p.key == key {
			return p, true
		}
	}
	return seenPart{}, false
}

func (s seenFetch) forgets(key tp) bool { return slices.Contains(s.forgotten, key) }

// observeFetches installs the observer; topic ids of the named topics are
// mapped back to names.
func observeFetches(t *testing.T, ctx context.Context, c *kfake.Cluster, cl *kgo.Client, topics ...string) *fetchLog {
	l := &fetchLog{ids: make(map[[16]byte]string)}
	for _, topic := range topics {
		l.ids[topicID(t, ctx, cl, topic)] = topic
	}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if req.MaxWaitMillis != int32(testMaxWait.Milliseconds()) {
			return nil, nil, false
		}
		s := seenFetch{node: c.CurrentNode(), version: req.Version, sessionID: req.SessionID, epoch: req.SessionEpoch}
		l.mu.Lock()
		defer l.mu.Unlock()
		name := func(topic string, id [16]byte) string {
			if req.Version >= 13 {
				return l.ids[id]
			}
			return topic
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				s.parts = append(s.parts, seenPart{
					key:              tp{name(rt.Topic, rt.TopicID), rp.Partition},
					offset:           rp.FetchOffset,
					currentEpoch:     rp.CurrentLeaderEpoch,
					lastFetchedEpoch: rp.LastFetchedEpoch,
					maxBytes:         rp.PartitionMaxBytes,
				})
			}
		}
		for _, ft := range req.ForgottenTopics {
			for _, p := range ft.Partitions {
				s.forgotten = append(s.forgotten, tp{name(ft.Topic, ft.TopicID), p})
			}
		}
		l.reqs = append(l.reqs, s)
		return nil, nil, false
	})
	return l
}

func (l *fetchLog) all() []seenFetch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// summary describes the requests logged from index from on, for a timeout
// message.
func (l *fetchLog) summary(from int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reqs) <= from {
		return fmt.Sprintf("no fetch request after the first %d", from)
	}
	r := l.reqs[len(l.reqs)-1]
	return fmt.Sprintf("%d fetch requests after the first %d; the last: session %d epoch %d, partitions %v, forgotten %v",
		len(l.reqs)-from, from, r.sessionID, r.epoch, r.parts, r.forgotten)
}

func (l *fetchLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// fetcherGoroutines lists the goroutines running this package's session or
// placement code.
func fetcherGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "core/fetcher/internal/session.(*Broker).") || strings.Contains(g, "core/fetcher.(*Manager).place") {
			out = append(out, g)
		}
	}
	return out
}

// tp names a partition in the tests.
type tp struct {
	topic     string
	partition int32
}

func (k tp) String() string { return fmt.Sprintf("%s-%d", k.topic, k.partition) }
