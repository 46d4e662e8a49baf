package statemigrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func fill(t *testing.T, s statestore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := s.Put(ctx, statestore.PartitionKey("m1", "orders", int32(i)), fmt.Appendf(nil, `{"state":"MIRRORING","p":%d}`, i), statestore.Absent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, statestore.ControlKey("m1"), []byte(`{"rules":[]}`), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, statestore.LeaseKey("m1", "metadata-sync"), []byte(`{"holder":"h/1/x"}`), statestore.Absent); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateCopiesEveryKeyAndReadsItBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := memstore.New(), memstore.New()
	fill(t, src, 1234)
	rep, err := Migrate(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Keys != 1235 {
		t.Fatalf("copied %d keys, want 1,235 (1,234 partitions and the control record; the lease is left out)", rep.Keys)
	}
	all, err := dst.List(ctx, "mirrors/")
	if err != nil || len(all) != 1235 {
		t.Fatalf("target holds %d keys, %v", len(all), err)
	}
	for _, e := range all {
		want, err := src.Get(ctx, e.Key)
		if err != nil || string(want.Value) != string(e.Value) {
			t.Fatalf("%s: %q in the target, %q in the source (%v)", e.Key, e.Value, want.Value, err)
		}
		if strings.Contains(e.Key, "/leases/") {
			t.Fatalf("lease %s copied", e.Key)
		}
	}
}

func TestMigrateRefusesATargetWithState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := memstore.New(), memstore.New()
	fill(t, src, 3)
	fill(t, dst, 1)
	_, err := Migrate(ctx, src, dst)
	if !errors.Is(err, ErrTargetNotEmpty) || !strings.Contains(err.Error(), "mirrors/m1/") {
		t.Fatalf("Migrate into a store with state = %v, want ErrTargetNotEmpty naming a key", err)
	}
}

// corrupting is a store that changes what it is given: the read back must
// catch it.
type corrupting struct{ *memstore.Store }

func (c corrupting) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if strings.HasSuffix(key, "/2") {
		value = append([]byte(nil), value[:len(value)-1]...)
	}
	return c.Store.Put(ctx, key, value, expect)
}

func TestMigrateFailsWhenAKeyReadsBackDifferent(t *testing.T) {
	t.Parallel()
	src := memstore.New()
	fill(t, src, 5)
	_, err := Migrate(context.Background(), src, corrupting{memstore.New()})
	if err == nil || !strings.Contains(err.Error(), statestore.PartitionKey("m1", "orders", 2)) || !strings.Contains(err.Error(), "reads back different") {
		t.Fatalf("Migrate into a corrupting store = %v, want the key named", err)
	}
}
