package syncloop

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestSyncLoopRunsAtOnceOnEveryTickAndTriggerAndSurvivesErrors: the loop
// template syncs at start, on trigger without waiting for the interval, and
// keeps going after a failed round, reporting each outcome.
func TestSyncLoopRunsAtOnceOnEveryTickAndTriggerAndSurvivesErrors(t *testing.T) {
	t.Parallel()
	rounds := make(chan int, 10)
	n := 0
	var outcomes []error
	l := NewLoop("test", time.Hour, func(context.Context) error {
		n++
		rounds <- n
		if n == 1 {
			return fmt.Errorf("round %d failed", n)
		}
		return nil
	}, func(name string, err error) {
		if name != "test" {
			t.Errorf("loop name %q", name)
		}
		outcomes = append(outcomes, err)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	next := func(what string) {
		t.Helper()
		select {
		case <-rounds:
		case <-time.After(5 * time.Second):
			t.Fatalf("no round %s", what)
		}
	}
	next("at start")
	l.Trigger()
	next("after the first trigger, although the first round failed")
	l.Trigger()
	next("after the second trigger")
	// A window in which a round without a trigger would show: nothing
	// happening has no event to wait for.
	select {
	case r := <-rounds:
		t.Fatalf("round %d without a trigger or tick", r)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	<-done
	if len(outcomes) != 3 || outcomes[0] == nil || outcomes[1] != nil || outcomes[2] != nil {
		t.Fatalf("outcomes %v, want [error nil nil]", outcomes)
	}
}

// TestGatedSyncLoopSkipsRoundsWhileClosed: a loop whose gate is closed (the
// metadata-sync lease is another daemon's) runs no round, reports no error,
// and runs again once the gate opens and it is triggered.
func TestGatedSyncLoopSkipsRoundsWhileClosed(t *testing.T) {
	t.Parallel()
	var open atomic.Bool
	rounds := make(chan struct{}, 10)
	skipped := make(chan struct{}, 10)
	l := NewLoop("gated", time.Hour, func(context.Context) error {
		rounds <- struct{}{}
		return nil
	}, func(_ string, err error) {
		if err != nil {
			t.Errorf("outcome %v", err)
		}
		if !open.Load() {
			skipped <- struct{}{}
		}
	}).Gated(open.Load)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-skipped:
	case <-time.After(5 * time.Second):
		t.Fatal("the first round was neither run nor skipped")
	}
	l.Trigger()
	select {
	case <-skipped:
	case <-time.After(5 * time.Second):
		t.Fatal("the triggered round was neither run nor skipped")
	}
	select {
	case <-rounds:
		t.Fatal("a round ran while the gate was closed")
	default:
	}
	open.Store(true)
	l.Trigger()
	select {
	case <-rounds:
	case <-time.After(5 * time.Second):
		t.Fatal("no round after the gate opened and the loop was triggered")
	}
}
