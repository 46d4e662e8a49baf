package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func produceTo(t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: []byte(prefix)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// identical checks that topic/p is the same on the two clusters, offset
// by offset (from the first cluster's point of view as the source).
func identical(t *testing.T, from, to *kgo.Client, topic string, p int32) {
	t.Helper()
	_, diff, err := verify.Partition(context.Background(), from, to, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatalf("%s/%d differs: %s", topic, p, diff)
	}
}

func waitMirrorCopied(t *testing.T, e *Engine, mirror, topic string, want int64) {
	t.Helper()
	kfaketest.WaitFor(t, mirror+" copies "+topic, func() (bool, string) {
		for _, m := range e.Status().Mirrors {
			if m.Name != mirror {
				continue
			}
			for _, p := range m.Partitions {
				if p.Topic == topic && p.State == "MIRRORING" && p.LastMirroredOffset+1 == want {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", m.Partitions)
		}
		return false, "no mirror " + mirror
	})
}

// TestFailbackCopiesOnlyWhatTheNewPrimaryGotAndTheRoundTripCompletes: A→B
// fails over, B takes writes; failback mirrors B→A continuing at the last
// mirrored offset (A ends identical to B); the failback mirror fails over,
// A takes writes, and A→B starts again, ending identical.
func TestFailbackCopiesOnlyWhatTheNewPrimaryGotAndTheRoundTripCompletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "trip", 1)
	ctx := kfaketest.Context(t)
	produceTo(t, f.srcCl, "trip", "a1", 10)
	store := memstore.New()
	e := startEngine(t, f.config(t, "trip"), store)
	f.waitMirrored(t, e, "trip", 1)
	if _, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "test"}); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("failback before a failover: %v", err)
	}
	if _, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test"}); err != nil {
		t.Fatal(err)
	}
	produceTo(t, f.dstCl, "trip", "b1", 7) // B is the primary now

	res, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mirror != "test-failback" || len(res.Topics) != 1 || res.Topics[0].Partitions[0].Action != admin.FailbackContinue || res.Topics[0].Partitions[0].From != 10 {
		t.Fatalf("failback result %+v", res)
	}
	waitMirrorCopied(t, e, "test-failback", "trip", endOffset(t, f.dstCl, "trip", 0))
	identical(t, f.dstCl, f.srcCl, "trip", 0)

	// The failback mirror is recorded: it runs again after a restart.
	stopEngine(t, e)
	e = startEngine(t, f.config(t, "trip"), store)
	if names := mirrorNames(e); names != "test,test-failback" {
		t.Fatalf("mirrors after a restart: %s", names)
	}
	produceTo(t, f.dstCl, "trip", "b2", 3)
	waitMirrorCopied(t, e, "test-failback", "trip", endOffset(t, f.dstCl, "trip", 0))
	identical(t, f.dstCl, f.srcCl, "trip", 0)

	// Starting A→B again while B→A still runs would copy in a circle.
	if _, err := e.StartTopics(ctx, "test", []string{"trip"}, nil); !errors.Is(err, admin.ErrConflict) || !strings.Contains(err.Error(), "test-failback") {
		t.Fatalf("start while the failback mirror runs: %v", err)
	}
	if _, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test-failback"}); err != nil {
		t.Fatal(err)
	}
	produceTo(t, f.srcCl, "trip", "a2", 5) // A is the primary again
	if _, err := e.StartTopics(ctx, "test", []string{".*"}, nil); err != nil {
		t.Fatal(err)
	}
	waitMirrorCopied(t, e, "test", "trip", endOffset(t, f.srcCl, "trip", 0))
	identical(t, f.srcCl, f.dstCl, "trip", 0)
}

// TestFailbackKeepsDivergedRecordsInASideTopicAndRecreatesOnlyWhenAllowed:
// A holds records beyond the last mirrored offset; failback copies them to
// the side topic and fails the partition with a reason; with AllowRecreate
// the topic is recreated on A and mirrored back from B with offsets
// preserved.
func TestFailbackKeepsDivergedRecordsInASideTopicAndRecreatesOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "split", 1)
	ctx := kfaketest.Context(t)
	produceTo(t, f.srcCl, "split", "a1", 10)
	e := startEngine(t, f.config(t, "split"), memstore.New())
	f.waitMirrored(t, e, "split", 1)
	if _, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test"}); err != nil {
		t.Fatal(err)
	}
	produceTo(t, f.srcCl, "split", "lost", 3) // written to A after the failover: never mirrored
	produceTo(t, f.dstCl, "split", "b1", 4)

	res, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pf := res.Topics[0].Partitions[0]
	if pf.Action != admin.FailbackFailed || pf.Diverged != 3 || pf.SideTopic != "split.kmirror-diverged" || !strings.Contains(pf.Reason, "--allow-recreate") {
		t.Fatalf("failback of a diverged partition: %+v", pf)
	}
	kfaketest.WaitFor(t, "the failback mirror's partition is FAILED", func() (bool, string) {
		for _, m := range e.Status().Mirrors {
			for _, p := range m.Partitions {
				if m.Name == "test-failback" && p.State == "FAILED" && p.Retry == "NonRetryable" && strings.Contains(p.LastError, "split.kmirror-diverged") {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%+v", e.Status())
	})
	// The FAILED partition is one line of the mirror's errors, with the
	// full reason as its cause.
	var line admin.LoopError
	for _, m := range e.Status().Mirrors {
		for _, le := range m.Errors {
			if m.Name == "test-failback" && le.Loop == "partition split/0" {
				line = le
			}
		}
	}
	if !strings.Contains(line.Cause, "split.kmirror-diverged") || line.Message == "" || strings.Contains(line.Message, "test-failback") {
		t.Fatalf("errors line of the FAILED partition: %+v", line)
	}
	side, err := verify.ReadLog(ctx, f.srcCl, "split.kmirror-diverged", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, en := range side.Entries {
		if !en.Control {
			keys = append(keys, string(en.Key))
		}
	}
	if strings.Join(keys, ",") != "lost-0,lost-1,lost-2" {
		t.Fatalf("side topic holds %v, want the three records A got after the failover", keys)
	}

	// Repeating without the flag changes nothing (and copies nothing twice).
	if _, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "test"}); err != nil {
		t.Fatal(err)
	}
	if n := endOffset(t, f.srcCl, "split.kmirror-diverged", 0); n != side.HighWatermark {
		t.Fatalf("side topic end %d after a repeated failback, want %d", n, side.HighWatermark)
	}

	res, err = e.Failback(ctx, admin.FailbackOrder{Mirror: "test", AllowRecreate: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Topics[0].Recreated || res.Topics[0].Partitions[0].Action != admin.FailbackRecreated {
		t.Fatalf("failback --allow-recreate: %+v", res)
	}
	waitMirrorCopied(t, e, "test-failback", "split", endOffset(t, f.dstCl, "split", 0))
	identical(t, f.dstCl, f.srcCl, "split", 0)
}

// TestFailbackContinuesPastTransactionsAbortedOnBothSides: a transaction
// open at the failover is aborted on the new primary by the failover and on
// the old source afterwards (its producer gave up, or the coordinator timed
// it out): both logs hold one ABORT marker after the last mirrored offset,
// so failback continues after it instead of calling the partition diverged.
func TestFailbackContinuesPastTransactionsAbortedOnBothSides(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "hung", 1)
	ctx := kfaketest.Context(t)
	produceTo(t, f.srcCl, "hung", "a1", 10)
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("hung"), kgo.TransactionalID("hung-txn"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open-1")}, &kgo.Record{Value: []byte("open-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, f.config(t, "hung"), memstore.New())
	f.waitMirrored(t, e, "hung", 1)
	if _, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil { // on the old source, later
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, "the old source's ABORT marker", func() (bool, string) {
		return listOffset(t, f.srcCl, "hung", false) == 13, "source end not 13"
	})
	produceTo(t, f.dstCl, "hung", "b1", 5)
	res, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if pf := res.Topics[0].Partitions[0]; pf.Action != admin.FailbackContinue || pf.From != 13 {
		t.Fatalf("failback: %+v, want continue from 13 (past the ABORT markers on both sides)", pf)
	}
	waitMirrorCopied(t, e, "test-failback", "hung", endOffset(t, f.dstCl, "hung", 0))
	a, err := verify.ReadLog(ctx, f.srcCl, "hung", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := verify.ReadLog(ctx, f.dstCl, "hung", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Same offsets, same records and visibility; the markers at 12 come from
	// different producers but both abort.
	if diff := verify.Diff(b, a); diff != "" {
		t.Fatalf("old source differs from the new primary: %s", diff)
	}
}
