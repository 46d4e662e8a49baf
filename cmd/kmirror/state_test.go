package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/etcdtest"
	"github.com/kmirror/kmirror/plugins/statestore/etcd"
	"github.com/kmirror/kmirror/plugins/statestore/file"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// `kmirror state migrate` copies a stopped daemon's file store into the
// store the configuration names (here the built-in etcd store on a real
// etcd server), and every key reads back identical from etcd; a second
// run refuses the store that now holds state; a store a daemon still
// holds is refused.
func TestStateMigrateFromAFileStoreToEtcd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := filepath.Join(t.TempDir(), "state")
	src, err := file.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for p := range int32(300) {
		k := statestore.PartitionKey("dc1", "orders", p)
		v := fmt.Sprintf(`{"state":"MIRRORING","last_mirrored_offset":%d}`, 1000+p)
		if _, err := src.Put(ctx, k, []byte(v), statestore.Absent); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	if _, err := src.Put(ctx, statestore.ControlKey("dc1"), []byte(`{"rules":[]}`), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	want[statestore.ControlKey("dc1")] = `{"rules":[]}`
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	srv := etcdtest.StartT(t, etcdtest.Options{})
	prefix := srv.Prefix(t)
	cfg := writeFile(t, "etcd.yaml", strings.Replace(validBase, "  dir: /var/lib/kmirror\n", fmt.Sprintf("  type: plugin\n  plugin: store\n  dir: %s\n", t.TempDir()), 1)+
		fmt.Sprintf("plugins:\n  store:\n    kind: statestore\n    builtin: etcd\n    config:\n      endpoints: [%s]\n      prefix: %s\n", srv.Endpoint, prefix))

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

	ec := etcd.DefaultConfig()
	ec.Endpoints, ec.Prefix = []string{srv.Endpoint}, prefix
	dst, err := etcd.Open(ctx, ec)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := dst.List(ctx, "mirrors/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("etcd holds %d keys, want %d", len(got), len(want))
	}
	for _, e := range got {
		if want[e.Key] != string(e.Value) {
			t.Fatalf("%s in etcd = %q, want %q", e.Key, e.Value, want[e.Key])
		}
	}

	code, _, stderr = kmirror(t, nil, "state", "migrate", "--config", cfg, "--from", "file:"+old)
	if code != exitFailure || !strings.Contains(stderr, "already holds kmirror state") {
		t.Fatalf("second migrate: exit %d, stderr %q; want refused", code, stderr)
	}

	held, err := file.Open(old) // a daemon still running on it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	code, _, stderr = kmirror(t, nil, "state", "migrate", "--config", cfg, "--from", "file:"+old)
	if code != exitFailure || !strings.Contains(stderr, "is a daemon still running on it?") {
		t.Fatalf("migrate from a held store: exit %d, stderr %q", code, stderr)
	}

	code, _, stderr = kmirror(t, nil, "state", "migrate", "--config", cfg, "--from", old)
	if code != exitUsage || !strings.Contains(stderr, "want file:DIR") {
		t.Fatalf("--from without file: exit %d, stderr %q", code, stderr)
	}
}
