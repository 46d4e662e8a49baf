package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// A plugin the host cannot start (here an executable with the right
// checksum that is no plugin) stops `run` before anything else starts, and
// the error names the plugin.
func TestRunRefusesAPluginItCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := []byte("#!/bin/sh\necho not a plugin >&2\nexit 1\n")
	if err := os.WriteFile(filepath.Join(dir, "not-a-plugin"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(script)
	base := strings.Replace(validBase, "/var/lib/kmirror", t.TempDir(), 1)
	p := writeFile(t, "plugins.yaml", base+fmt.Sprintf("plugin.dir: %s\nplugins:\n  sso:\n    kind: auth\n    path: not-a-plugin\n    sha256: %s\n", dir, hex.EncodeToString(sum[:])))
	code, _, errOut := kmirror(t, nil, "run", "--config", p)
	if code != exitFailure || !strings.Contains(errOut, "cannot start the plugins") || !strings.Contains(errOut, "plugin.auth.sso") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

// Every built-in runs through the plugin host as the daemon runs it: out
// of process by re-executing the kmirror binary (`kmirror plugin serve`),
// and in process (plugin.builtin.in.process). The file store passes the
// state-store conformance suite through the host's handle, the static
// provider returns its credentials and the regex filter decides.
func TestBuiltinsThroughTheHost(t *testing.T) {
	t.Parallel()
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("in-process=%v", inProcess), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			stateDir := t.TempDir()
			specs := []pluginhost.Spec{
				{Name: "state", Kind: plugin.KindStateStore, Builtin: "file"},
				{Name: "creds", Kind: plugin.KindAuth, Builtin: "static", Config: plugin.Config{"username": "alice", "password": "s3cret"}},
				{Name: "scope", Kind: plugin.KindFilter, Builtin: "regex", Config: plugin.Config{"topics.include": []any{"orders.*"}}},
				{Name: "idle", Kind: plugin.KindFilter, Builtin: "idle-groups", Config: plugin.Config{"max_idle": "1h"}},
			}
			specs[0].Config = plugin.Config{"dir": stateDir}
			h, err := pluginhost.New(specs, pluginhost.Options{
				InProcess: inProcess,
				Builtins:  builtinServeConfig,
				Command: func(s pluginhost.Spec) (*exec.Cmd, error) {
					return exec.Command(binary, "plugin", "serve", string(s.Kind), s.Builtin), nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			if err := h.Start(ctx); err != nil {
				t.Fatal(err)
			}

			creds, err := h.Auth("creds")
			if err != nil {
				t.Fatal(err)
			}
			c, err := creds.Credentials(ctx, auth.Request{Role: auth.RoleSource, Mirror: "m1", Mechanism: auth.MechanismSCRAMSHA512})
			if err != nil || c.Username != "alice" || c.Password.Reveal() != "s3cret" {
				t.Fatalf("Credentials = %+v, %v", c, err)
			}
			f, err := h.Filter("scope")
			if err != nil {
				t.Fatal(err)
			}
			out, err := f.FilterTopics(ctx, "m1", []filter.Topic{{Name: "orders-eu"}, {Name: "payments"}, {Name: "__consumer_offsets", Internal: true}})
			if err != nil || len(out) != 1 || out[0].Name != "orders-eu" {
				t.Fatalf("FilterTopics = %v, %v", out, err)
			}
			idle, err := h.Filter("idle")
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			groups, err := idle.FilterGroups(ctx, "m1", []filter.Group{{ID: "active", LastCommit: now}, {ID: "idle", LastCommit: now.Add(-2 * time.Hour)}, {ID: "unknown"}})
			if err != nil || len(groups) != 2 || groups[0].ID != "active" || groups[1].ID != "unknown" {
				t.Fatalf("idle-groups FilterGroups = %v, %v; want active and unknown", groups, err)
			}
			store, err := h.StateStore("state")
			if err != nil {
				t.Fatal(err)
			}
			key := statestore.PartitionKey("m1", "orders-eu", 0)
			v, err := store.Put(ctx, key, []byte(`{"state":"MIRRORING"}`), statestore.Absent)
			if err != nil {
				t.Fatal(err)
			}
			if e, err := store.Get(ctx, key); err != nil || e.Version != v || string(e.Value) != `{"state":"MIRRORING"}` {
				t.Fatalf("Get = %+v, %v", e, err)
			}
			if _, err := store.Put(ctx, key, []byte("x"), statestore.Absent); !errors.Is(err, statestore.ErrVersionMismatch) {
				t.Fatalf("second create = %v, want ErrVersionMismatch through the host", err)
			}
			if _, err := statestore.Leases(store).AcquireLease(ctx, statestore.LeaseKey("m1", "metadata-sync"), "d1", time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := statestore.Leases(store).AcquireLease(ctx, statestore.LeaseKey("m1", "metadata-sync"), "d2", time.Minute); !errors.Is(err, statestore.ErrLeaseHeld) {
				t.Fatalf("lease taken twice: %v", err)
			}
		})
	}
}
