package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient/kclienttest"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The engine's tests share these helpers. Clusters, clients, contexts and
// waits come from internal/kfaketest; a test that checks that something
// does not happen waits for a witness (fixture.witness) or for the rounds
// it counts, not for a guessed time.

// fixture is a source kfake cluster of three brokers and a destination of
// one, with a client of each, all closed when the test ends.
type fixture struct {
	src, dst     *kfake.Cluster
	srcCl, dstCl *kgo.Client
}

// freshMetadata makes a client ask for metadata again after 10 ms: the
// admin requests the tests poll with (ListTopics, ListEndOffsets) answer
// from metadata franz-go otherwise keeps for MetadataMinAge (5 s), so a
// poll would see a new topic only seconds after it appeared.
var freshMetadata = kgo.MetadataMinAge(10 * time.Millisecond)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{src: kfaketest.NewCluster(t, kfake.NumBrokers(3)), dst: kfaketest.NewCluster(t)}
	f.srcCl, f.dstCl = kfaketest.NewClient(t, f.src, freshMetadata), kfaketest.NewClient(t, f.dst, freshMetadata)
	return f
}

// config is a configuration of one mirror, test, from the fixture's source
// to its destination, of the topics include matches; extra lines follow
// (indented by four spaces, they are keys of the mirror).
func (f *fixture) config(t testing.TB, include string, extra ...string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
mirror.metadata.refresh.interval.ms: 500
mirror.failed.retry.initial.backoff.ms: 100
mirror.failed.retry.max.backoff.ms: 500
destination:
  bootstrap.servers: %s
state:
  dir: /unused
mirrors:
  - name: test
    bootstrap.servers: %s
    mirror.topics.include: %q
%s`, strings.Join(f.dst.ListenAddrs(), ","), strings.Join(f.src.ListenAddrs(), ","), include, strings.Join(extra, "\n"))), "yaml", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startEngine starts an engine of cfg on store, stopped when the test ends
// (with, in verbose mode, a dump of the goroutines first if the test
// failed).
func startEngine(t testing.TB, cfg *config.Config, store statestore.Store) *Engine {
	t.Helper()
	return startEngineWith(t, cfg, store, nil)
}

// startEngineWith is startEngine with the engine's options changed by opt
// first (nil: none).
func startEngineWith(t testing.TB, cfg *config.Config, store statestore.Store, opt func(*Options)) *Engine {
	t.Helper()
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	if testing.Verbose() {
		logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug})
	}
	opts := Options{Store: store, Logger: logger, Metrics: mp, Credentials: kclienttest.KeysCredentials}
	if opt != nil {
		opt(&opts)
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopEngine(t, e) })
	t.Cleanup(func() { // runs before the stop: the goroutines as they were
		if t.Failed() && testing.Verbose() {
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
	})
	return e
}

func stopEngine(t testing.TB, e *Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Errorf("stopping the engine: %v", err)
	}
}

// createTopic creates topic on the source.
func (f *fixture) createTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	kfaketest.CreateTopic(t, f.srcCl, topic, partitions, nil)
}

// produce writes n plain records and, every tenth, a transaction over the
// topic's partitions, aborting every third transaction.
func (f *fixture) produce(t *testing.T, topic string, n int, txid string) {
	t.Helper()
	ctx := kfaketest.Context(t)
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic(topic))
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txid))
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if i%7 == 0 {
			r.Value = nil
		}
		if err := plain.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 3; j++ {
				if err := txn.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "t%d-%d", i, j), Value: []byte("txn")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(i%30 != 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// trimmedTopic creates a one-partition source topic with configs (nil for
// none), writes ten batches of 50 keyed records and moves its log start to
// at.
func (f *fixture) trimmedTopic(t *testing.T, topic string, configs map[string]*string, at int64) {
	t.Helper()
	kfaketest.CreateTopic(t, f.srcCl, topic, 1, configs)
	cl := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(50*time.Millisecond))
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: []byte("v")})
		}
		if err := cl.ProduceSync(kfaketest.Context(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
	resp, err := kadm.NewClient(f.srcCl).DeleteRecords(kfaketest.Context(t), os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// mirrored reports whether every partition of topic is MIRRORING and
// caught up with the source's end offset, with what it saw.
func (f *fixture) mirrored(e *Engine, topic string, partitions int32) (bool, string) {
	ends, err := kadm.NewClient(f.srcCl).ListEndOffsets(context.Background(), topic)
	ok := err == nil
	var state []string
	for _, m := range e.Status().Mirrors {
		for _, p := range m.Partitions {
			if p.Topic != topic {
				continue
			}
			o, _ := ends.Lookup(topic, p.Partition)
			state = append(state, fmt.Sprintf("%d:%s %d/%d %s", p.Partition, p.State, p.LastMirroredOffset+1, o.Offset, p.LastError))
			if p.State != "MIRRORING" || p.LastMirroredOffset+1 != o.Offset {
				ok = false
			}
		}
	}
	return ok && len(state) == int(partitions), fmt.Sprint(state)
}

// waitMirrored waits until every partition of topic is MIRRORING and caught
// up with the source's end offset.
func (f *fixture) waitMirrored(t *testing.T, e *Engine, topic string, partitions int32) {
	t.Helper()
	kfaketest.WaitFor(t, fmt.Sprintf("%d partitions of %s mirrored", partitions, topic), func() (bool, string) {
		return f.mirrored(e, topic, partitions)
	})
}

// witness creates topic on the source with one partition led by each
// source broker, writes a record to each partition and waits until e has
// mirrored them all. Once it returns, a topic sync round of e's mirror ran
// after the call began (the topic is new), and every source broker's fetch
// session delivered records written after anything written before the call.
// A test that checks that something did not happen (a paused partition
// copied nothing, a failed-over topic was not expanded) calls it instead of
// sleeping for a guessed time; the mirror's mirror.topics.include must match
// topic.
func (f *fixture) witness(t *testing.T, e *Engine, topic string) {
	t.Helper()
	brokers, err := kadm.NewClient(f.srcCl).ListBrokers(kfaketest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	f.createTopic(t, topic, int32(len(brokers)))
	cl := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p, b := range brokers {
		if err := f.src.MoveTopicPartition(topic, int32(p), b.NodeID); err != nil {
			t.Fatalf("moving %s[%d] to broker %d: %v", topic, p, b.NodeID, err)
		}
	}
	for p := range brokers {
		if err := cl.ProduceSync(kfaketest.Context(t), &kgo.Record{Partition: int32(p), Value: []byte("witness")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	kfaketest.WaitFor(t, "the witness topic "+topic+" mirrored", func() (bool, string) {
		return f.mirrored(e, topic, int32(len(brokers)))
	})
}

func (f *fixture) verify(t *testing.T, topic string, partitions int32) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		_, diff, err := verify.Partition(kfaketest.Context(t), f.srcCl, f.dstCl, topic, p)
		if err != nil {
			t.Fatalf("verifying %s[%d]: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs: %s", topic, p, diff)
		}
	}
}

// partitionStatus returns the status of topic/p in e, if e runs it.
func partitionStatus(e *Engine, topic string, p int32) (admin.PartitionStatus, bool) {
	for _, m := range e.Status().Mirrors {
		for _, ps := range m.Partitions {
			if ps.Topic == topic && ps.Partition == p {
				return ps, true
			}
		}
	}
	return admin.PartitionStatus{}, false
}

// waitState waits until topic/partition reaches state.
func waitState(t *testing.T, e *Engine, topic string, p int32, state string) admin.PartitionStatus {
	t.Helper()
	var last admin.PartitionStatus
	kfaketest.WaitFor(t, fmt.Sprintf("%s[%d] %s", topic, p, state), func() (bool, string) {
		ps, ok := partitionStatus(e, topic, p)
		if ok {
			last = ps
		}
		return ok && ps.State == state, fmt.Sprintf("%+v", last)
	})
	return last
}

// states lists the states of topic's partitions: "0:MIRRORING 1:PAUSED".
func states(e *Engine, topic string) string {
	var out []string
	for _, m := range e.Status().Mirrors {
		for _, p := range m.Partitions {
			if p.Topic == topic {
				out = append(out, fmt.Sprintf("%d:%s", p.Partition, p.State))
			}
		}
	}
	return strings.Join(out, " ")
}

// mirrorStatus is the status of e's only mirror (empty if it has none or
// several).
func mirrorStatus(e *Engine) admin.MirrorStatus {
	if st := e.Status(); len(st.Mirrors) == 1 {
		return st.Mirrors[0]
	}
	return admin.MirrorStatus{}
}

// endOffset returns the high watermark of topic/p.
func endOffset(t *testing.T, cl *kgo.Client, topic string, p int32) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(kfaketest.Context(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, p)
	return o.Offset
}

// listOffset returns the latest offset of partition 0: the last stable
// offset with committed, else the high watermark.
func listOffset(t *testing.T, cl *kgo.Client, topic string, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(kfaketest.Context(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// partitionCount returns how many partitions topic has on cl's cluster (0
// if it does not exist).
func partitionCount(t *testing.T, cl *kgo.Client, topic string) int32 {
	t.Helper()
	d, err := kadm.NewClient(cl).ListTopics(kfaketest.Context(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if td, ok := d[topic]; ok && td.Err == nil {
		return int32(len(td.Partitions))
	}
	return 0
}

// metricValue returns a sample of a metric of e, 0 when it has none yet.
func metricValue(t *testing.T, e *Engine, name string, labels map[string]string) float64 {
	t.Helper()
	v, _, err := e.opts.Metrics.Value(name, labels)
	if err != nil {
		t.Fatalf("%s%v: %v", name, labels, err)
	}
	return v
}

// readCounter is a state store that counts the reads (Get) of one key: a
// daemon's metadata-sync lease is read at every attempt to take or renew
// it, so its reads tell how many attempts the daemon made.
type readCounter struct {
	statestore.Store
	key string
	mu  sync.Mutex
	n   int
}

func (s *readCounter) Get(ctx context.Context, key string) (statestore.Entry, error) {
	if key == s.key {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return s.Store.Get(ctx, key)
}

func (s *readCounter) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
