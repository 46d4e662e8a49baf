package coalesce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// recorder is a Func that records the batches it answers and answers each
// item with the number of the batch (so a caller sees which call answered
// it); block, when set, holds every call until closed.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{} // receives once per call
	block   chan struct{}
}

func (r *recorder) do(ctx context.Context, key string, items []int) (map[int]Result[int], error) {
	r.mu.Lock()
	r.batches = append(r.batches, append([]int(nil), items...))
	n := len(r.batches)
	r.mu.Unlock()
	if r.started != nil {
		r.started <- struct{}{}
	}
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := map[int]Result[int]{}
	for _, it := range items {
		if it < 0 {
			out[it] = Result[int]{Err: fmt.Errorf("item %d refused", it)}
			continue
		}
		if it == 999 {
			continue // no answer
		}
		out[it] = Result[int]{Value: n}
	}
	return out, nil
}

// waitForWaiters waits until n requests wait in key's gathering batch.
func waitForWaiters(t *testing.T, g *Group[string, int, int], key string, n int) {
	t.Helper()
	kfaketest.WaitFor(t, fmt.Sprintf("%d requests in the gathering batch of %s", n, key), func() (bool, string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		got := 0
		if st := g.keys[key]; st != nil && st.pending != nil {
			got = st.pending.waiters
		}
		return got == n, fmt.Sprintf("%d requests", got)
	})
}

func TestRequestsArrivingTogetherShareOneCall(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := New(20*time.Millisecond, rec.do)
	var wg sync.WaitGroup
	got := make([]int, 100)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := g.Get(context.Background(), "topic", i)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	if n := len(rec.batches); n > 3 || n != int(g.Calls()) {
		t.Fatalf("%d calls (Calls %d) for 100 concurrent requests; want a few", n, g.Calls())
	}
	seen := 0
	for _, b := range rec.batches {
		seen += len(b)
	}
	if seen != 100 {
		t.Fatalf("the calls asked for %d items, want 100 (each once)", seen)
	}
}

// A request that arrives while a call is in flight is never answered by
// that call: it gathers into the next one, sent after the first ends.
func TestARequestIsNeverAnsweredByACallSentBeforeIt(t *testing.T) {
	t.Parallel()
	rec := &recorder{started: make(chan struct{}, 10), block: make(chan struct{})}
	g := New(0, rec.do)
	first := make(chan int)
	go func() {
		v, _ := g.Get(context.Background(), "topic", 1)
		first <- v
	}()
	<-rec.started // call 1 is in flight, holding item 1
	second := make(chan int)
	for _, it := range []int{1, 2} {
		go func() {
			v, _ := g.Get(context.Background(), "topic", it)
			second <- v
		}()
	}
	// Let both late requests join the pending batch, then release call 1.
	waitForWaiters(t, g, "topic", 2)
	rec.block <- struct{}{}
	if v := <-first; v != 1 {
		t.Fatalf("the first request was answered by call %d, want 1", v)
	}
	<-rec.started
	close(rec.block)
	for range 2 {
		if v := <-second; v != 2 {
			t.Fatalf("a request made while call 1 was in flight was answered by call %d, want 2", v)
		}
	}
	if len(rec.batches) != 2 || len(rec.batches[1]) != 2 {
		t.Fatalf("batches %v, want [[1] [1 2]]", rec.batches)
	}
}

func TestErrorsPerItemAndMissingAnswers(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := New(0, rec.do)
	if _, err := g.Get(context.Background(), "t", -1); err == nil || err.Error() != "item -1 refused" {
		t.Fatalf("err %v, want the item's own error", err)
	}
	if _, err := g.Get(context.Background(), "t", 999); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("err %v, want ErrNoAnswer", err)
	}
	failing := New(0, func(context.Context, string, []int) (map[int]Result[int], error) {
		return nil, errors.New("broker down")
	})
	if _, err := failing.Get(context.Background(), "t", 1); err == nil || err.Error() != "broker down" {
		t.Fatalf("err %v, want the call's error", err)
	}
}

// The first request sends the batch for everyone: its own context ending
// does not fail the others; the call's context ends only when every request
// of the batch gave up.
func TestTheCallOutlivesItsFirstRequestButNotAllOfThem(t *testing.T) {
	t.Parallel()
	rec := &recorder{started: make(chan struct{}, 10), block: make(chan struct{})}
	// A window long enough that both requests join the batch before it is
	// sent, on a loaded machine too (the test waits for the first to join).
	g := New(2*time.Second, rec.do)
	ctx1, cancel1 := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := g.Get(ctx1, "t", 1); errs <- err }()
	waitForWaiters(t, g, "t", 1) // the first request leads the batch
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	res := make(chan int)
	go func() { v, _ := g.Get(ctx2, "t", 2); res <- v }()
	<-rec.started
	cancel1()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("first request: %v, want its context's error", err)
	}
	close(rec.block)
	if v := <-res; v != 1 {
		t.Fatalf("second request answered by call %d, want 1", v)
	}

	// Every request gives up: the call is cancelled.
	rec2 := &recorder{started: make(chan struct{}, 10), block: make(chan struct{})}
	g2 := New(0, rec2.do)
	ctx3, cancel3 := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := g2.Get(ctx3, "t", 1); done <- err }()
	<-rec2.started
	cancel3()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	// The call ends (its context was cancelled): a new request gets a new call.
	go func() { close(rec2.block) }()
	if _, err := g2.Get(context.Background(), "t", 1); err != nil {
		t.Fatal(err)
	}
}
