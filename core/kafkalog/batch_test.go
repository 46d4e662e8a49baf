package kafkalog

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The batcher answers what Bounds answers, for partitions asking together,
// and a partition the broker does not know fails alone.
func TestBoundsBatcherAnswersEachPartitionAsBoundsDoes(t *testing.T) {
	t.Parallel()
	cl := fill(t)
	ctx := context.Background()
	b := NewBoundsBatcher(cl, 20*time.Millisecond)
	type answer struct {
		start, end int64
		err        error
	}
	got := make([]answer, 3)
	var wg sync.WaitGroup
	for i, p := range []int32{0, 0, 7} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, e, err := b.Bounds(ctx, "t", p)
			got[i] = answer{s, e, err}
		}()
	}
	wg.Wait()
	for i := range 2 {
		if a := got[i]; a.err != nil || a.start != 275 || a.end != 500 {
			t.Fatalf("Bounds(t, 0) through the batcher = %d, %d, %v; want 275, 500", a.start, a.end, a.err)
		}
	}
	if a := got[2]; !errors.Is(a.err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("Bounds(t, 7) through the batcher: %v, want UNKNOWN_TOPIC_OR_PARTITION", a.err)
	}
	if n := b.Batches(); n != 1 {
		t.Fatalf("%d batches for three requests arriving together, want 1", n)
	}
	// A later request is answered by a new request, never from the first.
	if err := cl.ProduceSync(ctx, fillRecord()).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if s, e, err := b.Bounds(ctx, "t", 0); err != nil || s != 275 || e != 501 {
		t.Fatalf("Bounds after one more record = %d, %d, %v; want 275, 501", s, e, err)
	}
	if n := b.Batches(); n != 2 {
		t.Fatalf("%d batches, want 2", n)
	}
}

func fillRecord() *kgo.Record { return &kgo.Record{Value: []byte("one more")} }

// Readers of many partitions stopping at once look their leaders up through
// one LeaderBatcher: the lookups that arrive together cost one Metadata
// request, and a partition the topic does not have gets its own error.
func TestLeaderBatcherGathersLookupsAndReadersUseIt(t *testing.T) {
	t.Parallel()
	cl := fill(t)
	ctx := context.Background()
	b := NewLeaderBatcher(cl, 20*time.Millisecond)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i, p := range []int32{0, 0, 0, 7} {
		wg.Go(func() {
			if p == 7 {
				_, _, errs[i] = b.Leader(ctx, "t", p)
				return
			}
			_, _, errs[i] = NewReader(cl, "t", p, 300, 420).WithLeaders(b).Next(ctx)
		})
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("reader %d through the batcher: %v", i, errs[i])
		}
	}
	if errs[3] == nil || !strings.Contains(errs[3].Error(), "t[7] not found in metadata") {
		t.Fatalf("Leader(t, 7) through the batcher: %v, want \"t[7] not found in metadata\"", errs[3])
	}
	if n := b.Batches(); n != 1 {
		t.Fatalf("%d Metadata requests for four lookups arriving together, want 1", n)
	}
	leader, id, err := Leader(ctx, cl, "t", 0)
	bl, bid, berr := b.Leader(ctx, "t", 0)
	if err != nil || berr != nil || leader != bl || id != bid {
		t.Fatalf("Leader = %d, %x, %v; through the batcher %d, %x, %v", leader, id, err, bl, bid, berr)
	}
}
