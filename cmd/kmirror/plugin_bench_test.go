package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// benchHost runs the built-ins the daemon runs, in process or out of
// process (re-executing the kmirror binary), as `kmirror run` does.
func benchHost(b *testing.B, inProcess bool, specs ...pluginhost.Spec) *pluginhost.Host {
	b.Helper()
	h, err := pluginhost.New(specs, pluginhost.Options{
		InProcess: inProcess,
		Builtins:  builtinServeConfig,
		Command: func(s pluginhost.Spec) (*exec.Cmd, error) {
			return exec.Command(binary, "plugin", "serve", string(s.Kind), s.Builtin), nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkFileStorePut: one partition-state write (about 300 bytes, as the
// runner writes them) to the built-in file store, in process and through
// the plugin RPC. The difference is what the RPC costs per state write
// (docs/benchmarks.md, "Plugins over RPC").
func BenchmarkFileStorePut(b *testing.B) {
	value := []byte(`{"state":"MIRRORING","mode":"preserve","last_mirrored_offset":123456789,"source_high_watermark":123456790,` +
		`"destination_end_offset":123456790,"epoch":7,"topic_id":"5mNbB4cVQd2r3O8a3n5x1Q","writers":[{"producer_id":4711,"epoch":3}],"updated":"2026-12-01T19:00:00Z"}`)
	for _, inProcess := range []bool{true, false} {
		b.Run(fmt.Sprintf("in-process=%v", inProcess), func(b *testing.B) {
			h := benchHost(b, inProcess, pluginhost.Spec{Name: "state", Kind: plugin.KindStateStore, Builtin: "file", Config: plugin.Config{"dir": b.TempDir()}})
			store, err := h.StateStore("state")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			key := statestore.PartitionKey("bench", "orders", 0)
			version := statestore.Absent
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for b.Loop() {
				if version, err = store.Put(ctx, key, value, version); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRegexFilterBatch: one batch of topics through the built-in
// regex filter, in process and through the plugin RPC.
func BenchmarkRegexFilterBatch(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		topics := make([]filter.Topic, n)
		for i := range topics {
			topics[i] = filter.Topic{Name: fmt.Sprintf("orders-%05d", i), Partitions: 12}
		}
		for _, inProcess := range []bool{true, false} {
			b.Run(fmt.Sprintf("topics=%d/in-process=%v", n, inProcess), func(b *testing.B) {
				h := benchHost(b, inProcess, pluginhost.Spec{Name: "scope", Kind: plugin.KindFilter, Builtin: "regex", Config: plugin.Config{"topics.include": []any{"orders-0.*"}}})
				f, err := h.Filter("scope")
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					out, err := f.FilterTopics(ctx, "bench", topics)
					if err != nil || len(out) == 0 || !strings.HasPrefix(out[0].Name, "orders-0") {
						b.Fatalf("FilterTopics = %d topics, %v", len(out), err)
					}
				}
			})
		}
	}
}
