package delivery_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/fetcher/delivery"
)

func TestQueueOrderAndCoalescing(t *testing.T) {
	t.Parallel()
	q := delivery.NewQueue()
	b, err := batch.Encode(batch.EncodeOptions{BaseOffset: 5}, []batch.Record{{Offset: 5, Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	q.Deliver(delivery.Fetched{HighWatermark: 1})
	q.Deliver(delivery.Fetched{HighWatermark: 2}) // replaces the first: both carry only watermarks
	q.Deliver(delivery.Fetched{Batches: []batch.Batch{b}, HighWatermark: 6})
	q.Deliver(delivery.Fetched{HighWatermark: 7})
	q.Deliver(delivery.Fetched{Err: fetcher.ErrDiverged})
	q.Deliver(delivery.Fetched{HighWatermark: 8})
	if q.Len() != 5 {
		t.Fatalf("Len %d, want 5", q.Len())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var hws []int64
	for range 5 {
		f, err := q.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hws = append(hws, f.HighWatermark)
		if f.HighWatermark == 6 && f.Bytes() != len(b) {
			t.Errorf("Bytes %d, want %d", f.Bytes(), len(b))
		}
	}
	if want := []int64{2, 6, 7, 0, 8}; !slices.Equal(hws, want) {
		t.Errorf("high watermarks in order %v, want %v (an error or data separates watermark-only deliveries)", hws, want)
	}
	if _, ok := q.TryNext(); ok {
		t.Error("queue not empty")
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if _, err := q.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next on an empty queue: %v", err)
	}
}
