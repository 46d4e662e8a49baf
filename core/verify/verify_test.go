package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// newProducer returns a transactional producer to topic "t" of a cluster
// of its own.
func newProducer(t *testing.T) *kgo.Client {
	t.Helper()
	c := kfaketest.NewCluster(t, kfake.SeedTopics(1, "t"))
	return kfaketest.NewClient(t, c, kgo.DefaultProduceTopic("t"),
		kgo.TransactionalID("tx-"+t.Name()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

var ts = time.UnixMilli(1_700_000_000_000)

// write produces: k0 (committed txn), k1 (aborted txn), k2 plain with value v.
func write(t *testing.T, cl *kgo.Client, v string) {
	t.Helper()
	ctx := context.Background()
	for i, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Key: []byte{'k', byte('0' + i)}, Value: []byte("v"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k2"), Value: []byte(v), Timestamp: ts}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

func TestIdenticalLogsHaveNoDiffAndVisibilityIsComputed(t *testing.T) {
	t.Parallel()
	a, b := newProducer(t), newProducer(t)
	write(t, a, "same")
	write(t, b, "same")
	la, diff, err := Partition(context.Background(), a, b, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatalf("identical logs differ: %s", diff)
	}
	// offsets: 0 k0, 1 COMMIT, 2 k1, 3 ABORT, 4 k2, 5 COMMIT
	if len(la.Entries) != 6 {
		t.Fatalf("%d entries, want 6: %+v", len(la.Entries), la.Entries)
	}
	if !la.Entries[0].Visible || la.Entries[2].Visible || !la.Entries[4].Visible {
		t.Fatalf("read_committed visibility wrong: %+v", la.Entries)
	}
	if !la.Entries[1].Control || !la.Entries[3].Control || la.Entries[3].Marker != 0 {
		t.Fatalf("markers wrong: %+v", la.Entries)
	}
}

func TestDifferentValueIsReportedWithItsOffset(t *testing.T) {
	t.Parallel()
	a, b := newProducer(t), newProducer(t)
	write(t, a, "one")
	write(t, b, "two")
	_, diff, err := Partition(context.Background(), a, b, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff, "source offset 4: value differs") {
		t.Fatalf("diff = %q", diff)
	}
}

func TestDiffMappedFollowsTheOffsetMap(t *testing.T) {
	t.Parallel()
	src := &Log{Entries: []Entry{{Offset: 0, Key: []byte("a"), Visible: true}, {Offset: 5, Key: []byte("b"), Visible: true}}}
	dst := &Log{Entries: []Entry{{Offset: 0, Key: []byte("a"), Visible: true}, {Offset: 1, Key: []byte("b"), Visible: true}}}
	compact := func(o int64) (int64, bool) {
		switch o {
		case 0:
			return 0, true
		case 5:
			return 1, true
		}
		return 0, false
	}
	if diff := DiffMapped(src, dst, compact); diff != "" {
		t.Fatalf("identical mapped logs differ: %s", diff)
	}
	identity := func(o int64) (int64, bool) { return o, true }
	if diff := DiffMapped(src, dst, identity); !strings.Contains(diff, "source offset 5 maps to destination offset 5, which holds nothing") {
		t.Fatalf("diff = %q", diff)
	}
	none := func(int64) (int64, bool) { return 0, false }
	if diff := DiffMapped(src, dst, none); !strings.Contains(diff, "source offset 0 is not in the offset map") {
		t.Fatalf("diff = %q", diff)
	}
	dst.Entries[1].Key = []byte("x")
	if diff := DiffMapped(src, dst, compact); !strings.HasPrefix(diff, "source offset 5, destination offset 1:") {
		t.Fatalf("diff = %q", diff)
	}
}
