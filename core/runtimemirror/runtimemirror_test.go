package runtimemirror

import (
	"context"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// A recorded mirror is listed and read back; a second create (Absent) is
// refused; Delete removes its state and its record, and deleting again is
// a no-op.
func TestRecordsAreListedReadAndDeletedWithTheirState(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	if err := Put(ctx, store, "dc1-failback", Spec{FailbackOf: "dc1", Topics: []string{"orders"}}, statestore.Absent); err != nil {
		t.Fatal(err)
	}
	if err := Put(ctx, store, "made", Spec{Config: "source: {}"}, statestore.Absent); err != nil {
		t.Fatal(err)
	}
	if err := Put(ctx, store, "made", Spec{Config: "other"}, statestore.Absent); err == nil {
		t.Fatal("a second record of the same mirror with Absent was accepted")
	}
	if _, err := store.Put(ctx, statestore.MirrorPrefix("made")+"partitions/orders/0", []byte("{}"), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	recs, err := List(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Err != nil || recs[1].Err != nil {
		t.Fatalf("listed %+v, want 2 readable records", recs)
	}
	spec, ok, err := Get(ctx, store, "made")
	if err != nil || !ok || spec.Config != "source: {}" {
		t.Fatalf("Get = %+v, %v, %v", spec, ok, err)
	}
	for range 2 {
		if err := Delete(ctx, store, "made"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Get(ctx, store, "made"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("after Delete: %v, want ErrNotFound", err)
	}
	left, err := store.List(ctx, statestore.MirrorPrefix("made"))
	if err != nil || len(left) != 0 {
		t.Fatalf("after Delete the state store holds %v (%v)", left, err)
	}
}
