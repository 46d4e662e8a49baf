package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/builtins"
	"github.com/kmirror/kmirror/internal/etcdtest"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/plugins/filters/regex"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// builtinCase is, for one built-in, a configuration it accepts and one it
// refuses with the key named.
type builtinCase struct {
	valid   func(t *testing.T) plugin.Config
	invalid plugin.Config
	badKey  string
}

var builtinCases = map[string]builtinCase{
	"statestore file": {
		valid:   func(t *testing.T) plugin.Config { return plugin.Config{"dir": filepath.Join(t.TempDir(), "state")} },
		invalid: plugin.Config{"dir": ""}, badKey: "dir",
	},
	"statestore etcd": {
		// A real etcd server of the test's own (CI installs etcd-server).
		valid: func(t *testing.T) plugin.Config {
			srv := etcdtest.StartT(t, etcdtest.Options{})
			return plugin.Config{"endpoints": []any{srv.Endpoint}, "prefix": srv.Prefix(t)}
		},
		invalid: plugin.Config{"endpoints": []any{"127.0.0.1:2379"}, "dial_timeout": "soon"}, badKey: "dial_timeout",
	},
	"statestore kafka": {
		// An in-process cluster: the store's own tests run on real Kafka.
		valid: func(t *testing.T) plugin.Config {
			c := kfaketest.NewCluster(t)
			return plugin.Config{"bootstrap.servers": []any{c.ListenAddrs()[0]}, "mirror.topic.replication.factor": float64(1)}
		},
		invalid: plugin.Config{"bootstrap.servers": []any{"127.0.0.1:9092"}, "request.timeout": "soon"}, badKey: "request.timeout",
	},
	"auth static": {
		valid:   func(*testing.T) plugin.Config { return plugin.Config{"username": "alice", "password": "s3cret"} },
		invalid: plugin.Config{"username": "alice", "password": "s3cret", "mechanisms": []any{"GSSAPI"}}, badKey: "mechanisms",
	},
	"auth oauth": {
		valid: func(*testing.T) plugin.Config {
			return plugin.Config{"token_endpoint": "https://idp.example/token", "client_id": "kmirror", "client_secret": "s3cret"}
		},
		invalid: plugin.Config{"token_endpoint": "https://idp.example/token", "client_id": "kmirror", "client_secret": "s3cret", "request_timeout": "soon"}, badKey: "request_timeout",
	},
	"filter regex": {
		valid:   func(*testing.T) plugin.Config { return plugin.Config{"topics.include": []any{"orders.*"}} },
		invalid: plugin.Config{"topics.include": []any{"orders("}}, badKey: "topics.include",
	},
	"filter idle-groups": {
		valid:   func(*testing.T) plugin.Config { return plugin.Config{"max_idle": "168h"} },
		invalid: plugin.Config{"max_idle": "0s"}, badKey: "max_idle",
	},
}

// checkConfigService asks a built-in's configuration service for its
// schema, then configures it with a refused and an accepted block.
func checkConfigService(t *testing.T, cc *plugin.ConfigClient, b builtins.Plugin, c builtinCase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	schema, err := cc.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(schema, b.Serve.Schema) {
		t.Fatalf("Schema over RPC = %v\nwant %v", schema, b.Serve.Schema)
	}
	err = cc.Configure(ctx, b.Name, c.invalid)
	var ce *plugin.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, plugin.ErrInvalidConfig) || len(ce.Problems) != 1 || ce.Problems[0].Key != c.badKey {
		t.Fatalf("Configure(%v) = %v; want a *plugin.ConfigError naming %s", c.invalid, err, c.badKey)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the error holds the secret: %v", err)
	}
	if err := cc.Configure(ctx, b.Name, c.valid(t)); err != nil {
		t.Fatalf("Configure(valid) = %v", err)
	}
}

// Every built-in serves its Schema through the configuration service and
// takes or refuses a block through it (in process, over gRPC).
func TestEveryBuiltinServesItsSchema(t *testing.T) {
	t.Parallel()
	if len(builtins.All()) != len(builtinCases) {
		t.Fatalf("%d built-ins (%s), %d test cases: add the new one", len(builtins.All()), builtins.List(), len(builtinCases))
	}
	for _, b := range builtins.All() {
		id := string(b.Kind) + " " + b.Name
		c, ok := builtinCases[id]
		if !ok {
			t.Fatalf("no test case for %s", id)
		}
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			kind, err := b.Serve.Kind()
			if err != nil || kind != b.Kind {
				t.Fatalf("Kind = %v, %v; want %s", kind, err, b.Kind)
			}
			client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{string(kind): plugin.ServerPlugin(b.Serve, kind)})
			t.Cleanup(func() { client.Close() })
			checkConfigService(t, plugin.NewConfigClient(client.Conn), b, c)
		})
	}
}

// The host's way: the kmirror binary re-executed as `plugin serve filter
// regex`, reached through go-plugin's client with AutoMTLS and the
// handshake of the SDK.
func TestPluginServeThroughGoPlugin(t *testing.T) {
	t.Parallel()
	hs, err := plugin.Handshake(plugin.KindFilter)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := plugin.ClientPlugins(plugin.KindFilter)
	if err != nil {
		t.Fatal(err)
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: sets,
		Cmd:              exec.Command(binary, "plugin", "serve", "filter", "regex"),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin.filter.regex", Output: hclog.DefaultOutput, Level: hclog.Warn}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	if client.NegotiatedVersion() != int(hs.ProtocolVersion) {
		t.Fatalf("negotiated protocol %d, want %d", client.NegotiatedVersion(), hs.ProtocolVersion)
	}
	grpcClient, ok := rpc.(*goplugin.GRPCClient)
	if !ok {
		t.Fatalf("client protocol %T, want gRPC", rpc)
	}
	b, _ := builtins.Find("filter", "regex")
	if !slices.Equal(b.Serve.Schema, regex.Schema) {
		t.Fatal("the registry's regex schema is not regex.Schema")
	}
	checkConfigService(t, plugin.NewConfigClient(grpcClient.Conn), b, builtinCases["filter regex"])
}

func TestPluginServeByHand(t *testing.T) {
	t.Parallel()
	code, _, stderr := kmirror(t, nil, "plugin", "serve", "filter", "regex")
	if code == 0 || !strings.Contains(stderr, "not meant to be run by hand") || !strings.Contains(stderr, "This binary is a plugin") {
		t.Fatalf("by hand: exit %d, stderr %q; want non-zero and what it is", code, stderr)
	}
	for _, args := range [][]string{{"plugin", "serve", "filter", "nope"}, {"plugin", "serve", "metrics", "regex"}, {"plugin", "serve"}, {"plugin"}} {
		code, _, stderr := kmirror(t, nil, args...)
		if code != exitUsage || !strings.Contains(stderr, "built-in plugins: statestore file, statestore etcd, statestore kafka, auth static, auth oauth, filter regex") {
			t.Errorf("kmirror %v: exit %d, stderr %q; want %d listing the built-ins", args, code, stderr, exitUsage)
		}
	}
	_, help, _ := kmirror(t, nil, "help")
	if strings.Contains(help, "\n  plugin ") {
		t.Fatalf("help lists the hidden plugin command:\n%s", help)
	}
}
