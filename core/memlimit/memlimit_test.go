package memlimit

import (
	"bytes"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestRaiseKeepsTheLimitUntilSevenEighthsThenDoubles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ limit, used, want int64 }{
		{800, 0, 800},
		{800, 700, 800},
		{800, 701, 1402},
		{800, 2000, 4000},
		{800, math.MaxInt64/2 + 1, math.MaxInt64},
	} {
		if got := Raise(c.limit, c.used); got != c.want {
			t.Errorf("Raise(%d, %d) = %d, want %d", c.limit, c.used, got, c.want)
		}
	}
}

func TestLiveCountsStacksAndTheLiveHeap(t *testing.T) {
	t.Parallel()
	keep := make([]byte, 8<<20)
	runtime.GC() // the live heap is as of the last collection
	live := Live(nil)
	if live < int64(len(keep)) {
		t.Errorf("Live = %d with an 8 MiB slice held, want at least that", live)
	}
	runtime.KeepAlive(keep)
}

// syncBuffer is a log sink the guard's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Not parallel: the soft limit and GOMEMLIMIT are the process's.
func TestStartSetsTheLimitAndRaisesItAboveLiveMemory(t *testing.T) {
	t.Setenv(EnvVar, "")
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	var logs syncBuffer
	const tiny = 1 << 20 // below what any Go test process holds
	l := Start(tiny, "memory.soft.limit.bytes", hclog.New(&hclog.LoggerOptions{Output: &logs}))
	defer l.Stop()
	deadline := time.Now().Add(10 * Interval)
	for l.Current() == tiny {
		if time.Now().After(deadline) {
			t.Fatalf("the limit is still %d after %s; the live memory is %d", l.Current(), 10*Interval, Live(nil))
		}
		time.Sleep(Interval / 10)
	}
	if got := debug.SetMemoryLimit(-1); got != l.Current() || got <= tiny {
		t.Errorf("runtime limit %d, guard's %d, want the same and above %d", got, l.Current(), tiny)
	}
	if !strings.Contains(logs.String(), "raise memory.soft.limit.bytes") {
		t.Errorf("no warning naming the key: %q", logs.String())
	}
}

// Not parallel: the soft limit is the process's.
func TestTheConfiguredLimitAppliesAgainWhenLiveMemoryFalls(t *testing.T) {
	t.Setenv(EnvVar, "")
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	base := Live(nil)
	limit := base + 64<<20 // room for the process as it is, not for 64 MiB more
	var logs syncBuffer
	l := Start(limit, "memory.soft.limit.bytes", hclog.New(&hclog.LoggerOptions{Output: &logs}))
	defer l.Stop()
	keep := make([]byte, 64<<20)
	for i := range keep {
		keep[i] = 1 // touched: counted however the runtime backs it
	}
	runtime.GC()
	waitFor(t, "the limit raised above the configured one", func() bool { return l.Current() > limit })
	runtime.KeepAlive(keep)
	keep = nil
	runtime.GC()
	waitFor(t, "the configured limit back", func() bool { return l.Current() == limit })
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("runtime limit %d, want the configured %d", got, limit)
	}
	if !strings.Contains(logs.String(), "configured soft memory limit applies again") {
		t.Errorf("no line saying the configured limit applies again: %q", logs.String())
	}
}

// waitFor polls cond until it holds, or fails the test after 10 intervals.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * Interval)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s; live memory %d", what, 10*Interval, Live(nil))
		}
		time.Sleep(Interval / 10)
	}
}

func TestGOMEMLIMITWins(t *testing.T) {
	t.Setenv(EnvVar, "300MiB")
	old := debug.SetMemoryLimit(-1)
	if l := Start(1<<20, "memory.soft.limit.bytes", nil); l != nil {
		l.Stop()
		t.Fatal("Start set a limit although GOMEMLIMIT is set")
	}
	if got := debug.SetMemoryLimit(-1); got != old {
		t.Errorf("runtime limit changed from %d to %d", old, got)
	}
}

func TestZeroSetsNoLimit(t *testing.T) {
	t.Setenv(EnvVar, "")
	old := debug.SetMemoryLimit(-1)
	if l := Start(0, "memory.soft.limit.bytes", nil); l != nil {
		l.Stop()
		t.Fatal("Start(0) set a limit")
	}
	if got := debug.SetMemoryLimit(-1); got != old {
		t.Errorf("runtime limit changed from %d to %d", old, got)
	}
	var l *Limit
	l.Stop() // a nil Limit stops as nothing
	if l.Current() != math.MaxInt64 {
		t.Errorf("nil Limit's Current = %d", l.Current())
	}
}
