package config

import (
	"fmt"
	"strings"
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

// TestLargeConfigParseIsLinear parses files of 256 KiB and 1 MiB: the second
// must not take much more than four times the first (a quadratic step
// takes sixteen).
func TestLargeConfigParseIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("parses megabytes")
	}
	for _, shape := range []string{"unknown-keys", "mirrors"} {
		small, large := largeConfigs(1 << 20 / 4)[shape], largeConfigs(1 << 20)[shape]
		ts := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				_, _ = Parse([]byte(small), "yaml", nil, nil)
			}
		})
		tl := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				_, _ = Parse([]byte(large), "yaml", nil, nil)
			}
		})
		ratio := float64(tl.NsPerOp()) / float64(ts.NsPerOp())
		t.Logf("%s: %d bytes in %v, %d bytes in %v (×%.1f)", shape, len(small), time.Duration(ts.NsPerOp()), len(large), time.Duration(tl.NsPerOp()), ratio)
		if ratio > 10 {
			t.Errorf("%s: four times the input took %.1f times as long; some step is super-linear", shape, ratio)
		}
	}
}
