package kafkalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// fill creates topic t with 10 batches of 50 records (offsets 0-499) and
// moves its log start to 275, inside the sixth batch.
func fill(t *testing.T) *kgo.Client {
	t.Helper()
	c := kfaketest.NewCluster(t, kfake.SeedTopics(1, "t"))
	cl := kfaketest.NewClient(t, c, kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(50*time.Millisecond))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%d", i*50+j)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 275})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, os); err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestBoundsReaderAndFirstBatchAt(t *testing.T) {
	t.Parallel()
	cl := fill(t)
	ctx := context.Background()
	start, end, err := Bounds(ctx, cl, "t", 0)
	if err != nil || start != 275 || end != 500 {
		t.Fatalf("Bounds = %d, %d, %v; want 275, 500", start, end, err)
	}
	base, err := FirstBatchAt(ctx, cl, "t", 0, 275, end)
	if err != nil || base != 250 {
		t.Fatalf("FirstBatchAt(275) = %d, %v; want 250 (the batch holding the log start)", base, err)
	}
	if at, err := FirstBatchAt(ctx, cl, "t", 0, end, end); err != nil || at != end {
		t.Fatalf("FirstBatchAt(end) = %d, %v; want %d", at, err, end)
	}
	// The reader delivers each batch holding an offset of [300, 420) once,
	// in order, the first one starting before 300.
	r := NewReader(cl, "t", 0, 300, 420)
	var bases []int64
	next := int64(-1)
	for {
		b, ok, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if next >= 0 && b.BaseOffset() != next {
			t.Fatalf("batch at %d after one ending at %d", b.BaseOffset(), next)
		}
		bases, next = append(bases, b.BaseOffset()), b.NextOffset()
	}
	if fmt.Sprint(bases) != "[300 350 400]" {
		t.Fatalf("batches %v, want [300 350 400]", bases)
	}
	ents, err := func() ([]Entry, error) {
		b, _, err := NewReader(cl, "t", 0, 275, end).Next(ctx)
		if err != nil {
			return nil, err
		}
		return Entries(b)
	}()
	if err != nil || len(ents) != 50 || ents[25].Offset != 275 || string(ents[25].Value) != "275" {
		t.Fatalf("entries of the batch at 250: %d entries, err %v", len(ents), err)
	}
	if d := DiffEntry(ents[0], ents[1], false); d == "" {
		t.Fatal("DiffEntry found no difference between two different records")
	}
}
