package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestPauseKeepsTheResumePointAndResumeContinuesWithNoGap: paused
// partitions copy nothing more (also across a restart, the pause being
// recorded); resume continues where they stopped and the logs end
// identical.
func TestPauseKeepsTheResumePointAndResumeContinuesWithNoGap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "held", 2)
	f.produce(t, "held", 50, "tx-h1")
	store := memstore.New()
	cfg := f.config(t, "held,witness")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "held", 2)

	res, err := e.Pause(kfaketest.Context(t), "test", []string{"hel.*"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Partitions) != 2 || states(e, "held") != "0:PAUSED 1:PAUSED" {
		t.Fatalf("after pause: result %d partitions, states %s", len(res.Partitions), states(e, "held"))
	}
	before := []int64{endOffset(t, f.dstCl, "held", 0), endOffset(t, f.dstCl, "held", 1)}
	f.produce(t, "held", 50, "tx-h2")
	// Every source broker's fetch session has since delivered newer
	// records: unpaused, held's would have been copied by now.
	f.witness(t, e, "witness")
	if after := []int64{endOffset(t, f.dstCl, "held", 0), endOffset(t, f.dstCl, "held", 1)}; after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("destination moved while paused: %v → %v", before, after)
	}

	// The pause is recorded: a restarted daemon keeps the partitions paused.
	stopEngine(t, e)
	e2 := startEngine(t, cfg, store)
	waitState(t, e2, "held", 0, "PAUSED")
	waitState(t, e2, "held", 1, "PAUSED")
	if after := endOffset(t, f.dstCl, "held", 0); after != before[0] {
		t.Fatalf("destination moved after a restart while paused: %d → %d", before[0], after)
	}

	if _, err := e2.Resume(kfaketest.Context(t), "test", []string{"other.*"}); !errors.Is(err, admin.ErrNoMatch) || !strings.Contains(err.Error(), `"other.*"`) {
		t.Fatalf("resuming a pattern that matches nothing: %v, want admin.ErrNoMatch naming it", err)
	}
	if s := states(e2, "held"); s != "0:PAUSED 1:PAUSED" {
		t.Fatalf("resuming another pattern changed %s", s)
	}
	if _, err := e2.Resume(kfaketest.Context(t), "test", nil); err != nil {
		t.Fatal(err)
	}
	f.waitMirrored(t, e2, "held", 2)
	f.verify(t, "held", 2)
}

// TestTheLatestPauseOrResumeWins: resuming one topic after pausing all
// resumes that topic only; pausing all again pauses it again.
func TestTheLatestPauseOrResumeWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "one", 1)
	f.createTopic(t, "two", 1)
	f.produce(t, "one", 10, "tx-1")
	f.produce(t, "two", 10, "tx-2")
	e := startEngine(t, f.config(t, "one|two"), memstore.New())
	f.waitMirrored(t, e, "one", 1)
	f.waitMirrored(t, e, "two", 1)
	ctx := kfaketest.Context(t)
	if _, err := e.Pause(ctx, "test", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(ctx, "test", []string{"one"}); err != nil {
		t.Fatal(err)
	}
	if s1, s2 := states(e, "one"), states(e, "two"); s1 != "0:MIRRORING" || s2 != "0:PAUSED" {
		t.Fatalf("after pause all, resume one: one %s, two %s", s1, s2)
	}
	if _, err := e.Pause(ctx, "test", []string{"o.*"}); err != nil {
		t.Fatal(err)
	}
	if s := states(e, "one"); s != "0:PAUSED" {
		t.Fatalf("after pause o.*: one %s", s)
	}
	if _, err := e.Pause(ctx, "nope", nil); !errors.Is(err, admin.ErrNoMirror) {
		t.Fatalf("pause of an unknown mirror: %v", err)
	}
	if _, err := e.Pause(ctx, "test", []string{"("}); !errors.Is(err, admin.ErrInvalidRequest) {
		t.Fatalf("pause with a bad regex: %v", err)
	}
}

// TestFailoverStopsTopicsAbortsOpenTransactionsAndSurvivesARestart: the
// partitions end STOPPED with the open destination transaction aborted
// (last stable offset = high watermark), the result gives the last
// mirrored offsets and the synced group; a repeated failover returns the
// same; after a restart nothing more is mirrored, and a partition added on
// the source is not created on the destination.
func TestFailoverStopsTopicsAbortsOpenTransactionsAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "moving", 1)
	ctx := kfaketest.Context(t)
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("moving"))
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("moving"), kgo.TransactionalID("moving-txn"))
	for i := 0; i < 5; i++ {
		if err := plain.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := kfaketest.NewClient(t, f.src, kgo.ConsumerGroup("app-moving"), kgo.ConsumeTopics("moving"), kgo.DisableAutoCommit())
	fetched := 0
	for fetched < 3 {
		fs := consumer.PollRecords(ctx, 3-fetched)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fetched += fs.NumRecords()
	}
	if err := consumer.CommitRecords(ctx, &kgo.Record{Topic: "moving", Partition: 0, Offset: 2}); err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txn.EndTransaction(context.Background(), kgo.TryAbort) }()

	store := memstore.New()
	cfg := f.config(t, "moving,witness", "    mirror.groups.include: \"app-.*\"")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "moving", 1)
	res, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test", Topics: []string{"moving"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Topics) != 1 || res.Topics[0].Topic != "moving" || len(res.Topics[0].Partitions) != 1 || res.Topics[0].Partitions[0].LastMirroredOffset != 5 {
		t.Fatalf("failover result %+v, want moving/0 last mirrored offset 5", res)
	}
	if strings.Join(res.Groups, ",") != "app-moving" {
		t.Fatalf("synced groups %v, want [app-moving]", res.Groups)
	}
	if hw, lso := listOffset(t, f.dstCl, "moving", false), listOffset(t, f.dstCl, "moving", true); hw != 7 || lso != 7 {
		t.Fatalf("destination high watermark %d, last stable offset %d; want both 7 (abort marker at 6)", hw, lso)
	}
	offs, err := kadm.NewClient(f.dstCl).FetchOffsets(ctx, "app-moving")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("moving", 0); !ok || o.At != 3 {
		t.Fatalf("destination offset of app-moving: %+v (found %v), want 3", o, ok)
	}
	again, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test", Topics: []string{"moving"}})
	if err != nil || len(again.Topics) != 1 || again.Topics[0].Partitions[0].LastMirroredOffset != 5 {
		t.Fatalf("repeated failover: %+v, %v", again, err)
	}

	stopEngine(t, e)
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(f.srcCl).CreatePartitions(ctx, 2, "moving"); err != nil {
		t.Fatal(err)
	}
	e2 := startEngine(t, cfg, store)
	waitState(t, e2, "moving", 0, "STOPPED")
	// A topic sync round has run since the restart, with moving's second
	// partition on the source: it expanded nothing.
	f.witness(t, e2, "witness")
	if hw := listOffset(t, f.dstCl, "moving", false); hw != 7 {
		t.Fatalf("destination high watermark %d after a restart, want 7 (nothing mirrored after the failover)", hw)
	}
	if n := partitionCount(t, f.dstCl, "moving"); n != 1 {
		t.Fatalf("destination has %d partitions, want 1 (a failed-over topic is not expanded)", n)
	}
}

// TestAFailoverRecordedBeforeACrashCompletesOnStart: the daemon died after
// recording the stop and before the partitions stopped; on start they go to
// STOPPED with the open transaction aborted.
func TestAFailoverRecordedBeforeACrashCompletesOnStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "halfway", 1)
	ctx := kfaketest.Context(t)
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("halfway"), kgo.TransactionalID("halfway-txn"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txn.EndTransaction(context.Background(), kgo.TryAbort) }()
	store := memstore.New()
	cfg := f.config(t, "halfway")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "halfway", 1)
	stopEngine(t, e)
	b, _ := json.Marshal(control.Record{Stopped: []control.Rule{{Topics: []string{"half.*"}, On: true}}})
	if _, err := store.Put(ctx, statestore.ControlKey("test"), b, statestore.Absent); err != nil {
		t.Fatal(err)
	}
	e2 := startEngine(t, cfg, store)
	ps := waitState(t, e2, "halfway", 0, "STOPPED")
	if ps.LastMirroredOffset != 0 {
		t.Fatalf("last mirrored offset %d, want 0", ps.LastMirroredOffset)
	}
	if hw, lso := listOffset(t, f.dstCl, "halfway", false), listOffset(t, f.dstCl, "halfway", true); hw != 2 || lso != 2 {
		t.Fatalf("high watermark %d, last stable offset %d; want both 2", hw, lso)
	}
}

// TestPlannedFailoverWaitsForCatchUpAndChangesNothingWhenItTimesOut: a
// paused topic never catches up, so a failover that waits for it fails
// after the wait and leaves the partition as it was; without lag it
// proceeds.
func TestPlannedFailoverWaitsForCatchUpAndChangesNothingWhenItTimesOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "planned", 1)
	f.produce(t, "planned", 20, "tx-p")
	e := startEngine(t, f.config(t, "planned"), memstore.New())
	f.waitMirrored(t, e, "planned", 1)
	ctx := kfaketest.Context(t)
	if _, err := e.Pause(ctx, "test", nil); err != nil {
		t.Fatal(err)
	}
	f.produce(t, "planned", 5, "tx-q")
	_, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test", WaitForCatchUp: 700 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "not caught up within") || !strings.Contains(err.Error(), "planned/0 is PAUSED") {
		t.Fatalf("err = %v, want a catch-up timeout naming the partition", err)
	}
	if s := states(e, "planned"); s != "0:PAUSED" {
		t.Fatalf("state %s after a failed planned failover, want PAUSED", s)
	}
	if _, err := e.Resume(ctx, "test", nil); err != nil {
		t.Fatal(err)
	}
	res, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test", WaitForCatchUp: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	src := endOffset(t, f.srcCl, "planned", 0)
	if res.Topics[0].Partitions[0].LastMirroredOffset != src-1 {
		t.Fatalf("last mirrored offset %d, want %d (caught up)", res.Topics[0].Partitions[0].LastMirroredOffset, src-1)
	}
	f.verify(t, "planned", 1)
}

// TestStoppedTopicsStartAgainAndContinueWithNoGap: start after stop takes
// the partitions through PREPARING back to MIRRORING from the destination's
// end; a start whose exclusion covers the topic leaves it stopped.
func TestStoppedTopicsStartAgainAndContinueWithNoGap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "again", 1)
	f.produce(t, "again", 20, "tx-a1")
	e := startEngine(t, f.config(t, "again"), memstore.New())
	f.waitMirrored(t, e, "again", 1)
	ctx := kfaketest.Context(t)
	if _, err := e.StopTopics(ctx, "test", nil); !errors.Is(err, admin.ErrInvalidRequest) {
		t.Fatalf("stop without topics: %v", err)
	}
	for _, p := range []string{"again", "ag.*"} {
		if _, err := e.StopTopics(ctx, "test", []string{p}); err != nil {
			t.Fatal(err)
		}
	}
	f.produce(t, "again", 20, "tx-a2")
	if _, err := e.StartTopics(ctx, "test", []string{"again"}, []string{"ag.*"}); err != nil {
		t.Fatal(err)
	}
	if s := states(e, "again"); s != "0:STOPPED" {
		t.Fatalf("a start whose exclusion covers the topic changed it: %s", s)
	}
	res, err := e.StartTopics(ctx, "test", []string{"again"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Partitions) != 1 || res.Partitions[0].State == "STOPPED" {
		t.Fatalf("start result %+v", res.Partitions)
	}
	f.waitMirrored(t, e, "again", 1)
	f.verify(t, "again", 1)
}
