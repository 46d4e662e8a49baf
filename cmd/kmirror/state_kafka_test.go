package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/plugins/statestore/file"
	"github.com/kmirror/kmirror/plugins/statestore/kafka"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// `kmirror state migrate` copies a stopped daemon's file store into the
// built-in Kafka store the configuration names (a compacted topic it
// creates, here on an in-process cluster; the store's own tests run on
// real Kafka), and every key reads back identical from the topic; a second
// run refuses the store that now holds state.
func TestStateMigrateFromAFileStoreToKafka(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := filepath.Join(t.TempDir(), "state")
	src, err := file.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for p := range int32(100) {
		k := statestore.PartitionKey("dc1", "orders", p)
		v := fmt.Sprintf(`{"state":"MIRRORING","last_mirrored_offset":%d}`, 1000+p)
		if _, err := src.Put(ctx, k, []byte(v), statestore.Absent); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	broker := kfaketest.NewCluster(t).ListenAddrs()[0]
	cfg := writeFile(t, "kafka.yaml", strings.Replace(validBase, "  dir: /var/lib/kmirror\n", fmt.Sprintf("  type: plugin\n  plugin: store\n  dir: %s\n", t.TempDir()), 1)+
		fmt.Sprintf("plugins:\n  store:\n    kind: statestore\n    builtin: kafka\n    config:\n      bootstrap.servers: [%s]\n      mirror.topic.replication.factor: 1\n", broker))

	code, stdout, stderr := kmirror(t, nil, "state", "migrate", "--config", cfg, "--from", "file:"+old, "--json")
	if code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", code, stderr)
	}
	var res struct {
		Keys     int  `json:"keys"`
		Verified bool `json:"verified"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Keys != len(want) || !res.Verified {
		t.Fatalf("migrate output %q (%v), want %d keys verified", stdout, err, len(want))
	}

	kc := kafka.DefaultConfig()
	kc.Brokers, kc.ReplicationFactor = []string{broker}, 1
	dst, err := kafka.Open(ctx, kc)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := dst.List(ctx, "mirrors/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("the topic holds %d keys, want %d", len(got), len(want))
	}
	for _, e := range got {
		if want[e.Key] != string(e.Value) {
			t.Fatalf("%s in the topic = %q, want %q", e.Key, e.Value, want[e.Key])
		}
	}

	code, _, stderr = kmirror(t, nil, "state", "migrate", "--config", cfg, "--from", "file:"+old)
	if code != exitFailure || !strings.Contains(stderr, "already holds kmirror state") {
		t.Fatalf("second migrate: exit %d, stderr %q; want refused", code, stderr)
	}
}
