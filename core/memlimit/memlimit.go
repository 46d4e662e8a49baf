// Package memlimit owns the Go runtime's soft memory limit under which a
// kmirror process runs (memory.soft.limit.bytes for the daemon, a fixed one
// for a built-in plugin's process), and the guard that raises the limit when
// the process's live memory comes near it.
//
// # Why a limit by default
//
// With only GOGC=100, the heap grows to twice what survived the last
// collection before the next one starts. At 10,000 idle partitions most of
// the daemon's memory is long-lived (runners, their stacks, cursors and
// records), so that headroom is mostly garbage left by start-up: a soft
// limit makes the collector start earlier instead, while the process is
// small. Below the limit nothing changes (GOGC still paces the collector).
//
// # Why a guard
//
// A soft limit below what the process needs would make the collector run
// almost constantly (the runtime caps it at about half of the CPU). So every
// Interval the guard reads the memory the process cannot give back (the live
// heap, stacks and the runtime's own) and, while that is above 7/8 of the
// configured limit, sets the limit to twice it: the headroom GOGC=100 would
// give. Once the live memory falls back (start-up's transient peak is over),
// the configured limit applies again. It logs when it first raises the
// limit, naming the key to change, and when the configured limit applies
// again.
//
// GOMEMLIMIT in the environment wins: the operator (or a Kubernetes manifest
// that sets it from the container's limit) already chose, and the guard does
// not run.
package memlimit

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Interval is how often the guard reads the process's live memory.
const Interval = time.Second

// EnvVar is the Go runtime's own setting, which wins over Start's limit.
const EnvVar = "GOMEMLIMIT"

// Limit is a running soft memory limit; Stop it when the process ends.
type Limit struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	configured int64

	mu      sync.Mutex
	current int64
}

// Start sets the runtime's soft memory limit to limit bytes and starts its
// guard (see the package comment). It sets nothing and returns nil when
// limit is 0 or less, or when GOMEMLIMIT is set; log then says which.
// what names the setting in log lines ("memory.soft.limit.bytes").
func Start(limit int64, what string, log hclog.Logger) *Limit {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if v := os.Getenv(EnvVar); v != "" {
		log.Debug("GOMEMLIMIT is set; it replaces "+what, "GOMEMLIMIT", v)
		return nil
	}
	if limit <= 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Limit{cancel: cancel, configured: limit, current: limit}
	debug.SetMemoryLimit(limit)
	l.wg.Add(1)
	go func() { // owned by l: Stop waits for it
		defer l.wg.Done()
		t := time.NewTicker(Interval)
		defer t.Stop()
		samples := newSamples()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			from, to, used := l.check(samples)
			switch {
			case from == l.configured && to != from:
				log.Warn("live memory is near the soft memory limit; raising the limit so that the collector does not run constantly: raise "+what+" (or set GOMEMLIMIT) if the process needs this much for good",
					"live_bytes", used, "limit_bytes", from, "new_limit_bytes", to)
			case from != l.configured && to == l.configured:
				log.Info("live memory fell back; the configured soft memory limit applies again", "live_bytes", used, "limit_bytes", to)
			}
		}
	}()
	return l
}

// Current returns the limit in force (math.MaxInt64 for a nil Limit: none).
func (l *Limit) Current() int64 {
	if l == nil {
		return math.MaxInt64
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

// Stop ends the guard and waits for it. The limit stays as it is. Stop on a
// nil Limit does nothing.
func (l *Limit) Stop() {
	if l == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
}

// check sets the limit Raise gives for the live memory.
func (l *Limit) check(s []metrics.Sample) (from, to, used int64) {
	used = Live(s)
	l.mu.Lock()
	defer l.mu.Unlock()
	from = l.current
	to = Raise(l.configured, used)
	if to != from {
		l.current = to
		debug.SetMemoryLimit(to)
	}
	return from, to, used
}

// Raise returns the limit the guard sets when the process needs used bytes
// and limit is configured: limit itself while used is at most 7/8 of it,
// else twice used.
func Raise(limit, used int64) int64 {
	if used <= limit/8*7 {
		return limit
	}
	if used > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return 2 * used
}

// The runtime/metrics the guard reads: everything the runtime holds from
// the OS, minus what it could give back without a collection's help
// (released, free and unused heap) and minus the heap's dead objects (all
// objects, plus the live heap as of the last collection).
var sampleNames = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/objects:bytes",
	"/gc/heap/live:bytes",
}

func newSamples() []metrics.Sample {
	s := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		s[i].Name = n
	}
	return s
}

// Live is the memory the process holds that a collection would not free:
// the live heap (as of the last collection), goroutine stacks and the
// runtime's own structures. s is reused between calls (nil: allocate).
func Live(s []metrics.Sample) int64 {
	if s == nil {
		s = newSamples()
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	total, released, free, unused, objects, live := v(0), v(1), v(2), v(3), v(4), v(5)
	used := total - released - free - unused - objects + live
	if used < 0 {
		return 0
	}
	return used
}
