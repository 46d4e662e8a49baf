package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/failpoint"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// The tests in this file prove that every continuation of a partition
// checks the destination first (docs/design/datapath.md, "Proving the
// destination"), on real brokers.

// committedValues reads topic/0 on c with a read_committed consumer, up to
// the last record visible there, and returns the values in order.
func committedValues(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string) []string {
	t.Helper()
	log, err := verify.ReadLog(ctx, newClient(t, c, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	for _, e := range log.Entries {
		if e.Visible && !e.Control {
			last = e.Offset
		}
	}
	cl := newClient(t, c, kafkatest.Identity{}, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []string
	for at := int64(-1); at < last; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s with read_committed: %v (read %v up to offset %d of %d)", topic, err, out, at, last)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			at = r.Offset
		})
	}
	return out
}

// mappedCopy checks, with the daemon stopped, that every source entry of
// topic/0 is on the destination at the offset the stored map gives, with
// the same visibility.
func mappedCopy(t testing.TB, ctx context.Context, d *daemon, topic string) {
	t.Helper()
	srcLog, dstLog := readBothLogs(t, ctx, topic)
	m := storedOffsetMap(t, ctx, d, topic)
	if diff := verify.DiffMapped(srcLog, dstLog, m.Lookup); diff != "" {
		t.Fatalf("%s (offset map %v)", diff, m.Ranges())
	}
}

// TestStopWithAnOpenTransactionThenStartLosesNothing: the source is
// 0 committed, 1 open-1, 2 open-2, 3 COMMIT, 4 after. `kmirror mirrors
// stop` while only 0 and 1 are mirrored aborts the destination transaction
// (an ABORT marker at 2, where the source has open-2); the source then
// commits, and `kmirror mirrors start` finds the ABORT where the source did
// not abort: the partition continues in map mode from the transaction's
// first record, and every committed source record is readable exactly once
// with read_committed on the destination.
func TestStopWithAnOpenTransactionThenStartLosesNothing(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	plain := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	txn := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-txn"))
	put := func(cl *kgo.Client, v string) { produceSync(t, ctx, cl, &kgo.Record{Key: []byte(v), Value: []byte(v)}) }
	put(plain, "committed")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	put(txn, "open-1")

	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	if code, _, stderr := d.cli("mirrors", "stop", "--mirror", d.mirror, "--topics", topic); code != 0 {
		t.Fatalf("mirrors stop: exit %d: %s", code, stderr)
	}
	d.waitState(ctx, topic, 0, "STOPPED")
	put(txn, "open-2")
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	put(plain, "after")
	if code, _, stderr := d.cli("mirrors", "start", "--mirror", d.mirror, "--topics", topic); code != 0 {
		t.Fatalf("mirrors start: exit %d: %s", code, stderr)
	}
	d.waitMirrored(ctx, topic, 1)
	ps, _ := d.partitionStatus(topic, 0)
	if ps.Mode != "map" || !strings.Contains(strings.Join(ps.Notes, "\n"), "aborted a replayed transaction") {
		t.Fatalf("mode %q notes %q: want map mode and a note saying that the stop's abort differs from the source", ps.Mode, ps.Notes)
	}
	if v, ok := d.metric(fmt.Sprintf(`kmirror_destination_mismatches_total{action="map",mirror=%q`, d.mirror)); !ok || v != 1 {
		t.Fatalf("kmirror_destination_mismatches_total = %v (found %v), want 1", v, ok)
	}
	if !strings.Contains(d.log(), "lost destination transaction: copying again in map mode") {
		t.Fatalf("the log does not say that the transaction is copied again")
	}
	if got, want := strings.Join(committedValues(t, ctx, destination, topic), ","), "committed,open-1,open-2,after"; got != want {
		t.Fatalf("destination read_committed %s, want %s", got, want)
	}
	d.stop(syscall.SIGTERM)
	mappedCopy(t, ctx, d, topic)
}

// TestAForeignRecordWrittenWhileKmirrorIsDownIsReported: a producer writes
// to the mirror topic on the destination while kmirror is stopped; at the
// restart the record is found (the source has another record at its
// offset), reported in describe, the log and the metric, and the partition
// continues in map mode after it: no source record is skipped.
func TestAForeignRecordWrittenWhileKmirrorIsDownIsReported(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	src := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	put := func(cl *kgo.Client, vs ...string) {
		for _, v := range vs {
			produceSync(t, ctx, cl, &kgo.Record{Key: []byte(v), Value: []byte(v)})
		}
	}
	put(src, "s0", "s1", "s2", "s3", "s4")
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	d.stop(syscall.SIGTERM)
	put(newClient(t, destination, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), "foreign")
	put(src, "s5", "s6", "s7")

	d.start()
	d.waitMirrored(ctx, topic, 1)
	ps, _ := d.partitionStatus(topic, 0)
	if ps.Mode != "map" || !strings.Contains(strings.Join(ps.Notes, "\n"), "destination offset 5") {
		t.Fatalf("mode %q notes %q: want map mode and a note naming destination offset 5", ps.Mode, ps.Notes)
	}
	if !strings.Contains(d.log(), "foreign or differing records on the destination") {
		t.Fatalf("the log does not report the foreign record")
	}
	if v, ok := d.metric(fmt.Sprintf(`kmirror_destination_mismatches_total{action="map",mirror=%q`, d.mirror)); !ok || v != 1 {
		t.Fatalf("kmirror_destination_mismatches_total = %v (found %v), want 1", v, ok)
	}
	if got, want := strings.Join(committedValues(t, ctx, destination, topic), ","), "s0,s1,s2,s3,s4,foreign,s5,s6,s7"; got != want {
		t.Fatalf("destination read_committed %s, want %s", got, want)
	}
	d.stop(syscall.SIGTERM)
	mappedCopy(t, ctx, d, topic)
}

// TestAWriterReinitialisationKilledAtEveryStepDuplicatesNothing: a source
// producer's second transaction finds its destination writer forgotten
// (mirror.transaction.writer.idle.ms: 1), so the writer is initialised
// again; kmirror is killed (SIGKILL, through core/failpoint) at each step
// of that: after InitProducerId (before its new epoch is recorded), after
// the record, after AddPartitionsToTxn, after the first append, after
// EndTxn. Restarted, it proves the destination, keeps preserve mode, and
// the destination is the source offset for offset: nothing duplicated.
func TestAWriterReinitialisationKilledAtEveryStepDuplicatesNothing(t *testing.T) {
	for _, step := range []string{"writer-txn-initialised", "writer-txn-recorded", "writer-txn-partition-added", "writer-txn-appended", "writer-txn-ended"} {
		t.Run(step, func(t *testing.T) {
			ctx := testContext(t, 3*time.Minute)
			topic := topicName(t, "")
			createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
			plain := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
			txn := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-txn"))
			n := 0
			transaction := func(records int) {
				t.Helper()
				if err := txn.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < records; i++ {
					n++
					produceSync(t, ctx, txn, &kgo.Record{Key: fmt.Appendf(nil, "t%d", n), Value: fmt.Appendf(nil, "txn %d", n)})
				}
				if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
				n++
				produceSync(t, ctx, plain, &kgo.Record{Key: fmt.Appendf(nil, "p%d", n), Value: fmt.Appendf(nil, "plain %d", n)})
			}
			transaction(1) // the writer's first initialisation, append, EndTxn: hit 1 of every step
			d := startKmirrorEnv(t, []string{failpoint.Env + "=" + step + "@2"}, topic, []string{"mirror.transaction.writer.idle.ms: 1"})
			d.waitMirrored(ctx, topic, 1)
			transaction(2) // the writer is initialised again: kmirror dies at the step
			select {
			case <-d.exited():
			case <-ctx.Done():
				t.Fatalf("kmirror did not reach failpoint %s", step)
			}
			d.env = nil
			d.start()
			d.waitMirrored(ctx, topic, 1)
			ps, _ := d.partitionStatus(topic, 0)
			if ps.Mode != "preserve" || len(ps.Notes) != 0 {
				t.Fatalf("mode %q notes %q: want preserve mode and no note", ps.Mode, ps.Notes)
			}
			verifyTopic(t, ctx, topic, 1)
		})
	}
}
