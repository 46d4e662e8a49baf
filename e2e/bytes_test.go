package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// produceBatches writes, with codec c, to partition 0 of topic: three batches
// from an idempotent producer, two from a producer that is not idempotent
// (producer id -1), and through a transactional producer one committed
// transaction of two batches and one aborted transaction of one batch (so two
// markers). Records carry keys, some null values, headers and timestamps that
// differ inside a batch.
func produceBatches(t testing.TB, ctx context.Context, topic, codec string, c kgo.CompressionCodec) {
	t.Helper()
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	recs := func(tag string, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := 0; i < n; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "%s-%s-%d", codec, tag, i), Value: fmt.Appendf(nil, "%s %s %d %s", codec, tag, i, strings.Repeat("v", 10+i)),
				Timestamp: ts.Add(time.Duration(i) * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(codec)}}}
			if i%4 == 3 {
				r.Value = nil
			}
			out = append(out, r)
		}
		return out
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	idem := newClient(t, source, kafkatest.Identity{}, opts...)
	for i := 0; i < 3; i++ {
		produceSync(t, ctx, idem, recs(fmt.Sprintf("idem%d", i), 20)...)
	}
	plain := newClient(t, source, kafkatest.Identity{}, append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))...)
	for i := 0; i < 2; i++ {
		produceSync(t, ctx, plain, recs(fmt.Sprintf("plain%d", i), 15)...)
	}
	txn := newClient(t, source, kafkatest.Identity{}, append(opts, kgo.TransactionalID(topic+"-"+codec))...)
	for _, commit := range []bool{true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < map[bool]int{true: 2, false: 1}[commit]; i++ {
			produceSync(t, ctx, txn, recs(fmt.Sprintf("txn%v%d", commit, i), 10)...)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMirroredBatchesMatchTheSourceByteForByte: every codec, idempotent,
// non-idempotent and transactional batches, COMMIT and ABORT markers. Read
// raw from both clusters, each destination batch has the source batch's
// attributes (codec, timestamp type, transactional and control bits), base
// offset, last offset delta, timestamps, record count and records section
// byte for byte; only the producer id, epoch and base sequence kmirror
// re-stamps, the CRC over them and the partition leader epoch may differ. A
// marker is written by the destination's coordinator: its control record
// (version and type) is the same, its time and coordinator epoch are the
// destination's.
func TestMirroredBatchesMatchTheSourceByteForByte(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	for _, c := range codecs {
		produceBatches(t, ctx, topic, c.name, c.codec)
	}
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	if ps, _ := d.partitionStatus(topic, 0); ps.Mode != "preserve" {
		t.Fatalf("%s[0] runs in mode %q, want preserve", topic, ps.Mode)
	}
	verifyTopic(t, ctx, topic, 1)

	diffs, err := verify.PartitionBatches(ctx, newClient(t, source, kafkatest.Identity{}), newClient(t, destination, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	type kind struct {
		codec             batch.Compression
		txn, control, pid bool
	}
	seen := map[kind]int{}
	markers := map[batch.ControlType]int{}
	differing := map[verify.Field]int{}
	for _, d := range diffs {
		if u := d.Unexpected(); len(u) > 0 {
			t.Errorf("%s; of these, %v are not re-stamped fields", d, u)
		}
		for _, f := range d.Fields {
			differing[f]++
		}
		s := d.Source
		if dst := d.Destination; !s.IsControl() && (dst.ProducerID() < 0 || dst.ProducerEpoch() < 0 || dst.BaseSequence() < 0) {
			t.Errorf("destination batch at offset %d carries producer %d epoch %d sequence %d, not a kmirror writer's", dst.BaseOffset(), dst.ProducerID(), dst.ProducerEpoch(), dst.BaseSequence())
		}
		seen[kind{s.Compression(), s.IsTransactional(), s.IsControl(), s.ProducerID() >= 0}]++
		if s.IsControl() {
			ct, err := batch.ControlRecord(s)
			if err != nil {
				t.Fatal(err)
			}
			markers[ct]++
		}
	}
	// The test's premise: every kind of batch is there.
	for _, c := range []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd} {
		for _, k := range []kind{{codec: c, pid: true}, {codec: c}, {codec: c, txn: true, pid: true}} {
			if seen[k] == 0 {
				t.Errorf("no source batch of kind %+v (test premise); seen %v", k, seen)
			}
		}
	}
	if markers[batch.ControlCommit] != len(codecs) || markers[batch.ControlAbort] != len(codecs) {
		t.Errorf("source markers %v, want %d COMMIT and %d ABORT (test premise)", markers, len(codecs), len(codecs))
	}
	t.Logf("%d batches compared; fields that differ (batches): %v", len(diffs), differing)
}
