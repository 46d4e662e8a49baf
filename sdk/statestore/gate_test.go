package statestore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestGate: Begin validates keys, refuses an ended context, bounds the
// operation by Timeout; Close waits for an operation in progress, runs
// release once, and every later Begin fails with ErrClosed.
func TestGate(t *testing.T) {
	t.Parallel()
	g := &Gate{Name: "test store", Timeout: time.Minute}
	if _, _, err := g.Begin(context.Background(), "get", "", true); !errors.Is(err, ErrInvalidKey) || !strings.HasPrefix(err.Error(), "test store: get: ") {
		t.Fatalf("Begin with an invalid key: %v", err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := g.Begin(ended, "get", "k", true); !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin with an ended context: %v", err)
	}
	ctx, done, err := g.Begin(context.Background(), "put", "k", true)
	if err != nil {
		t.Fatal(err)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Minute {
		t.Fatalf("operation context deadline %v, %v; want within the timeout", dl, ok)
	}
	closed := make(chan error, 1)
	released := 0
	go func() { // owned by the test: it reads closed
		closed <- g.Close(func() error { released++; return nil })
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an operation was in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	done()
	if err := <-closed; err != nil || released != 1 {
		t.Fatalf("Close: %v, release called %d times", err, released)
	}
	if err := g.Close(func() error { released++; return nil }); err != nil || released != 1 {
		t.Fatalf("second Close: %v, release called %d times; want nothing", err, released)
	}
	if _, _, err := g.Begin(context.Background(), "get", "k", true); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), `test store: get "k"`) {
		t.Fatalf("Begin after Close: %v", err)
	}
}
