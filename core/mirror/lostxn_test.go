package mirror

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// scanBatch builds a one-record batch of producer pid at offset off
// (a marker when ctl).
func scanBatch(t *testing.T, pid int64, off int64, ctl bool) batch.Batch {
	t.Helper()
	opts := batch.EncodeOptions{BaseOffset: off, ProducerID: pid, Transactional: true}
	var (
		b   batch.Batch
		err error
	)
	if ctl {
		b, err = batch.EncodeControl(opts, batch.ControlAbort, 0, 1)
	} else {
		b, err = batch.Encode(opts, []batch.Record{{Offset: off, Value: []byte("v")}})
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLostScanFindsTheStartOfTheLastTransactionBeforeItsMarker(t *testing.T) {
	type ev struct {
		pid int64
		off int64
		ctl bool
	}
	cases := []struct {
		name       string
		log        []ev
		atStart    bool
		want       int64
		complete   bool
		wantErr    string
		wantErrSen error
	}{
		{name: "data between two markers", log: []ev{{7, 0, false}, {7, 2, true}, {9, 3, false}, {7, 5, false}, {7, 6, false}, {9, 8, false}, {7, 9, true}},
			want: 5, complete: true},
		{name: "marker only", log: []ev{{7, 0, false}, {7, 2, true}, {9, 3, false}, {7, 9, true}}, want: 9, complete: true},
		{name: "previous marker not in the stretch", log: []ev{{7, 5, false}, {7, 9, true}}, complete: false},
		{name: "previous marker not in the stretch, at log start", log: []ev{{7, 5, false}, {7, 9, true}}, atStart: true, want: 5, complete: true},
		{name: "no marker in the stretch", log: []ev{{9, 5, false}}, complete: false},
		{name: "no marker at all", log: []ev{{9, 5, false}}, atStart: true, complete: true, wantErrSen: errLostNotFound},
		{name: "records after the last marker", log: []ev{{7, 2, true}, {7, 5, false}}, complete: true, wantErr: "still open"},
		{name: "two lost producers: the earlier start", log: []ev{{7, 1, true}, {8, 2, true}, {8, 3, false}, {7, 4, false}, {7, 6, true}, {8, 7, true}},
			want: 3, complete: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pids := []int64{7}
			if strings.HasPrefix(tc.name, "two") {
				pids = append(pids, 8)
			}
			s := newLostScan(pids)
			for _, e := range tc.log {
				s.add(scanBatch(t, e.pid, e.off, e.ctl))
			}
			got, complete, err := s.start(tc.atStart)
			switch {
			case tc.wantErrSen != nil:
				if !errors.Is(err, tc.wantErrSen) {
					t.Fatalf("err = %v, want %v", err, tc.wantErrSen)
				}
				return
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if complete != tc.complete || (complete && got != tc.want) {
				t.Fatalf("start = %d complete %v, want %d complete %v", got, complete, tc.want, tc.complete)
			}
		})
	}
}

// TestALostDestinationTransactionIsCopiedAgainInMapMode: a destination
// transaction that times out while the daemon is down is aborted by the
// destination; on restart the partition continues in map mode from the
// transaction's first record, copies its records again once the source
// commits, and loses nothing: every record a read_committed consumer sees on
// the source is visible on the destination, at the offset the map gives.
func TestALostDestinationTransactionIsCopiedAgainInMapMode(t *testing.T) {
	lostTransactionCopiedAgain(t, memstore.New())
}

// failingPuts fails chosen Puts of one key and the keys under it (by their
// number, from 1), standing in for a crash between two steps of the recovery.
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
	// Offset-map writes (snapshot and segments): 1 is the recovery's own; 2
	// the first batch copied again.
	lostTransactionCopiedAgain(t, &failingPuts{Store: memstore.New(), key: statestore.OffsetMapKey("test", "slow", 0), fail: map[int]bool{2: true}})
}

func lostTransactionCopiedAgain(t *testing.T, store statestore.Store) {
	f := newFixture(t)
	f.createTopic(t, "slow", 1)
	ctx := context.Background()
	plain := f.client(t, f.src, kgo.DefaultProduceTopic("slow"))
	txn := f.client(t, f.src, kgo.DefaultProduceTopic("slow"), kgo.TransactionalID("slow-txn"), kgo.TransactionTimeout(time.Minute))
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
	eventually(t, "the destination times the transaction out", func() (bool, string) {
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
	f := newFixture(t)
	f.createTopic(t, "sleepy", 1)
	ctx := context.Background()
	plain := f.client(t, f.src, kgo.DefaultProduceTopic("sleepy"))
	txn := f.client(t, f.src, kgo.DefaultProduceTopic("sleepy"), kgo.TransactionalID("sleepy-txn"), kgo.TransactionTimeout(time.Minute))
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
	eventually(t, "the destination times the transaction out", func() (bool, string) {
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
