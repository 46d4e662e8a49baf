package writer

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/writer/internal/txn"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// Mirror and topic names may both hold '-' (and '.' and '_'): no two
// (mirror, topic, partition, producer) share a transactional id.
func TestTransactionalIDsAreUnambiguous(t *testing.T) {
	t.Parallel()
	if a, b := TransactionalID("dc1", "eu-orders", 0, 4001), TransactionalID("dc1-eu", "orders", 0, 4001); a == b {
		t.Fatalf("mirror dc1 topic eu-orders and mirror dc1-eu topic orders share transactional id %q", a)
	}
	if got, want := TransactionalID("dc1", "eu-orders", 3, 4001), "kmirror-dc1:eu-orders:3:4001"; got != want {
		t.Errorf("TransactionalID = %q, want %q", got, want)
	}
	names := []string{"a", "a-b", "b", "b-1", "1", "a.b", "a_b", "-", "a-", "-b", "a--b", "1-2", "a-1"}
	seen := map[string]string{}
	for _, m := range names {
		for _, topic := range names {
			for _, part := range []int32{0, 1, 12} {
				for _, pid := range []int64{0, 1, 2, 12, 21} {
					id := TransactionalID(m, topic, part, pid)
					key := fmt.Sprint(m, "|", topic, "|", part, "|", pid)
					if prev, ok := seen[id]; ok && prev != key {
						t.Fatalf("transactional id %q of %s and of %s", id, prev, key)
					}
					seen[id] = key
				}
			}
		}
	}
}

// The writers of mirror dc1 on topic eu-orders and of mirror dc1-eu on
// topic orders, replaying the same source producer id on one destination,
// keep their transactions apart: neither fences the other or refuses the
// other's open transaction.
func TestWritersOfCollidingNamesDoNotFenceEachOther(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "eu-orders", "orders"))
	obs := observe(c, int16(kmsg.InitProducerID))
	recA, recB := &recorder{}, &recorder{}
	a := openPartition(t, newWriter(t, c, MirrorName("dc1")), "eu-orders", 0, recA)
	b := openPartition(t, newWriter(t, c, MirrorName("dc1-eu")), "orders", 0, recB)

	// Interleaved transactions of source producer 4001 on both.
	mustAppend(t, a, kvBatch(t, 0, 4001, true, "a1", "1"))
	mustAppend(t, b, kvBatch(t, 0, 4001, true, "b1", "1"))
	mustAppend(t, a, kvBatch(t, 1, 4001, true, "a2", "2"))
	mustAppend(t, b, kvBatch(t, 1, 4001, true, "b2", "2"))
	mustAppend(t, a, markerBatch(t, 2, 4001, batch.ControlCommit))
	mustAppend(t, b, kvBatch(t, 2, 4001, true, "b3", "3"))
	mustAppend(t, b, markerBatch(t, 3, 4001, batch.ControlCommit))

	ia, ib := recA.recorded(), recB.recorded()
	if len(ia) != 1 || len(ib) != 1 || ia[0].TransactionalID == ib[0].TransactionalID {
		t.Fatalf("recorded writers %+v and %+v: want one each, with distinct transactional ids", ia, ib)
	}
	for _, info := range append(ia, ib...) {
		if n := initsFor(obs, info.TransactionalID); n != 1 {
			t.Errorf("%d InitProducerId for %s, want 1 (a writer was fenced and started again)", n, info.TransactionalID)
		}
	}
	if got, want := keysAt(consume(t, c, "eu-orders", 0, true, 1)), "0:a1=1 1:a2=2"; got != want {
		t.Errorf("eu-orders read_committed %q, want %q", got, want)
	}
	if got, want := keysAt(consume(t, c, "orders", 0, true, 2)), "0:b1=1 1:b2=2 2:b3=3"; got != want {
		t.Errorf("orders read_committed %q, want %q", got, want)
	}
}

// A transaction a kmirror before the current transactional id format left
// open (its writer recorded with the old id) is resumed and ended under the
// old id; the source producer's next transaction takes a writer with the
// current id.
func TestResumeContinuesATransactionOpenedUnderTheOldTransactionalID(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	obs := observe(c, int16(kmsg.InitProducerID), int16(kmsg.EndTxn))
	rec := &recorder{}
	ctx := context.Background()

	// The older daemon: its writer of producer 4001 had the old id; it
	// appended half a transaction and was killed.
	cl1 := kfaketest.NewClient(t, c)
	w1, err := New(cl1, MirrorName("test"))
	if err != nil {
		t.Fatal(err)
	}
	p1, err := w1.Partition(testTopic, 0, rec.hook)
	if err != nil {
		t.Fatal(err)
	}
	oldID := "kmirror-test-" + testTopic + "-0-4001"
	if got := p1.txns.LegacyID(4001); got != oldID {
		t.Fatalf("legacyTransactionalID = %q, want %q", got, oldID)
	}
	tw := &txn.Writer{Info: TxnWriterInfo{SourceProducerID: 4001, TransactionalID: oldID, ProducerID: -1, Epoch: -1}, Coordinator: -1, StartOffset: -1}
	if err := p1.txns.Init(ctx, tw); err != nil {
		t.Fatal(err)
	}
	p1.txns.Add(tw)
	mustAppend(t, p1, kvBatch(t, 0, 4001, true, "A", "1"))
	mustAppend(t, p1, kvBatch(t, 1, -1, false, "plain", "1"))
	w1.Close()
	cl1.Close()
	recorded := rec.recorded()
	if len(recorded) != 1 || recorded[0].TransactionalID != oldID {
		t.Fatalf("recorded %+v, want the writer with the old id", recorded)
	}

	// The upgraded daemon resumes it.
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	report, err := p.Resume(ctx, recorded)
	if err != nil {
		t.Fatalf("Resume refused the old-format record: %v", err)
	}
	if len(report.Resumed) != 1 || report.Resumed[0].Writer != recorded[0] || len(report.Lost)+len(report.Foreign)+len(report.Expired) != 0 {
		t.Fatalf("report %+v, want the old-format writer resumed", report)
	}
	mustAppend(t, p, kvBatch(t, 2, 4001, true, "B", "2"))
	mustAppend(t, p, markerBatch(t, 3, 4001, batch.ControlCommit))
	if n := initsFor(obs, oldID); n != 1 {
		t.Fatalf("%d InitProducerId for the old id, want only the older daemon's (a new one would have aborted its transaction)", n)
	}
	var ended []string
	for _, r := range obs.requests(int16(kmsg.EndTxn)) {
		ended = append(ended, r.(*kmsg.EndTxnRequest).TransactionalID)
	}
	if len(ended) != 1 || ended[0] != oldID {
		t.Fatalf("EndTxn for %q, want one for %s", ended, oldID)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 2)), "0:A=1 1:plain=1 2:B=2"; got != want {
		t.Fatalf("read_committed %q, want %q", got, want)
	}

	// The next transaction of producer 4001 uses the current id.
	mustAppend(t, p, kvBatch(t, 4, 4001, true, "C", "3"))
	mustAppend(t, p, markerBatch(t, 5, 4001, batch.ControlCommit))
	newID := p.TransactionalID(4001)
	if got := rec.recorded(); len(got) != 1 || got[0].TransactionalID != newID {
		t.Fatalf("recorded %+v after the next transaction, want the writer with %s", got, newID)
	}
	if n := initsFor(obs, newID); n != 1 {
		t.Fatalf("%d InitProducerId for %s, want 1", n, newID)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 4)), "0:A=1 1:plain=1 2:B=2 4:C=3"; got != want {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
}

// An old-format writer with nothing open is not kept: the next transaction
// takes the current id; a writer recorded for another partition or mirror
// under the old format is refused like one of the current format.
func TestResumeRetiresAnIdleOldFormatWriter(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(2, "other"))
	ctx := context.Background()
	rec := &recorder{}
	w := newWriter(t, c)
	p1 := openPartition(t, w, testTopic, 0, rec)
	oldID := p1.txns.LegacyID(4001)
	tw := &txn.Writer{Info: TxnWriterInfo{SourceProducerID: 4001, TransactionalID: oldID, ProducerID: -1, Epoch: -1}, Coordinator: -1, StartOffset: -1}
	if err := p1.txns.Init(ctx, tw); err != nil {
		t.Fatal(err)
	}
	p1.txns.Add(tw)
	mustAppend(t, p1, kvBatch(t, 0, 4001, true, "A", "1"))
	mustAppend(t, p1, markerBatch(t, 1, 4001, batch.ControlCommit))
	p1.Close()

	other := openPartition(t, w, "other", 1, &recorder{})
	if _, err := other.Resume(ctx, rec.recorded()); err == nil {
		t.Fatalf("partition other/1 accepted the old-format writer of %s/0", testTopic)
	}

	p := openPartition(t, w, testTopic, 0, rec)
	report, err := p.Resume(ctx, rec.recorded())
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Idle) != 1 || report.Idle[0].TransactionalID != oldID {
		t.Fatalf("report %+v, want the old-format writer idle", report)
	}
	if ws := p.TxnWriters(); len(ws) != 0 {
		t.Fatalf("writers kept after Resume: %+v, want none", ws)
	}
	mustAppend(t, p, kvBatch(t, 2, 4001, true, "B", "2"))
	mustAppend(t, p, markerBatch(t, 3, 4001, batch.ControlCommit))
	if got := rec.recorded(); len(got) != 1 || got[0].TransactionalID != p.TransactionalID(4001) {
		t.Fatalf("recorded %+v, want the writer with the current id", got)
	}
	if got, want := keysAt(consume(t, c, testTopic, 0, true, 2)), "0:A=1 2:B=2"; got != want {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
}
