package kafka

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// cluster is the real Apache Kafka broker the tests share, each test on
// topics of its own.
var cluster *kafkatest.Cluster

// TestMain starts one real broker (e2e/kafkatest: the Kafka jars that
// scripts/kafka/fetch.sh resolves, Java 17+). Without them the package
// fails, saying what is missing: nothing is skipped.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := kafkatest.Start(ctx, kafkatest.Options{Name: "statestore",
		// SASL and SSL listeners for TestSASL and TestTLS.
		SASL: &kafkatest.SASLOptions{Users: map[string]string{saslUser: saslPassword}},
		TLS:  &kafkatest.TLSOptions{},
		// The log cleaner looks for work often, so that
		// TestReopenAfterCompaction sees it run within seconds.
		BrokerConfig: map[string]string{"log.cleaner.backoff.ms": "100"}})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "the Kafka state store's tests need a real Kafka broker (scripts/install-deps.sh installs Java; scripts/kafka/fetch.sh the jars): %v\n", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Close()
	os.Exit(code)
}

var topicSeq atomic.Int64

// The SASL user of the test cluster.
const saslUser, saslPassword = "kmirror", "state-store-pw"

// config is a configuration on a topic of t's own: 3 partitions, one
// replica (the test cluster has one broker).
func config(t *testing.T) Config {
	c := DefaultConfig()
	c.Brokers = cluster.Bootstrap(kafkatest.Plaintext)
	c.Topic = fmt.Sprintf("state-%d-%s", topicSeq.Add(1), strings.NewReplacer("/", "_", "#", "_").Replace(t.Name()))
	if len(c.Topic) > 200 {
		c.Topic = c.Topic[:200]
	}
	c.Partitions = 3
	c.ReplicationFactor = 1
	return c
}

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func admin(t *testing.T) *kadm.Client {
	t.Helper()
	adm, err := cluster.Admin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Store {
		return open(t, config(t))
	})
}

// TestOpenCreatesACompactedTopic: a missing topic is created with the
// configured partitions and replication factor, compacted, with
// min.insync.replicas and max.message.bytes set.
func TestOpenCreatesACompactedTopic(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	open(t, cfg)
	adm := admin(t)
	details, err := adm.ListTopics(t.Context(), cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	d := details[cfg.Topic]
	if len(d.Partitions) != 3 || d.Partitions.NumReplicas() != 1 {
		t.Fatalf("topic has %d partitions of %d replicas, want 3 of 1", len(d.Partitions), d.Partitions.NumReplicas())
	}
	rcs, err := adm.DescribeTopicConfigs(t.Context(), cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(cfg.Topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "1", "unclean.leader.election.enable": "false", "max.message.bytes": "8388608"}
	for _, c := range rc.Configs {
		if w, ok := want[c.Key]; ok {
			if c.Value == nil || *c.Value != w {
				t.Errorf("%s = %v, want %s", c.Key, c.Value, w)
			}
			delete(want, c.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("configs not described: %v", want)
	}
	if got := minInsyncReplicas(3); got != 2 {
		t.Errorf("min.insync.replicas for 3 replicas = %d, want 2", got)
	}
}

// TestOpenRefusesATopicOfTheWrongShape: an existing topic that is not
// compacted, or has another partition count, is refused with an error
// naming the setting; a replication factor above the broker count is
// refused rather than lowered, and no topic is created.
func TestOpenRefusesATopicOfTheWrongShape(t *testing.T) {
	t.Parallel()
	adm := admin(t)
	str := func(s string) *string { return &s }

	notCompacted := config(t)
	if resp, err := adm.CreateTopic(t.Context(), 3, 1, map[string]*string{"cleanup.policy": str("delete")}, notCompacted.Topic); err != nil || resp.Err != nil {
		t.Fatal(err, resp.Err)
	}
	_, err := Open(t.Context(), notCompacted)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `cleanup.policy="delete"`) || !strings.Contains(err.Error(), notCompacted.Topic) {
		t.Errorf("Open on a topic with cleanup.policy=delete: %v; want ErrInvalidConfig naming the topic and cleanup.policy", err)
	}

	otherCount := config(t)
	if resp, err := adm.CreateTopic(t.Context(), 5, 1, map[string]*string{"cleanup.policy": str("compact")}, otherCount.Topic); err != nil || resp.Err != nil {
		t.Fatal(err, resp.Err)
	}
	_, err = Open(t.Context(), otherCount)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "5 partitions") || !strings.Contains(err.Error(), KeyPartitions+" is 3") {
		t.Errorf("Open on a topic with 5 partitions: %v; want ErrInvalidConfig naming %s", err, KeyPartitions)
	}

	tooMany := config(t)
	tooMany.ReplicationFactor = 3
	_, err = Open(t.Context(), tooMany)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), KeyReplicationFactor+" 3") || !strings.Contains(err.Error(), "1 broker") {
		t.Errorf("Open with replication factor 3 on one broker: %v; want ErrInvalidConfig naming %s and the broker count", err, KeyReplicationFactor)
	}
	details, err := adm.ListTopics(t.Context(), tooMany.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := details[tooMany.Topic]; ok && d.Err == nil {
		t.Errorf("topic %s was created with %d replicas; want none created", tooMany.Topic, d.Partitions.NumReplicas())
	}
}

// TestSASL: the store works through a SASL listener with SCRAM and a
// password file; a wrong password fails Open without showing it.
func TestSASL(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	cfg.Brokers = cluster.Bootstrap(kafkatest.SASLPlaintext)
	cfg.SecurityProtocol, cfg.SASLMechanism, cfg.SASLUsername = "SASL_PLAINTEXT", "SCRAM-SHA-512", saslUser
	cfg.SASLPasswordFile = testpki.WriteFile(t, t.TempDir(), "pw", saslPassword+"\n")
	s := open(t, cfg)
	v, err := s.Put(t.Context(), "k", []byte("v"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(t.Context(), "k"); err != nil || e.Version != v {
		t.Fatalf("Get over SASL = %+v, %v", e, err)
	}

	bad := cfg
	bad.SASLPasswordFile = ""
	bad.SASLPassword = auth.NewSecret("wrong-pw-never-shown")
	bad.RequestTimeout = 5 * time.Second
	_, err = Open(t.Context(), bad)
	if err == nil || strings.Contains(err.Error(), "wrong-pw-never-shown") || !strings.Contains(err.Error(), "check sasl.username and the password") {
		t.Fatalf("Open with a wrong password: %v; want an error saying to check the credentials, without the password", err)
	}
	t.Logf("wrong password: %v", err)
}

// TestTLS: the store works through a TLS listener whose CA it is given,
// and refuses brokers whose certificate it cannot verify.
func TestTLS(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	cfg.Brokers = cluster.Bootstrap(kafkatest.SSL)
	cfg.SecurityProtocol, cfg.CAFile = "SSL", cluster.CAFile()
	s := open(t, cfg)
	if _, err := s.Put(t.Context(), "k", []byte("v"), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	untrusted := cfg
	untrusted.CAFile = ""
	untrusted.RequestTimeout = 3 * time.Second
	if _, err := Open(t.Context(), untrusted); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Open without the brokers' CA: %v; want a certificate error", err)
	}
}

// TestReopenReadsBackState: a store opened on a topic that holds state
// reads it all back at Open, with the same versions, deleted keys absent.
func TestReopenReadsBackState(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	s := open(t, cfg)
	want := map[string]int64{}
	for i := range 20 {
		key := statestore.PartitionKey("m", "t", int32(i))
		v, err := s.Put(t.Context(), key, fmt.Appendf(nil, "state %d", i), statestore.Absent)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // written twice
			if v, err = s.Put(t.Context(), key, fmt.Appendf(nil, "state %d", i), v); err != nil {
				t.Fatal(err)
			}
		}
		want[key] = v
	}
	gone := statestore.PartitionKey("m", "t", 3)
	if err := s.Delete(t.Context(), gone, want[gone]); err != nil {
		t.Fatal(err)
	}
	delete(want, gone)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	again := open(t, cfg)
	// Straight from memory: what Open read.
	got := again.log.list(func(string) bool { return true })
	if len(got) != len(want) {
		t.Fatalf("reopened store holds %d keys, want %d", len(got), len(want))
	}
	for _, e := range got {
		var i int
		fmt.Sscanf(e.Key, "mirrors/m/partitions/t/%d", &i)
		if want[e.Key] != e.Version || string(e.Value) != fmt.Sprintf("state %d", i) {
			t.Errorf("%s = %q v%d, want v%d", e.Key, e.Value, e.Version, want[e.Key])
		}
	}
	if _, err := again.Get(t.Context(), gone); !errors.Is(err, statestore.ErrNotFound) {
		t.Errorf("deleted key after reopen: %v, want ErrNotFound", err)
	}
	// A re-created key gets a version above every earlier one.
	v, err := again.Put(t.Context(), gone, []byte("back"), statestore.Absent)
	if err != nil || v <= 0 {
		t.Fatalf("re-create after reopen: v%d, %v", v, err)
	}
}

// TestReopenAfterCompaction: once the log cleaner has compacted the topic
// (old values, transaction markers and tombstones removed, leaving gaps
// in the offsets), a store opened on it reads back exactly the state: the
// last value of each key at its version, deleted keys absent; and it
// writes on.
func TestReopenAfterCompaction(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	cfg.Partitions = 1
	str := func(s string) *string { return &s }
	resp, err := admin(t).CreateTopic(t.Context(), 1, 1, map[string]*string{
		"cleanup.policy":            str("compact"),
		"segment.bytes":             str("1048576"),
		"min.cleanable.dirty.ratio": str("0.01"),
		"min.compaction.lag.ms":     str("0"),
		"delete.retention.ms":       str("0"),
	}, cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v %s", cfg.Topic, err, resp.ErrMessage)
	}
	s := open(t, cfg)
	keys := []string{"mirrors/m/offsetmaps/t/0", "mirrors/m/offsetmaps/t/1", "mirrors/m/offsetmaps/t/2"}
	want := map[string]statestore.Entry{}
	value := make([]byte, 8<<10)
	written := 0
	for range 150 {
		for _, k := range keys {
			rand.Read(value) // incompressible, so that the segments fill
			v, err := s.Put(t.Context(), k, value, statestore.AnyVersion)
			if err != nil {
				t.Fatal(err)
			}
			want[k] = statestore.Entry{Key: k, Value: append([]byte{}, value...), Version: v}
			written++
		}
	}
	gone := keys[2]
	if err := s.Delete(t.Context(), gone, statestore.AnyVersion); err != nil {
		t.Fatal(err)
	}
	delete(want, gone)
	// A few small writes roll the last large segment, so the cleaner
	// may take it too.
	for i := range 3 {
		k := fmt.Sprintf("mirrors/m/partitions/t/%d", i)
		v, err := s.Put(t.Context(), k, []byte("small"), statestore.Absent)
		if err != nil {
			t.Fatal(err)
		}
		want[k] = statestore.Entry{Key: k, Value: []byte("small"), Version: v}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := countRecords(t, cfg.Topic, 0, false)
		if n < written/2 {
			t.Logf("%d records written, %d left after compaction", written+4, n)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records still there after 60s: the log cleaner did not run", n, written+4)
		}
		time.Sleep(200 * time.Millisecond) // polling the condition: the cleaner compacted the log
	}

	again := open(t, cfg)
	got, err := again.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("after compaction the store holds %v, want %d keys", keysOf(got), len(want))
	}
	for _, e := range got {
		w := want[e.Key]
		if e.Version != w.Version || string(e.Value) != string(w.Value) {
			t.Fatalf("%s after compaction: v%d (%d bytes), want v%d (%d bytes)", e.Key, e.Version, len(e.Value), w.Version, len(w.Value))
		}
	}
	if _, err := again.Put(t.Context(), keys[0], []byte("after"), want[keys[0]].Version); err != nil {
		t.Fatalf("write after compaction: %v", err)
	}
	if _, err := again.Put(t.Context(), gone, []byte("back"), statestore.Absent); err != nil {
		t.Fatalf("re-create of a key whose tombstone was compacted away: %v", err)
	}
}

func keysOf(es []statestore.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

// TestSeveralClientsOneWinsEachRound: three daemons (three clients of the
// same topic) race a compare-and-set on the same keys; each round exactly
// one wins, the losers see ErrVersionMismatch, and every client then reads
// the winner's write.
func TestSeveralClientsOneWinsEachRound(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	clients := []*Store{open(t, cfg), open(t, cfg), open(t, cfg)}
	keys := []string{statestore.PartitionKey("m", "t", 0), statestore.LeaseKey("m", "metadata-sync")}
	for _, key := range keys {
		expect := statestore.Absent
		for round := range 10 {
			errs := make([]error, len(clients))
			versions := make([]int64, len(clients))
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Go(func() {
					versions[i], errs[i] = c.Put(t.Context(), key, fmt.Appendf(nil, "client %d round %d", i, round), expect)
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("%s round %d: clients %d and %d both won", key, round, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, statestore.ErrVersionMismatch):
					t.Fatalf("%s round %d: client %d: %v, want ErrVersionMismatch", key, round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("%s round %d: nobody won", key, round)
			}
			if versions[winner] <= expect {
				t.Fatalf("%s round %d: version %d after %d", key, round, versions[winner], expect)
			}
			for i, c := range clients {
				e, err := c.Get(t.Context(), key)
				if err != nil || e.Version != versions[winner] || string(e.Value) != fmt.Sprintf("client %d round %d", winner, round) {
					t.Fatalf("%s round %d: client %d reads %q v%d (%v), want client %d's write v%d", key, round, i, e.Value, e.Version, err, winner, versions[winner])
				}
			}
			expect = versions[winner]
		}
	}
}

// TestSeveralClientsLeases: the generic leases hold between clients: of
// three daemons acquiring the same free lease, exactly one gets it.
func TestSeveralClientsLeases(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	clients := []*Store{open(t, cfg), open(t, cfg), open(t, cfg)}
	key := statestore.LeaseKey("m", "metadata-sync")
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			_, errs[i] = statestore.Leases(c).AcquireLease(t.Context(), key, fmt.Sprintf("daemon-%d", i), time.Minute)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("daemon-%d and daemon-%d both hold the lease", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, statestore.ErrLeaseHeld):
			t.Fatalf("daemon-%d: %v, want ErrLeaseHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody acquired the free lease")
	}
	for i, c := range clients {
		l, err := statestore.Leases(c).GetLease(t.Context(), key)
		if err != nil || l.Holder != fmt.Sprintf("daemon-%d", winner) {
			t.Fatalf("client %d reads the lease as %+v (%v), want daemon-%d", i, l, err, winner)
		}
	}
}

// keyElsewhere returns a key of another partition than key's.
func keyElsewhere(s *Store, key string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("mirrors/m/partitions/other/%d", i)
		if s.partition(k) != s.partition(key) {
			return k
		}
	}
}

// TestFencedWriterStartsOver: a writer whose transaction is open (its
// record produced, not yet committed) when another client writes is
// fenced by the brokers: its commit fails and its record is aborted. It
// starts over with a new producer and, its key unchanged, commits.
func TestFencedWriterStartsOver(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	other := open(t, cfg)
	const key = "mirrors/m/partitions/t/0"
	v, err := other.Put(t.Context(), key, []byte("start"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := keyElsewhere(other, key)
	var attempts atomic.Int32
	var otherErr error
	var during statestore.Entry
	fenced := cfg
	fenced.afterProduce = func() {
		if attempts.Add(1) == 1 {
			// Another daemon reads while this transaction is open: it
			// is not blocked, and sees the committed value only.
			if during, otherErr = other.Get(t.Context(), key); otherErr != nil {
				return
			}
			// Then it writes: its producer's start fences this one.
			_, otherErr = other.Put(t.Context(), elsewhere, []byte("other"), statestore.Absent)
		}
	}
	writer := open(t, fenced)
	nv, err := writer.Put(t.Context(), key, []byte("writer"), v)
	if otherErr != nil {
		t.Fatalf("the other client's write while the writer's transaction is open: %v", otherErr)
	}
	if string(during.Value) != "start" || during.Version != v {
		t.Fatalf("a read during the open transaction got %q v%d, want the committed %q v%d", during.Value, during.Version, "start", v)
	}
	if err != nil {
		t.Fatalf("the fenced writer's write: %v; want it to start over and succeed", err)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("the writer produced %d time(s); want 2: the brokers fenced the first attempt", n)
	}
	fresh := open(t, cfg)
	for k, want := range map[string]string{key: "writer", elsewhere: "other"} {
		if e, err := fresh.Get(t.Context(), k); err != nil || string(e.Value) != want {
			t.Fatalf("%s reads %q (%v), want %q", k, e.Value, err, want)
		}
	}
	if e, _ := fresh.Get(t.Context(), key); e.Version != nv {
		t.Fatalf("%s at v%d, want v%d", key, e.Version, nv)
	}
	// The fenced attempt's record is in the log, aborted.
	p := writer.partition(key)
	if all, committed := countRecords(t, cfg.Topic, p, false), countRecords(t, cfg.Topic, p, true); all != 3 || committed != 2 {
		t.Fatalf("partition %d holds %d records, %d committed; want 3 (start, the fenced attempt, writer), 2 committed", p, all, committed)
	}
}

// TestFencedWriterLosesToTheSameKey: a writer fenced while another client
// writes the same key reports ErrVersionMismatch; nothing of it is visible.
func TestFencedWriterLosesToTheSameKey(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	other := open(t, cfg)
	const key = "mirrors/m/partitions/t/0"
	v, err := other.Put(t.Context(), key, []byte("start"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	var otherErr error
	var nv int64
	var once sync.Once
	fenced := cfg
	fenced.afterProduce = func() {
		once.Do(func() { nv, otherErr = other.Put(t.Context(), key, []byte("other"), v) })
	}
	writer := open(t, fenced)
	_, err = writer.Put(t.Context(), key, []byte("writer"), v)
	if otherErr != nil {
		t.Fatalf("the other client's write while the writer's transaction is open: %v", otherErr)
	}
	if !errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("fenced writer: %v, want ErrVersionMismatch", err)
	}
	for _, c := range []*Store{writer, other, open(t, cfg)} {
		if e, err := c.Get(t.Context(), key); err != nil || string(e.Value) != "other" || e.Version != nv {
			t.Fatalf("key reads %q v%d (%v), want the other client's write v%d", e.Value, e.Version, err, nv)
		}
	}
	if n := countRecords(t, cfg.Topic, writer.partition(key), true); n != 2 {
		t.Fatalf("%d records read committed, want 2 (start, other)", n)
	}
}

// TestWriterFencedEveryTimeGivesUp: a writer fenced by another daemon at
// every attempt gives up with an error saying so (not a compare-and-set
// failure), and nothing of it is visible.
func TestWriterFencedEveryTimeGivesUp(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	other := open(t, cfg)
	const key = "mirrors/m/partitions/t/0"
	elsewhere := keyElsewhere(other, key)
	var attempts atomic.Int32
	fenced := cfg
	fenced.afterProduce = func() {
		attempts.Add(1)
		if _, err := other.Put(t.Context(), elsewhere, []byte("other"), statestore.AnyVersion); err != nil {
			t.Errorf("the other client's write: %v", err)
		}
	}
	writer := open(t, fenced)
	_, err := writer.Put(t.Context(), key, []byte("writer"), statestore.Absent)
	if !errors.Is(err, errFenced) || errors.Is(err, statestore.ErrVersionMismatch) || !strings.Contains(err.Error(), "fenced by another client") {
		t.Fatalf("writer fenced at every attempt: %v; want an error saying it was fenced", err)
	}
	if n := attempts.Load(); n != maxAttempts {
		t.Fatalf("%d attempts, want %d", n, maxAttempts)
	}
	t.Logf("writer fenced at every attempt: %v", err)
	if _, err := open(t, cfg).Get(t.Context(), key); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("the fenced writer's key: %v, want ErrNotFound", err)
	}
}

// cutDialer dials normally until cut, then closes every connection it made
// and refuses new ones until healed: a client cut off from the cluster.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	lose  bool
	conns []net.Conn
}

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("cut off (test)")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, c)
	return &answerLosingConn{Conn: c, d: d}, nil
}

// loseNextAnswer makes the next request written on any connection reach
// the broker and its answer be lost: the connection is closed right after
// the request is written.
func (d *cutDialer) loseNextAnswer() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lose = true
}

// answerLosingConn closes itself after writing a request when its dialer
// was told to lose the next answer.
type answerLosingConn struct {
	net.Conn
	d *cutDialer
}

func (c *answerLosingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.d.mu.Lock()
	lose := c.d.lose
	c.d.lose = false
	c.d.mu.Unlock()
	if lose {
		c.Conn.Close()
	}
	return n, err
}

func (d *cutDialer) setCut(cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	if cut {
		for _, c := range d.conns {
			c.Close()
		}
		d.conns = nil
	}
}

// TestCutOffMidWrite: a client loses its connections in the middle of a
// write, after its record is produced and before it commits. The write
// fails; another client then writes with the same expected version and
// wins; nothing of the cut write is ever visible, to either client or to a
// new one, and the cut client, reconnected, reads the other's write and
// loses a compare-and-set on the old version.
func TestCutOffMidWrite(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	d := &cutDialer{}
	cut := cfg
	cut.dial = d.dial
	var calls atomic.Int32
	cut.afterProduce = func() {
		if calls.Add(1) == 1 {
			d.setCut(true)
		}
	}
	writer, other := open(t, cut), open(t, cfg)
	writer.cfg.RequestTimeout = 2 * time.Second // the cut write fails within it
	const key = "mirrors/m/partitions/t/0"
	v, err := other.Put(t.Context(), key, []byte("start"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	_, err = writer.Put(t.Context(), key, []byte("cut"), v)
	if err == nil {
		t.Fatal("a write cut off before its commit succeeded")
	}
	if errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("cut write: %v; want a failure of the connection, not a compare-and-set", err)
	}
	t.Logf("cut write: %v", err)
	nv, err := other.Put(t.Context(), key, []byte("other"), v)
	if err != nil {
		t.Fatalf("the other client's write after the cut: %v", err)
	}
	if e, err := open(t, cfg).Get(t.Context(), key); err != nil || string(e.Value) != "other" || e.Version != nv {
		t.Fatalf("a new client reads %q v%d (%v), want the other client's write v%d", e.Value, e.Version, err, nv)
	}
	d.setCut(false)
	if e, err := writer.Get(t.Context(), key); err != nil || string(e.Value) != "other" || e.Version != nv {
		t.Fatalf("the reconnected client reads %q v%d (%v), want v%d", e.Value, e.Version, err, nv)
	}
	if _, err := writer.Put(t.Context(), key, []byte("stale"), v); !errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("the reconnected client's write with the old version: %v, want ErrVersionMismatch", err)
	}
	if _, err := writer.Put(t.Context(), key, []byte("after"), nv); err != nil {
		t.Fatalf("the reconnected client's write with the current version: %v", err)
	}
	p := writer.partition(key)
	if all, committed := countRecords(t, cfg.Topic, p, false), countRecords(t, cfg.Topic, p, true); all != 5 || committed != 3 {
		t.Fatalf("partition %d holds %d records, %d committed; want 5 (start, cut, other, stale, after), 3 committed (start, other, after): the cut write was appended and aborted", p, all, committed)
	}
}

// TestCommitAnswerLost: the answer to a write's commit is lost (the
// connection closes right after the request is written). The write
// learns whether the commit happened before it decides again: it reports
// success exactly when the record is committed, and never commits it twice.
func TestCommitAnswerLost(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	d := &cutDialer{}
	lossy := cfg
	lossy.dial = d.dial
	var commits atomic.Int32
	lossy.beforeCommit = func() {
		if commits.Add(1) == 1 {
			d.loseNextAnswer()
		}
	}
	writer := open(t, lossy)
	const key = "mirrors/m/partitions/t/0"
	v, err := writer.Put(t.Context(), key, []byte("once"), statestore.Absent)
	if err != nil {
		t.Fatalf("a write whose commit answer was lost: %v; want it to find out and succeed", err)
	}
	t.Logf("%d commit(s) sent", commits.Load())
	e, err := open(t, cfg).Get(t.Context(), key)
	if err != nil || string(e.Value) != "once" || e.Version != v {
		t.Fatalf("key reads %q v%d (%v), want %q v%d", e.Value, e.Version, err, "once", v)
	}
	if n := countRecords(t, cfg.Topic, writer.partition(key), true); n != 1 {
		t.Fatalf("%d records committed, want exactly 1", n)
	}
}

// TestUnconfirmedCommitThatHappenedIsSuccess: when an attempt finds that
// an earlier attempt's unconfirmed commit went through after all (the
// branch a lost answer with no retry inside the client leads to), the
// write reports that version, its new transaction is aborted, and the
// record is committed once.
func TestUnconfirmedCommitThatHappenedIsSuccess(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	s := open(t, cfg)
	const key = "mirrors/m/partitions/t/0"
	v, err := s.Put(t.Context(), key, []byte("once"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	// As if the commit of the record at offset v-1 had been unanswered:
	// the next attempt, with the same expected version (Absent, which
	// no longer matches), must recognise its own record.
	w := &writeOp{ctx: t.Context(), p: s.partition(key), key: key, rec: append([]byte{formatV1}, "once"...),
		expect: statestore.Absent, pending: v - 1, done: make(chan struct{})}
	s.wmu.Lock()
	again, err := s.attempt(t.Context(), []*writeOp{w})
	s.wmu.Unlock()
	if again || !w.finished || w.err != nil || w.version != v {
		t.Fatalf("attempt after an unconfirmed commit that happened: again %v (%v), finished %v, v%d, %v; want done, v%d", again, err, w.finished, w.version, w.err, v)
	}
	p := s.partition(key)
	if all, committed := countRecords(t, cfg.Topic, p, false), countRecords(t, cfg.Topic, p, true); all != 2 || committed != 1 {
		t.Fatalf("partition %d holds %d records, %d committed; want 2, 1 committed (the second attempt's aborted)", p, all, committed)
	}
}

// TestConcurrentWritesShareTransactions: writes of one client issued at
// the same time are committed together (group commit): fewer transactions
// than writes, every write committed once, compare-and-set failures among
// them not committed.
func TestConcurrentWritesShareTransactions(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	cfg.Partitions = 1
	s := open(t, cfg)
	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			start.Wait()
			// Every third write creates a shared key: one of them wins.
			key := fmt.Sprintf("mirrors/m/partitions/t/%d", i)
			if i%3 == 0 {
				key = "mirrors/m/control"
			}
			_, errs[i] = s.Put(t.Context(), key, fmt.Appendf(nil, "write %d", i), statestore.Absent)
		})
	}
	start.Done()
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case i%3 != 0 || !errors.Is(err, statestore.ErrVersionMismatch):
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if want := n - n/3 + 1; won != want {
		t.Fatalf("%d writes succeeded, want %d (the distinct keys and one of the shared key's)", won, want)
	}
	data, markers := countAll(t, cfg.Topic, 0)
	if data.committed != won {
		t.Fatalf("%d records committed, want %d", data.committed, won)
	}
	if markers >= won {
		t.Fatalf("%d transactions for %d concurrent writes: want them batched", markers, won)
	}
	t.Logf("%d writes in %d transactions (%d records appended, aborted ones included)", won, markers, data.all)
}

// recordCounts counts a partition's data records.
type recordCounts struct{ all, committed int }

// countAll counts partition p's data records (all, and committed) and its
// transaction markers.
func countAll(t *testing.T, topic string, p int32) (recordCounts, int) {
	t.Helper()
	all := countRecords(t, topic, p, false)
	committed := countRecords(t, topic, p, true)
	ends, err := admin(t).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, p)
	// Every offset holds a data record or a marker (nothing was compacted).
	return recordCounts{all: all, committed: committed}, int(end.Offset) - all
}

// countRecords reads partition p of topic to its end, committed records
// only or all of them, and counts the records (transaction markers aside).
func countRecords(t *testing.T, topic string, p int32, committed bool) int {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	ends, err := admin(t).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, p)
	// Markers are kept so that the read sees the log's last offset.
	cl, err := cluster.NewClient(kafkatest.Identity{}, kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, next := 0, int64(0)
	for next < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s/%d up to %d: at %d after 10s", topic, p, end.Offset, next)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				n++
			}
			next = r.Offset + 1
		})
	}
	return n
}
