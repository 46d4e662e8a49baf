package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
}

// TestMirrorKeepsOffsetsAndRecordsForEveryCodec: 3 topics × 4 partitions,
// 200,000 records with keys, null values, headers and timestamps, each
// compression codec: the destination is identical record by record, offsets
// included.
func TestMirrorKeepsOffsetsAndRecordsForEveryCodec(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	adm := superAdmin(t, source)
	base := topicName(t, "")
	var topics []string
	for i := 0; i < 3; i++ {
		topic := fmt.Sprintf("%s-%d", base, i)
		createTopic(t, ctx, adm, topic, 4, 3, nil)
		topics = append(topics, topic)
	}
	const total = 200_000
	var wg sync.WaitGroup
	errs := make(chan error, len(codecs))
	for ci, c := range codecs {
		wg.Go(func() {
			cl, err := source.NewClient(kafkatest.Identity{}, kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			// Recent timestamps: records older than retention.ms (7 days by
			// default) would be deleted by the brokers' retention check.
			ts := time.Now().Add(-time.Hour).Add(time.Duration(ci) * time.Second).Truncate(time.Millisecond)
			for i := 0; i < total/len(codecs); i++ {
				r := &kgo.Record{Topic: topics[i%3], Key: fmt.Appendf(nil, "%s-%d", c.name, i), Value: fmt.Appendf(nil, "value %d compressed with %s %s", i, c.name, strings.Repeat("x", i%64)),
					Timestamp: ts.Add(time.Duration(i) * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(c.name)}, {Key: "i", Value: fmt.Appendf(nil, "%d", i)}}}
				if i%10 == 0 {
					r.Value = nil
				}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- err
			}
		})
	}
	d := startKmirror(t, base+"-.*")
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("producing: %v", err)
	}
	var records int
	for _, topic := range topics {
		d.waitMirrored(ctx, topic, 4)
		for _, log := range verifyTopic(t, ctx, topic, 4) {
			records += len(log.Entries)
		}
	}
	if records != total {
		t.Fatalf("verified %d records, produced %d", records, total)
	}
	for _, topic := range topics {
		for p := int32(0); p < 4; p++ {
			if ps, _ := d.partitionStatus(topic, p); ps.Mode != "preserve" {
				t.Fatalf("%s[%d] runs in mode %q, want preserve", topic, p, ps.Mode)
			}
		}
	}
}

// TestKIPHangingTransactionExample mirrors the KIP's example log: A=1, B=2 in
// producer A's transaction, X=9 in producer B's, A commits, B aborts, plain
// Z=10. Offsets 0–5 with the markers at 3 and 4; read_committed sees A, B, Z;
// read_uncommitted sees A, B, X, Z.
func TestKIPHangingTransactionExample(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	a := newClient(t, source, kafkatest.Identity{}, kgo.TransactionalID(topic+"-A"), kgo.DefaultProduceTopic(topic))
	b := newClient(t, source, kafkatest.Identity{}, kgo.TransactionalID(topic+"-B"), kgo.DefaultProduceTopic(topic))
	plain := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.BeginTransaction())
	produceSync(t, ctx, a, &kgo.Record{Key: []byte("A"), Value: []byte("1")}, &kgo.Record{Key: []byte("B"), Value: []byte("2")})
	must(b.BeginTransaction())
	produceSync(t, ctx, b, &kgo.Record{Key: []byte("X"), Value: []byte("9")})
	// Real brokers write markers after EndTxn returns: wait for A's COMMIT
	// (offset 3) before B aborts, so the ABORT lands at 4, and for both
	// before Z.
	must(a.EndTransaction(ctx, kgo.TryCommit))
	waitEndOffset(t, ctx, source, topic, 0, 4)
	must(b.EndTransaction(ctx, kgo.TryAbort))
	waitEndOffset(t, ctx, source, topic, 0, 5)
	produceSync(t, ctx, plain, &kgo.Record{Key: []byte("Z"), Value: []byte("10")})

	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	logs := verifyTopic(t, ctx, topic, 1)
	var shape []string
	for _, e := range logs[0].Entries {
		switch {
		case e.Control:
			shape = append(shape, fmt.Sprintf("%d:marker(%d)", e.Offset, e.Marker))
		default:
			shape = append(shape, fmt.Sprintf("%d:%s", e.Offset, e.Key))
		}
	}
	if got, want := strings.Join(shape, " "), "0:A 1:B 2:X 3:marker(1) 4:marker(0) 5:Z"; got != want {
		t.Fatalf("source log = %s, want %s (the test's premise)", got, want)
	}
	keys := func(rs []*kgo.Record) string {
		var ks []string
		for _, r := range rs {
			ks = append(ks, fmt.Sprintf("%d:%s", r.Offset, r.Key))
		}
		return strings.Join(ks, " ")
	}
	if got := keys(consumeExactly(t, ctx, destination, topic, true, 3)); got != "0:A 1:B 5:Z" {
		t.Fatalf("read_committed on the destination = %s, want 0:A 1:B 5:Z", got)
	}
	if got := keys(consumeExactly(t, ctx, destination, topic, false, 4)); got != "0:A 1:B 2:X 5:Z" {
		t.Fatalf("read_uncommitted on the destination = %s, want 0:A 1:B 2:X 5:Z", got)
	}
}

// TestRandomTransactionalInterleavingMirrorsIdentically: 4 transactional
// producers whose transactions span several partitions, randomly committed or
// aborted, interleaved with plain producers.
func TestRandomTransactionalInterleavingMirrorsIdentically(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 3, 3, nil)
	d := startKmirror(t, topic)
	produceInterleaved(t, ctx, topic, 3, 4, 40, 7)
	d.waitMirrored(ctx, topic, 3)
	verifyTopic(t, ctx, topic, 3)
}

// produceInterleaved runs txnProducers transactional producers, each running
// txns transactions over all partitions (random commit/abort), and one plain
// producer, concurrently.
func produceInterleaved(t testing.TB, ctx context.Context, topic string, partitions int32, txnProducers, txns int, seed uint64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, txnProducers+1)
	for i := 0; i < txnProducers; i++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			cl, err := source.NewClient(kafkatest.Identity{}, kgo.TransactionalID(fmt.Sprintf("%s-tx%d", topic, i)), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for n := 0; n < txns; n++ {
				if err := cl.BeginTransaction(); err != nil {
					errs <- err
					return
				}
				for k := 0; k < 2+r.IntN(4); k++ {
					rec := &kgo.Record{Partition: int32(r.IntN(int(partitions))), Key: fmt.Appendf(nil, "tx%d-%d-%d", i, n, k), Value: []byte("v")}
					if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
						errs <- err
						return
					}
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(r.IntN(3) != 0)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		cl, err := source.NewClient(kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
		if err != nil {
			errs <- err
			return
		}
		defer cl.Close()
		for n := 0; n < txns*5; n++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "plain-%d", n), Value: []byte("p")}).FirstErr(); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("producing: %v", err)
	}
}

// TestDaemonKilledRepeatedlyLosesAndDuplicatesNothing: the daemon is killed
// with SIGKILL five times while plain records and transactions stream in, and
// restarted each time; the destination ends identical, markers included.
func TestDaemonKilledRepeatedlyLosesAndDuplicatesNothing(t *testing.T) {
	killRepeatedly(t, nil)
}

// killRepeatedly is the data-path check: a daemon with the configuration
// lines extra (a state store, say) mirrors a new two-partition topic while
// plain records and transactions stream in, and is killed with SIGKILL five
// times and restarted; the destination ends identical, markers included.
// It returns the daemon.
func killRepeatedly(t *testing.T, extra []string) *daemon {
	ctx := testContext(t, 6*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 2, 3, nil)
	d := startKmirrorWith(t, topic, extra)
	produced := make(chan struct{})
	go func() { // owned by the test: it waits on produced below.
		defer close(produced)
		produceInterleaved(t, ctx, topic, 2, 4, 60, 11)
	}()
	for i := 0; i < 5; i++ {
		time.Sleep(time.Duration(700+300*i) * time.Millisecond)
		d.stop(syscall.SIGKILL)
		d.start()
	}
	<-produced
	d.waitMirrored(ctx, topic, 2)
	verifyTopic(t, ctx, topic, 2)
	return d
}

// TestSourceLogStartIsAlignedWithFiller: records deleted on the source
// (DeleteRecords) before mirroring: the destination's log start and offsets
// match the source's.
func TestSourceLogStartIsAlignedWithFiller(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	adm := superAdmin(t, source)
	createTopic(t, ctx, adm, topic, 1, 3, nil)
	cl := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	for i := 0; i < 10; i++ { // ten batches of 50 records
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: []byte("v")})
		}
		produceSync(t, ctx, cl, recs...)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 275}) // inside the sixth batch
	if _, err := adm.DeleteRecords(ctx, os); err != nil {
		t.Fatal(err)
	}
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	logs := verifyTopic(t, ctx, topic, 1)
	if logs[0].LogStart != 275 || logs[0].HighWatermark != 500 {
		t.Fatalf("source log %d–%d, want 275–500 (test premise)", logs[0].LogStart, logs[0].HighWatermark)
	}
}

// TestForeignDataOnTheDestinationFailsThePartition: a destination topic that
// already holds records the mirror did not write goes to FAILED, with a reason
// naming the topic and partition.
func TestForeignDataOnTheDestinationFailsThePartition(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	createTopic(t, ctx, superAdmin(t, destination), topic, 1, 1, nil)
	produceSync(t, ctx, newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), &kgo.Record{Value: []byte("source")})
	produceSync(t, ctx, newClient(t, destination, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), &kgo.Record{Value: []byte("foreign")})
	d := startKmirror(t, topic)
	ps := d.waitState(ctx, topic, 0, "FAILED")
	for _, want := range []string{"topic " + topic + " partition 0", "already holds offsets 0 to 0"} {
		if !strings.Contains(ps.LastError, want) {
			t.Fatalf("reason %q does not contain %q", ps.LastError, want)
		}
	}
	if ps.Retry != "NonRetryable" {
		t.Fatalf("retry = %q, want NonRetryable", ps.Retry)
	}
}

// waitEndOffset waits until partition p of topic on c has end offset want.
func waitEndOffset(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, p int32, want int64) {
	t.Helper()
	adm := superAdmin(t, c)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			if o, ok := ends.Lookup(topic, p); ok && o.Offset == want {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s[%d] on %s did not reach end offset %d", topic, p, c.Name(), want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestMirrorSurvivesASourceBrokerLoss: a broker of the 3-broker source is
// killed while mirroring and comes back; leadership moves, the fetcher
// follows it, and the destination ends identical.
func TestMirrorSurvivesASourceBrokerLoss(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	topic := topicName(t, "")
	adm := superAdmin(t, source)
	minISR := "2"
	createTopic(t, ctx, adm, topic, 3, 3, map[string]*string{"min.insync.replicas": &minISR})
	d := startKmirror(t, topic)
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
		}
		produceSync(t, ctx, producer, recs...)
	}
	produce(0, 2000)
	d.waitMirrored(ctx, topic, 3)

	victim := 1
	if err := source.KillBroker(victim); err != nil {
		t.Fatal(err)
	}
	produce(2000, 2000) // the surviving replicas take over
	d.waitMirrored(ctx, topic, 3)
	if err := source.RestartBroker(ctx, victim); err != nil {
		t.Fatalf("restarting broker %d: %v", victim, err)
	}
	produce(4000, 2000)
	d.waitMirrored(ctx, topic, 3)
	var total int
	for _, log := range verifyTopic(t, ctx, topic, 3) {
		total += len(log.Entries)
	}
	if total != 6000 {
		t.Fatalf("verified %d records, produced 6000", total)
	}
}

// TestThrottleHoldsTheConfiguredRate: with mirror.replication.throttled.rate
// at 1 MiB/s, the bytes mirrored over a 20-second window stay within ±20% of
// the rate (read from kmirror_mirrored_bytes_total on /metrics).
func TestThrottleHoldsTheConfiguredRate(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 2, 3, nil)
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(64<<10))
	value := make([]byte, 4096)
	for i := 0; i < 40*256; i++ { // 40 MiB of incompressible values
		for j := range value {
			value[j] = byte(rand.Uint32())
		}
		producer.Produce(ctx, &kgo.Record{Value: append([]byte(nil), value...)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("producing: %v", err)
			}
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const rate = 1 << 20
	d := startKmirrorWith(t, topic, []string{
		fmt.Sprintf("mirror.replication.throttled.rate: %d", rate),
		"replica.fetch.max.bytes: 131072",
		"replica.fetch.response.max.bytes: 262144",
	})
	metric := fmt.Sprintf(`kmirror_mirrored_bytes_total{mirror="%s"}`, d.mirror)
	sample := func() float64 {
		for {
			if v, ok := d.metric(metric); ok {
				return v
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no %s on /metrics", metric)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// Let the first fetches (and the bucket's first second) pass.
	time.Sleep(5 * time.Second)
	start, t0 := sample(), time.Now()
	time.Sleep(20 * time.Second)
	end, t1 := sample(), time.Now()
	got := (end - start) / t1.Sub(t0).Seconds()
	t.Logf("mirrored %.0f bytes in %s: %.0f B/s (throttle %d B/s)", end-start, t1.Sub(t0).Round(time.Millisecond), got, rate)
	if got < rate*0.8 || got > rate*1.2 {
		t.Fatalf("mirrored at %.0f B/s over 20s, want %d B/s ±20%%", got, rate)
	}
	if v, ok := d.metric("kmirror_replication_throttle_byte_rate"); !ok || v != rate {
		t.Fatalf("kmirror_replication_throttle_byte_rate = %v (found %v), want %d", v, ok, rate)
	}
}

// TestStopAbortsOpenTransaction: a topic excluded by a reload (SIGHUP) while
// a source transaction is open: its partitions go through STOPPING to
// STOPPED, the destination transaction is aborted, and a read_committed
// consumer on the destination is not blocked (last stable offset equals the
// high watermark).
func TestStopAbortsOpenTransaction(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	plain := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	txn := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-open"))
	produceSync(t, ctx, plain, &kgo.Record{Key: []byte("committed"), Value: []byte("1")})
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, ctx, txn, &kgo.Record{Key: []byte("open"), Value: []byte("2")})
	defer func() { _ = txn.EndTransaction(context.Background(), kgo.TryAbort) }()

	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	dadm := superAdmin(t, destination)
	if lso, err := dadm.ListCommittedOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	} else if o, _ := lso.Lookup(topic, 0); o.Offset != 1 {
		t.Fatalf("destination last stable offset %d while the source transaction is open, want 1", o.Offset)
	}

	cfg, err := os.ReadFile(d.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("    mirror.topics.exclude: %q\n", topic)...)
	if err := os.WriteFile(d.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	d.signal(syscall.SIGHUP)
	ps := d.waitState(ctx, topic, 0, "STOPPED")
	if ps.LastMirroredOffset != 1 {
		t.Fatalf("last mirrored offset %d, want 1", ps.LastMirroredOffset)
	}
	hw, err1 := dadm.ListEndOffsets(ctx, topic)
	lso, err2 := dadm.ListCommittedOffsets(ctx, topic)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	h, _ := hw.Lookup(topic, 0)
	l, _ := lso.Lookup(topic, 0)
	if h.Offset != l.Offset || h.Offset != 3 {
		t.Fatalf("after STOPPED: high watermark %d, last stable offset %d; want both 3 (abort marker at 2)", h.Offset, l.Offset)
	}
	recs := consumeExactly(t, ctx, destination, topic, true, 1)
	if string(recs[0].Key) != "committed" {
		t.Fatalf("read_committed consumer saw %q", recs[0].Key)
	}
}

// TestCompactedTopicRunsInMapMode: a compacted source topic with gaps cannot
// be reproduced offset for offset; the partition runs in map mode, every
// record is copied in order, and the stored offset map gives the exact
// destination offset of every source offset.
func TestCompactedTopicRunsInMapMode(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	srcLog := compactedTopicWithGaps(t, ctx, topic)
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	ps, _ := d.partitionStatus(topic, 0)
	if ps.Mode != "map" {
		t.Fatalf("mode %q, want map; notes %v", ps.Mode, ps.Notes)
	}
	d.stop(syscall.SIGTERM)

	dstLog, err := verify.ReadLog(ctx, newClient(t, destination, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dstLog.Entries) != len(srcLog.Entries) {
		t.Fatalf("destination holds %d records, the (compacted) source %d", len(dstLog.Entries), len(srcLog.Entries))
	}
	m := storedOffsetMap(t, ctx, d, topic)
	for i, se := range srcLog.Entries {
		de := dstLog.Entries[i]
		if diff := verify.DiffEntry(se, de, false); diff != "" {
			t.Fatalf("record %d: %s", i, diff)
		}
		if got, ok := m.Lookup(se.Offset); !ok || got != de.Offset {
			t.Fatalf("offset map: source %d → %d (found %v); the record is at destination offset %d", se.Offset, got, ok, de.Offset)
		}
	}
	if m.Len() < 3 {
		t.Fatalf("offset map has %d ranges; the compacted log should leave gaps inside it (test premise)", m.Len())
	}
	t.Logf("%d records over source offsets %d–%d copied to destination offsets 0–%d; offset map has %d ranges",
		len(srcLog.Entries), srcLog.LogStart, srcLog.HighWatermark-1, dstLog.HighWatermark-1, m.Len())
}

// TestMirrorFromASASLSSLSource: the source is reached over SASL_SSL with
// SCRAM-SHA-512 (kmirror's own dialer: socket buffers, then TLS with host
// name verification against the test CA); the destination is identical.
func TestMirrorFromASASLSSLSource(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	alice := kafkatest.Identity{Listener: kafkatest.SASLSSL, Mechanism: kafkatest.ScramSHA512, User: "alice", Password: securedUsers["alice"]}
	createTopic(t, ctx, superAdmin(t, secured), topic, 2, 1, nil)
	producer := newClient(t, secured, alice, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < 500; i++ {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}})
	}
	produceSync(t, ctx, producer, recs...)

	d := startKmirrorWith(t, topic, []string{"replica.socket.receive.buffer.bytes: 262144"},
		"bootstrap.servers: "+secured.BootstrapServers(kafkatest.SASLSSL),
		"security.protocol: SASL_SSL",
		"sasl.mechanism: SCRAM-SHA-512",
		"sasl.username: alice",
		"sasl.password: "+securedUsers["alice"],
		"ssl.truststore.location: "+secured.CAFile(),
	)
	// waitMirrored reads the shared source cluster; read the secured one.
	src := newClient(t, secured, alice)
	dst := newClient(t, destination, kafkatest.Identity{})
	for {
		ok := true
		for p := int32(0); p < 2; p++ {
			ps, found := d.partitionStatus(topic, p)
			if !found || ps.State != "MIRRORING" || ps.Lag != 0 || ps.LastMirroredOffset < 0 {
				ok = false
			}
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			st, _ := d.status()
			t.Fatalf("not mirrored: %+v", st)
		case <-time.After(250 * time.Millisecond):
		}
	}
	var total int
	for p := int32(0); p < 2; p++ {
		log, diff, err := verify.Partition(ctx, src, dst, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs: %s", topic, p, diff)
		}
		total += len(log.Entries)
	}
	if total != 500 {
		t.Fatalf("verified %d records, produced 500", total)
	}
	if strings.Contains(d.log(), securedUsers["alice"]) {
		t.Fatal("the SASL password appears in kmirror's log")
	}
}

// TestConsumerGroupFailsOverAtTheNextRecord: a consumer group consumes part
// of a mirrored topic on the source and commits; after a sync, a consumer in
// that group on the destination starts exactly at the next record — no
// duplicate, no gap — checked record by record.
func TestConsumerGroupFailsOverAtTheNextRecord(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	group := "app-" + topic
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, ctx, newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), recs...)

	consumer := newClient(t, source, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var read []*kgo.Record
	for len(read) < 40 {
		read = append(read, consumer.PollRecords(ctx, 40-len(read)).Records()...)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	if err := consumer.CommitRecords(ctx, read...); err != nil {
		t.Fatal(err)
	}
	consumer.Close() // the group is Empty on the source; it was never active on the destination
	next := read[len(read)-1].Offset + 1

	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	dadm := superAdmin(t, destination)
	for {
		offs, err := dadm.FetchOffsets(ctx, group)
		if err == nil {
			if o, ok := offs.Lookup(topic, 0); ok && o.At == next {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never got offset %d on the destination", group, next)
		case <-time.After(250 * time.Millisecond):
		}
	}
	dst := newClient(t, destination, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
	var rest []*kgo.Record
	for len(rest) < 100-int(next) {
		rest = append(rest, dst.PollRecords(ctx, 100).Records()...)
		if ctx.Err() != nil {
			t.Fatalf("destination consumer read %d records: %v", len(rest), ctx.Err())
		}
	}
	for i, r := range rest {
		want := next + int64(i)
		if r.Offset != want || string(r.Key) != fmt.Sprintf("k%d", want) {
			t.Fatalf("destination record %d: offset %d key %s, want offset %d key k%d", i, r.Offset, r.Key, want, want)
		}
	}
}

// TestMirrorTopicIsReadOnlyOnADestinationWithAnAuthorizer: on a destination
// with the standard authorizer (kmirror's principal alice is a super user),
// a mirror topic carries a DENY WRITE ACL for User:* while it is mirrored —
// bob cannot write to it even with an ALLOW WRITE ACL — and the ACL is removed
// once its partitions are STOPPED, after which bob can write.
func TestMirrorTopicIsReadOnlyOnADestinationWithAnAuthorizer(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	produceSync(t, ctx, newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), &kgo.Record{Value: []byte("from the source")})
	alicePass, bobPass := securedUsers["alice"], securedUsers["bob"]
	// bob may write the topic, as far as ALLOW rules go.
	sadm := superAdmin(t, secured)
	allow := kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:bob").AllowHosts("*").Operations(kadm.OpWrite, kadm.OpDescribe)
	if _, err := sadm.CreateACLs(ctx, allow); err != nil {
		t.Fatal(err)
	}
	dest := fmt.Sprintf("destination:\n  bootstrap.servers: %s\n  security.protocol: SASL_PLAINTEXT\n  sasl.mechanism: SCRAM-SHA-512\n  sasl.username: alice\n  sasl.password: %s",
		secured.BootstrapServers(kafkatest.SASLPlaintext), alicePass)
	d := startKmirrorWith(t, topic, []string{dest})
	d.waitState(ctx, topic, 0, "MIRRORING")
	bob := newClient(t, secured, kafkatest.Identity{Listener: kafkatest.SASLPlaintext, Mechanism: kafkatest.ScramSHA512, User: "bob", Password: bobPass},
		kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.DisableIdempotentWrite()) // an idempotent producer would be refused at InitProducerId (cluster level) instead
	bobWrites := func() error { return bob.ProduceSync(ctx, &kgo.Record{Value: []byte("bob")}).FirstErr() }
	for {
		err := bobWrites()
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			break // the DENY ACL is in place
		}
		if err == nil {
			t.Log("bob could still write (the read-only ACL is not there yet); retrying")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bob was never refused: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if strings.Contains(d.log(), alicePass) {
		t.Fatal("the SASL password appears in kmirror's log")
	}
	// Nothing but kmirror wrote to the mirror topic: it is identical to the source.
	d.waitMirrored(ctx, topic, 1)
	alice := newClient(t, secured, kafkatest.Identity{Listener: kafkatest.SASLPlaintext, Mechanism: kafkatest.ScramSHA512, User: "alice", Password: alicePass})
	if _, diff, err := verify.Partition(ctx, newClient(t, source, kafkatest.Identity{}), alice, topic, 0); err != nil || diff != "" {
		t.Fatalf("mirror topic differs from the source (someone else wrote?): %v %s", err, diff)
	}
	if ps, _ := d.partitionStatus(topic, 0); ps.State != "MIRRORING" {
		t.Fatalf("partition %s (%s), want MIRRORING", ps.State, ps.LastError)
	}
	// Stop the topic (exclude it): the ACL goes, bob can write.
	cfg, err := os.ReadFile(d.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("    mirror.topics.exclude: %q\n", topic)...)
	if err := os.WriteFile(d.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	d.signal(syscall.SIGHUP)
	d.waitState(ctx, topic, 0, "STOPPED")
	for {
		err := bobWrites()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bob still cannot write after STOPPED: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
