package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestDestinationTimedOutTransactionIsCopiedAgainInMapMode: kmirror is
// killed while it replays an open source transaction and stays down longer
// than the destination transaction timeout, so the destination aborts the
// replayed transaction (its ABORT marker lands where the source has other
// records). Meanwhile another transaction commits and the open one commits
// on the source. On restart the partition continues in map mode from the lost
// transaction's first record and copies again: every source record and
// marker is on the destination at the offset the stored map gives, with the
// same visibility, and a read_committed consumer on the destination sees
// every committed source record.
func TestDestinationTimedOutTransactionIsCopiedAgainInMapMode(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	plain := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	slow := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-slow"), kgo.TransactionTimeout(2*time.Minute))
	quick := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-quick"))
	n := 0
	put := func(cl *kgo.Client, what string, count int) {
		t.Helper()
		for i := 0; i < count; i++ {
			n++
			produceSync(t, ctx, cl, &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", what, n), Value: fmt.Appendf(nil, "value %d", n),
				Headers: []kgo.RecordHeader{{Key: "producer", Value: []byte(what)}}})
		}
	}
	put(plain, "plain", 5)
	if err := slow.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	put(slow, "slow", 3)
	put(plain, "plain", 2)
	if err := quick.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	put(quick, "quick", 2)
	if err := quick.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	d := startKmirrorWith(t, topic, []string{"mirror.transaction.timeout.ms: 3000"})
	d.waitMirrored(ctx, topic, 1)
	d.stop(syscall.SIGKILL)

	// The destination's coordinator aborts the replayed transaction (it
	// looks for timed-out transactions every 10 s by default).
	dadm := superAdmin(t, destination)
	for {
		ends, err1 := dadm.ListEndOffsets(ctx, topic)
		lsos, err2 := dadm.ListCommittedOffsets(ctx, topic)
		if err1 == nil && err2 == nil {
			e, _ := ends.Lookup(topic, 0)
			l, _ := lsos.Lookup(topic, 0)
			if e.Offset == l.Offset && e.Offset == 14 { // 13 mirrored offsets + the destination's ABORT marker
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the destination never timed out the replayed transaction")
		case <-time.After(500 * time.Millisecond):
		}
	}

	put(slow, "slow", 2)
	if err := slow.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	put(plain, "plain", 3)

	d.start()
	d.waitMirrored(ctx, topic, 1)
	ps, _ := d.partitionStatus(topic, 0)
	if ps.Mode != "map" || !strings.Contains(strings.Join(ps.Notes, "\n"), "aborted a replayed transaction") {
		t.Fatalf("mode %q notes %q; want map mode with a note saying why", ps.Mode, ps.Notes)
	}
	if !strings.Contains(d.log(), "lost destination transaction: copying again in map mode") {
		t.Fatalf("the log does not say that the transaction is copied again")
	}
	d.stop(syscall.SIGTERM)

	srcLog, dstLog := readBothLogs(t, ctx, topic)
	m := storedOffsetMap(t, ctx, d, topic)
	if diff := verify.DiffMapped(srcLog, dstLog, m.Lookup); diff != "" {
		t.Fatalf("%s (offset map %v)", diff, m.Ranges())
	}
	// Offsets are kept below the lost transaction's first record (source
	// offset 5); from there the copy follows the destination's ABORT marker.
	if do, _ := m.Lookup(4); do != 4 {
		t.Fatalf("source offset 4 maps to %d, want 4", do)
	}
	if do, _ := m.Lookup(5); do != 14 {
		t.Fatalf("source offset 5 (the lost transaction's first record) maps to %d, want 14", do)
	}
	// No committed source record is missing on the destination.
	visible := map[string]int{}
	for _, e := range dstLog.Entries {
		if e.Visible && !e.Control {
			visible[string(e.Key)]++
		}
	}
	for _, se := range srcLog.Entries {
		if se.Visible && !se.Control && visible[string(se.Key)] == 0 {
			t.Fatalf("committed source record %s (offset %d) is not visible on the destination", se.Key, se.Offset)
		}
	}
	t.Logf("offset map %v; destination high watermark %d", m.Ranges(), dstLog.HighWatermark)
}
