package mirror

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"testing"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// BenchmarkIdlePartitionMemory mirrors one idle topic of many partitions
// (in-process clusters) and reports what the engine holds per partition
// once every partition mirrors: live heap, goroutine stacks (the memory
// they take, and the part of it in use) and goroutines.
// The in-process clusters' own memory is measured before the engine starts
// (both topics exist by then) and subtracted. Run it with
// `go test -run XXX -bench IdlePartitionMemory -benchtime 1x ./core/mirror/`;
// with KMIRROR_IDLE_HEAP_PROFILE=<file> it also writes the heap profile of
// that moment, every allocation sampled (`go tool pprof -sample_index=inuse_space`).
func BenchmarkIdlePartitionMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				idlePartitionMemory(b, int32(n))
			}
		})
	}
}

func idlePartitionMemory(b *testing.B, n int32) {
	if os.Getenv("KMIRROR_IDLE_HEAP_PROFILE") != "" {
		// Every allocation sampled: the profile's figures are exact.
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 1
		b.Cleanup(func() { runtime.MemProfileRate = old })
	}
	f := newFixture(b)
	topic := fmt.Sprintf("idle-%d", n)
	kfaketest.CreateTopic(b, f.srcCl, topic, n, nil)
	kfaketest.CreateTopic(b, f.dstCl, topic, n, nil)
	before := settled()
	e := startEngine(b, f.config(b, topic), memstore.New())
	kfaketest.WaitFor(b, fmt.Sprintf("all %d partitions of %s MIRRORING", n, topic), func() (bool, string) {
		m := mirrorStatus(e)
		mirroring := 0
		for _, p := range m.Partitions {
			if p.State == "MIRRORING" {
				mirroring++
			}
		}
		return mirroring == int(n), fmt.Sprintf("%d of %d mirroring", mirroring, n)
	})
	after := settled()
	if path := os.Getenv("KMIRROR_IDLE_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	per := func(a, b uint64) float64 { return float64(int64(a)-int64(b)) / float64(n) }
	b.ReportMetric(per(after.heap, before.heap), "heap-B/partition")
	b.ReportMetric(per(after.stack, before.stack), "stack-B/partition")
	b.ReportMetric(float64(after.goroutines-before.goroutines)/float64(n), "goroutines/partition")
	b.ReportMetric(per(after.scanned, before.scanned), "stack-used-B/partition")
}

type memFigures struct {
	heap, stack uint64
	scanned     uint64
	goroutines  int
}

// settled is the live heap and the stacks after a few collections (each
// collection halves a stack at most once).
func settled() memFigures {
	for range 6 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sample := []metrics.Sample{{Name: "/gc/scan/stack:bytes"}}
	metrics.Read(sample)
	return memFigures{heap: ms.HeapAlloc, stack: ms.StackInuse, scanned: sample[0].Value.Uint64(), goroutines: runtime.NumGoroutine()}
}

// writeHeapProfile writes the heap profile (live objects as of the last
// collection) to path, for `go tool pprof -sample_index=inuse_space`.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
