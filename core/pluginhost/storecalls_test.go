package pluginhost_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// gatedStore is a memstore whose Puts wait for release and count how many
// wait at once.
type gatedStore struct {
	statestore.Store
	release        chan struct{}
	inFlight, most atomic.Int64
}

func (g *gatedStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	<-g.release
	return g.Store.Put(ctx, key, value, expect)
}

func TestStoreCallsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	g := &gatedStore{Store: memstore.New(), release: make(chan struct{})}
	builtins := func(kind plugin.Kind, name string) (plugin.ServeConfig, bool) {
		return plugin.ServeConfig{StateStore: g}, kind == plugin.KindStateStore && name == "gated"
	}
	h, err := pluginhost.New([]pluginhost.Spec{{Name: "state", Kind: plugin.KindStateStore, Builtin: "gated"}}, pluginhost.Options{InProcess: true, Builtins: builtins})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	st, err := h.StateStore("state")
	if err != nil {
		t.Fatal(err)
	}
	const calls = 3 * pluginhost.MaxStoreCalls
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := st.Put(context.Background(), fmt.Sprintf("k/%d", i), []byte("v"), statestore.AnyVersion); err != nil {
				t.Error(err)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.inFlight.Load() < pluginhost.MaxStoreCalls {
		if time.Now().After(deadline) {
			t.Fatalf("%d Puts reached the store, want %d", g.inFlight.Load(), pluginhost.MaxStoreCalls)
		}
		time.Sleep(time.Millisecond)
	}
	// A waiting call gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := st.Put(ctx, "late", []byte("v"), statestore.AnyVersion); err != context.DeadlineExceeded {
		t.Errorf("Put behind %d calls in flight = %v, want its context's deadline", pluginhost.MaxStoreCalls, err)
	}
	close(g.release)
	wg.Wait()
	if most := g.most.Load(); most != pluginhost.MaxStoreCalls {
		t.Errorf("at most %d Puts in flight at once, want %d", most, pluginhost.MaxStoreCalls)
	}
}
