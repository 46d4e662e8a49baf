package config

import (
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"
)

// largeConfigs are configurations of about size bytes in the shapes a big
// or broken file takes: many top-level keys (all unknown), and the most
// mirrors allowed, each with long lists.
func largeConfigs(size int) map[string]string {
	var keys strings.Builder
	keys.WriteString(minimal)
	for i := 0; keys.Len() < size; i++ {
		fmt.Fprintf(&keys, "generated.key.number.%d: value-%d\n", i, i)
	}
	var mirrors strings.Builder
	mirrors.WriteString(minimal + "mirrors:\n")
	per := size / MaxMirrors
	for i := 0; i < MaxMirrors; i++ {
		fmt.Fprintf(&mirrors, "  - name: m%d\n    bootstrap.servers: s%d:9092\n    mirror.topics.include:\n", i, i)
		for n := 0; n < per/40; n++ {
			fmt.Fprintf(&mirrors, "      - \"team-%d-orders-%d\\\\..*\"\n", i, n)
		}
	}
	return map[string]string{"unknown-keys": keys.String(), "mirrors": mirrors.String()}
}

// BenchmarkParseLarge measures Parse on 3 MB files. yaml.v3 compares every
// pair of a mapping's keys, so 10 MB of keys took over a minute before the
// YAML was converted with a set of the keys seen (core/config/raw).
func BenchmarkParseLarge(b *testing.B) {
	for name, data := range largeConfigs(3 << 20) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_, _ = Parse([]byte(data), "yaml", nil, nil)
			}
		})
	}
}

// TestLargeConfigParseIsLinear parses files of 64 KiB and 256 KiB: the second
// must not cost much more than four times the first (a quadratic step costs
// sixteen). The cost is the CPU time the process spends (getrusage), not
// the wall clock, so that other processes on a loaded machine do not count;
// the test runs alone in its package (not parallel), and each size is
// parsed over the same number of bytes, best of two.
func TestLargeConfigParseIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("parses megabytes")
	}
	for _, shape := range []string{"unknown-keys", "mirrors"} {
		small, large := largeConfigs(1 << 16)[shape], largeConfigs(1 << 18)[shape]
		per := func(data string, times int) time.Duration {
			best := time.Duration(math.MaxInt64)
			for range 2 {
				start := cpuTime(t)
				for range times {
					_, _ = Parse([]byte(data), "yaml", nil, nil)
				}
				best = min(best, (cpuTime(t)-start)/time.Duration(times))
			}
			return best
		}
		ts, tl := per(small, 4), per(large, 1)
		ratio := float64(tl) / float64(max(ts, 1))
		t.Logf("%s: %d bytes in %v CPU, %d bytes in %v CPU (×%.1f)", shape, len(small), ts, len(large), tl, ratio)
		if ratio > 10 {
			t.Errorf("%s: four times the input took %.1f times the CPU time; some step is super-linear", shape, ratio)
		}
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
