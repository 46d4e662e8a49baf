package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestALostDestinationTransactionIsCopiedAgainInMapMode: a destination
// transaction that times out while the daemon is down is aborted by the
// destination; on restart the partition continues in map mode from the
// transaction's first record, copies its records again once the source
// commits, and loses nothing: every record a read_committed consumer sees on
// the source is visible on the destination, at the offset the map gives.
func TestALostDestinationTransactionIsCopiedAgainInMapMode(t *testing.T) {
	t.Parallel()
	lostTransactionCopiedAgain(t, memstore.New())
}

// failingPuts fails chosen Puts of one key (by their number, from 1),
// standing in for a crash between two steps of the recovery.
type failingPuts struct {
	statestore.Store
	key  string
	fail map[int]bool
	mu   sync.Mutex
	n    int
}

func (s *failingPuts) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if key == s.key || strings.HasPrefix(key, s.key+"/") {
		s.mu.Lock()
		s.n++
		fail := s.fail[s.n]
		s.mu.Unlock()
		if fail {
			return 0, errors.New("injected state store failure")
		}
	}
	return s.Store.Put(ctx, key, value, expect)
}

// TestARecoveryInterruptedAfterItWasDecidedCompletesTheSameWay: the state
// store refuses the first offset-map write after the recovery was recorded
// (the first batch copied again), so the partition fails and resumes: the
// recorded decision is completed, not decided again from a destination that
// now holds more aborted data.
func TestARecoveryInterruptedAfterItWasDecidedCompletesTheSameWay(t *testing.T) {
	t.Parallel()
	// Offset-map writes: 1 is the recovery's own; 2 the first batch copied
	// again.
	lostTransactionCopiedAgain(t, &failingPuts{Store: memstore.New(), key: statestore.OffsetMapKey("test", "slow", 0), fail: map[int]bool{2: true}})
}

func lostTransactionCopiedAgain(t *testing.T, store statestore.Store) {
	f := newFixture(t)
	f.createTopic(t, "slow", 1)
	ctx := context.Background()
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("slow"))
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("slow"), kgo.TransactionalID("slow-txn"), kgo.TransactionTimeout(time.Minute))
	put := func(cl *kgo.Client, vals ...string) {
		t.Helper()
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k-" + v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(plain, "p0", "p1")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	put(txn, "t0", "t1")
	put(plain, "p2")

	cfg := f.config(t, "slow", "mirror.transaction.timeout.ms: 1000")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "slow", 1)
	stopEngine(t, e) // a shutdown keeps destination transactions open for the next start
	if lso := listOffset(t, f.dstCl, "slow", true); lso != 2 {
		t.Fatalf("destination last stable offset %d after the shutdown, want 2 (the replayed transaction is open)", lso)
	}
	kfaketest.WaitFor(t, "the destination times the transaction out", func() (bool, string) {
		hw, lso := listOffset(t, f.dstCl, "slow", false), listOffset(t, f.dstCl, "slow", true)
		return hw == 6 && lso == 6, "high watermark and last stable offset not both 6 (abort marker at 5)"
	})

	put(txn, "t2")
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	put(plain, "p3")

	e2 := startEngine(t, cfg, store)
	f.waitMirrored(t, e2, "slow", 1)
	ps := e2.Status().Mirrors[0].Partitions[0]
	if ps.Mode != "map" {
		t.Fatalf("mode %q, want map after the lost transaction", ps.Mode)
	}
	if !strings.Contains(strings.Join(ps.Notes, "\n"), "aborted a replayed transaction") {
		t.Fatalf("describe notes %q do not say why the partition runs in map mode", ps.Notes)
	}

	src, err := verify.ReadLog(ctx, f.srcCl, "slow", 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := verify.ReadLog(ctx, f.dstCl, "slow", 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := offsetmap.Load(ctx, store, "test", "slow", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := verify.DiffMapped(src, dst, m.Lookup); diff != "" {
		t.Fatalf("%s (offset map %v)", diff, m.Ranges())
	}
	// The transaction's first record is where the copy restarted; below it
	// offsets are kept.
	if at, _ := m.Lookup(1); at != 1 {
		t.Fatalf("source offset 1 maps to %d, want 1 (kept)", at)
	}
	if at, _ := m.Lookup(2); at != 6 {
		t.Fatalf("source offset 2 (the lost transaction's first record) maps to %d, want 6 (after the abort marker)", at)
	}
	var visible []string
	for _, d := range dst.Entries {
		if d.Visible && !d.Control {
			visible = append(visible, string(d.Value))
		}
	}
	if got, want := strings.Join(visible, ","), "p0,p1,p2,t0,t1,p2,t2,p3"; got != want {
		t.Fatalf("destination read_committed %s, want %s (the first p2 is the copy made before the transaction was lost)", got, want)
	}
	if !bytes.Equal(dst.Entries[len(dst.Entries)-1].Value, []byte("p3")) {
		t.Fatalf("last destination entry %+v, want p3", dst.Entries[len(dst.Entries)-1])
	}
}

// TestATransactionTheDestinationTimesOutWhileMirroringIsCopiedAgain: the
// source keeps a transaction open longer than the destination transaction
// timeout while the daemon runs; the destination aborts the replayed
// transaction, and when the source commits, the partition recovers in map
// mode and the committed records are visible on the destination.
func TestATransactionTheDestinationTimesOutWhileMirroringIsCopiedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "sleepy", 1)
	ctx := context.Background()
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("sleepy"))
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("sleepy"), kgo.TransactionalID("sleepy-txn"), kgo.TransactionTimeout(time.Minute))
	put := func(cl *kgo.Client, vals ...string) {
		t.Helper()
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := startEngine(t, f.config(t, "sleepy", "mirror.transaction.timeout.ms: 1000"), memstore.New())
	put(plain, "a")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	put(txn, "x", "y")
	f.waitMirrored(t, e, "sleepy", 1)
	kfaketest.WaitFor(t, "the destination times the transaction out", func() (bool, string) {
		hw, lso := listOffset(t, f.dstCl, "sleepy", false), listOffset(t, f.dstCl, "sleepy", true)
		return hw == 4 && lso == 4, "high watermark and last stable offset not both 4 (abort marker at 3)"
	})
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	put(plain, "b")
	f.waitMirrored(t, e, "sleepy", 1)
	if ps := e.Status().Mirrors[0].Partitions[0]; ps.Mode != "map" {
		t.Fatalf("mode %q, want map", ps.Mode)
	}
	dst, err := verify.ReadLog(ctx, f.dstCl, "sleepy", 0)
	if err != nil {
		t.Fatal(err)
	}
	var visible []string
	for _, d := range dst.Entries {
		if d.Visible && !d.Control {
			visible = append(visible, string(d.Value))
		}
	}
	if got, want := strings.Join(visible, ","), "a,x,y,b"; got != want {
		t.Fatalf("destination read_committed %s, want %s", got, want)
	}
}

// visibleValues lists the values a read_committed consumer sees.
func visibleValues(l *verify.Log) string {
	var vs []string
	for _, e := range l.Entries {
		if e.Visible && !e.Control {
			vs = append(vs, string(e.Value))
		}
	}
	return strings.Join(vs, ",")
}

// checkMappedCopy checks that every source entry is on the destination at
// the offset the stored map gives, with the same fate, and that the
// read_committed view of the destination is want.
func checkMappedCopy(t *testing.T, f *fixture, store statestore.Store, topic, want string) {
	t.Helper()
	f.checkMapped(t, store, topic)
	dst, err := verify.ReadLog(context.Background(), f.dstCl, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := visibleValues(dst); got != want {
		t.Fatalf("destination read_committed %s, want %s", got, want)
	}
}

// TestAStopWithAnOpenTransactionThenStartCopiesItAgain: the source is
// 0 committed, 1 open-1, 2 open-2, 3 COMMIT, 4 after. A stop while only
// 0 and 1 are mirrored aborts the destination transaction (ABORT at 2,
// where the source has open-2). After the source commits, a start finds
// the ABORT where the source did not abort, continues in map mode from the
// transaction's first record and copies it again: every committed source
// record is visible on the destination exactly once.
func TestAStopWithAnOpenTransactionThenStartCopiesItAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "halt", 1)
	ctx := context.Background()
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("halt"))
	txn := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("halt"), kgo.TransactionalID("halt-txn"))
	put := func(cl *kgo.Client, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	put(plain, "committed")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	put(txn, "open-1")
	store := memstore.New()
	e := startEngine(t, f.config(t, "halt"), store)
	f.waitMirrored(t, e, "halt", 1)
	if _, err := e.StopTopics(kfaketest.Context(t), "test", []string{"halt"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "halt", 0, "STOPPED")
	put(txn, "open-2")
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	put(plain, "after")
	if _, err := e.StartTopics(kfaketest.Context(t), "test", []string{"halt"}, nil); err != nil {
		t.Fatal(err)
	}
	f.waitMirrored(t, e, "halt", 1)
	ps := e.Status().Mirrors[0].Partitions[0]
	if ps.Mode != "map" || !strings.Contains(strings.Join(ps.Notes, "\n"), "aborted a replayed transaction") {
		t.Fatalf("mode %q notes %q: want map mode and a note saying the stop's abort differs from the source", ps.Mode, ps.Notes)
	}
	checkMappedCopy(t, f, store, "halt", "committed,open-1,open-2,after")
}

// TestAForeignRecordWrittenWhileDownIsReportedAndNoSourceRecordSkipped: a
// producer writes to the mirror topic while the daemon is down; at the
// restart the record is found (it is not the source's record at that
// offset), the partition continues in map mode after it, and every source
// record is on the destination.
func TestAForeignRecordWrittenWhileDownIsReportedAndNoSourceRecordSkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "intruded", 1)
	src := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("intruded"))
	put := func(cl *kgo.Client, vs ...string) { t.Helper(); putValues(t, cl, vs...) }
	put(src, "s0", "s1", "s2")
	store := memstore.New()
	cfg := f.config(t, "intruded")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "intruded", 1)
	stopEngine(t, e)
	put(kfaketest.NewClient(t, f.dst, kgo.DefaultProduceTopic("intruded")), "foreign")
	put(src, "s3", "s4")

	e = startEngine(t, cfg, store)
	f.waitMirrored(t, e, "intruded", 1)
	ps := e.Status().Mirrors[0].Partitions[0]
	if ps.Mode != "map" || !strings.Contains(strings.Join(ps.Notes, "\n"), "destination offset 3") {
		t.Fatalf("mode %q notes %q: want map mode and a note naming destination offset 3", ps.Mode, ps.Notes)
	}
	checkMappedCopy(t, f, store, "intruded", "s0,s1,s2,foreign,s3,s4")
}

// TestWithMismatchActionFailTheForeignRecordFailsThePartitionUntilStarted:
// mirror.destination.mismatch.action=fail makes the partition wait with a
// reason naming the offset and the command; after the operator switches to
// map and starts the topic, it continues in map mode with nothing lost.
func TestWithMismatchActionFailTheForeignRecordFailsThePartitionUntilStarted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "strict", 1)
	ctx := context.Background()
	src := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("strict"))
	put := func(cl *kgo.Client, vs ...string) { t.Helper(); putValues(t, cl, vs...) }
	put(src, "s0", "s1")
	store := memstore.New()
	cfg := f.config(t, "strict", "    mirror.destination.mismatch.action: fail")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "strict", 1)
	stopEngine(t, e)
	put(kfaketest.NewClient(t, f.dst, kgo.DefaultProduceTopic("strict")), "foreign")
	put(src, "s2")

	e = startEngine(t, cfg, store)
	ps := waitState(t, e, "strict", 0, "FAILED")
	for _, want := range []string{"topic strict partition 0", "destination offset 2", "mirror.destination.mismatch.action", "kmirror mirrors start --mirror test --topics 'strict'"} {
		if !strings.Contains(ps.LastError, want) || ps.Retry != "NonRetryable" {
			t.Fatalf("failure %q (retry %s) does not say %q", ps.LastError, ps.Retry, want)
		}
	}
	if hw := listOffset(t, f.dstCl, "strict", false); hw != 3 {
		t.Fatalf("destination end %d after the failure, want 3 (nothing appended)", hw)
	}
	if err := e.Reload(ctx, f.config(t, "strict")); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, "the operator's start is taken", func() (bool, string) {
		_, err := e.StartTopics(kfaketest.Context(t), "test", []string{"strict"}, nil)
		return err == nil, fmt.Sprint(err)
	})
	f.waitMirrored(t, e, "strict", 1)
	checkMappedCopy(t, f, store, "strict", "s0,s1,foreign,s2")
}

// failingWriterRecord fails the first write of the partition record that
// records a transactional writer at epoch 1 (its re-initialisation),
// standing in for a crash between InitProducerId and the record of its
// answer.
type failingWriterRecord struct {
	statestore.Store
	mu     sync.Mutex
	failed bool
}

var writerAtEpoch1 = regexp.MustCompile(`"transactional_id":"[^"]+","producer_id":\d+,"epoch":1\}`)

func (s *failingWriterRecord) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s.mu.Lock()
	fail := !s.failed && writerAtEpoch1.Match(value)
	s.failed = s.failed || fail
	s.mu.Unlock()
	if fail {
		return 0, errors.New("injected state store failure")
	}
	return s.Store.Put(ctx, key, value, expect)
}

// TestAWriterReinitialisedBeforeAStoreErrorIsNotALostTransaction: the
// writer of a source producer is forgotten when idle, and re-initialised
// (InitProducerId bumps its epoch) at the producer's next transaction; the
// store refuses the record of the new epoch. The destination then holds an
// epoch the record does not, but nothing of the transaction: the retry
// proves the log, keeps preserve mode and copies nothing twice.
func TestAWriterReinitialisedBeforeAStoreErrorIsNotALostTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "reinit", 1)
	store := &failingWriterRecord{Store: memstore.New()}
	e := startEngine(t, f.config(t, "reinit", "mirror.transaction.writer.idle.ms: 1"), store)
	f.produce(t, "reinit", 3, "reinit-txn")
	f.waitMirrored(t, e, "reinit", 1)
	f.produce(t, "reinit", 3, "reinit-txn") // the same source producer, idle meanwhile: its writer is initialised again
	f.waitMirrored(t, e, "reinit", 1)
	store.mu.Lock()
	failed := store.failed
	store.mu.Unlock()
	if !failed {
		t.Fatal("the writer's re-initialisation was not recorded at epoch 1: the test did not inject its failure")
	}
	ps := e.Status().Mirrors[0].Partitions[0]
	if ps.Mode != "preserve" || len(ps.Notes) != 0 {
		t.Fatalf("mode %q notes %q: want preserve mode and no note", ps.Mode, ps.Notes)
	}
	f.verify(t, "reinit", 1)
}

// TestMapModeStartsAtALogStartInsideABatch: beyond the filler budget, a
// source whose log starts inside a batch runs in map mode from the log
// start itself (not from the batch's base, which the source refuses), also
// when the first copy failed before anything was appended and the
// partition resumes with an empty offset map.
func TestMapModeStartsAtALogStartInsideABatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimmedTopic(t, "cut", nil, 275)
	// Offset-map writes: 1 is the decision's (empty map), 2 the first batch's.
	store := &failingPuts{Store: memstore.New(), key: statestore.OffsetMapKey("test", "cut", 0), fail: map[int]bool{2: true}}
	e := startEngine(t, f.config(t, "cut", "mirror.offset.alignment.max.records: 0"), store)
	f.waitMirrored(t, e, "cut", 1)
	store.mu.Lock()
	puts := store.n
	store.mu.Unlock()
	if puts < 3 {
		t.Fatalf("%d offset-map writes: the refused first batch was not retried", puts)
	}
	ctx := context.Background()
	src, err := verify.ReadLog(ctx, f.srcCl, "cut", 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := verify.ReadLog(ctx, f.dstCl, "cut", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Entries) != 225 || src.Entries[0].Offset != 275 || len(dst.Entries) != 225 || dst.Entries[0].Offset != 0 {
		t.Fatalf("source %d entries from %d, destination %d entries from %d; want 225 from 275, and 225 from 0",
			len(src.Entries), src.Entries[0].Offset, len(dst.Entries), dst.Entries[0].Offset)
	}
	m, err := offsetmap.Load(ctx, store, "test", "cut", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := verify.DiffMapped(src, dst, m.Lookup); diff != "" {
		t.Fatal(diff)
	}
	if ps := e.Status().Mirrors[0].Partitions[0]; ps.Mode != "map" {
		t.Fatalf("mode %q, want map", ps.Mode)
	}
}

// putValues produces one record per value, synchronously.
func putValues(t *testing.T, cl *kgo.Client, vs ...string) {
	t.Helper()
	for _, v := range vs {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}
