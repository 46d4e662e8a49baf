package plugin

// The state-store kind end to end through this package's public surface: a
// real plugin process built from testdata/memstore-plugin, and a store a
// ServeConfig constructor builds when the host configures it. The RPC
// adaptor's own tests are in sdk/internal/statestorerpc.

import (
	"context"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// TestServeRunsAStateStorePlugin builds testdata/memstore-plugin (a main of
// one plugin.Serve call), launches it as go-plugin does (handshake with the
// magic cookie, AutoMTLS, gRPC), and runs the conformance suite against the
// store it serves, one plugin process per subtest.
func TestServeRunsAStateStorePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches a plugin binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "memstore-plugin")
	build := exec.Command("go", "build", "-o", bin, "./testdata/memstore-plugin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	hs, err := Handshake(KindStateStore)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := ClientPlugins(KindStateStore)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) statestore.Store {
		client := goplugin.NewClient(&goplugin.ClientConfig{
			HandshakeConfig:  goplugin.HandshakeConfig{MagicCookieKey: hs.MagicCookieKey, MagicCookieValue: hs.MagicCookieValue},
			VersionedPlugins: sets,
			Cmd:              exec.Command(bin),
			AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
			AutoMTLS:         true,
			Logger:           hclog.NewNullLogger(),
		})
		t.Cleanup(client.Kill)
		rpc, err := client.Client()
		if err != nil {
			t.Fatalf("starting the plugin: %v", err)
		}
		if v := client.NegotiatedVersion(); v != StateStoreProtocolMajor {
			t.Fatalf("negotiated protocol %d, want %d", v, StateStoreProtocolMajor)
		}
		raw, err := rpc.Dispense(string(KindStateStore))
		if err != nil {
			t.Fatalf("Dispense: %v", err)
		}
		s := raw.(statestore.Store)
		if info := statestore.InfoOf(s); info.Name != "memstore" {
			t.Fatalf("plugin's Info = %+v", info)
		}
		return s
	})
}

// dialConfiguredStore serves a store built by a ServeConfig constructor,
// configures it through the configuration service as a host does, and
// returns the host's client.
func dialConfiguredStore(t *testing.T, build func() statestore.Store) statestore.Store {
	t.Helper()
	cfg := ServeConfig{Schema: Schema{{Name: "dir", Type: FieldString}}, NewStateStore: func(_ context.Context, _ string, c Config) (statestore.Store, error) {
		if c["dir"] != "/state" {
			return nil, &ConfigError{Problems: []Problem{{Key: "dir", Reason: "want /state"}}}
		}
		return build(), nil
	}}
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{string(KindStateStore): ServerPlugin(cfg, KindStateStore)})
	t.Cleanup(func() { client.Close() })
	if err := NewConfigClient(client.Conn).Configure(t.Context(), "store", Config{"dir": "/state"}); err != nil {
		t.Fatal(err)
	}
	raw, err := client.Dispense(string(KindStateStore))
	if err != nil {
		t.Fatal(err)
	}
	return raw.(statestore.Store)
}

// A store a plugin builds from the host's configuration passes the suite
// through the RPC, and what it offers natively (paging, leases) stays
// visible: the constructor's lazy stand-in hides nothing.
func TestAConfiguredStoreKeepsItsNativeInterfaces(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Store {
		return dialConfiguredStore(t, func() statestore.Store { return memstore.New() })
	})
	impl := &nativeLeaseStore{Store: memstore.New()}
	s := dialConfiguredStore(t, func() statestore.Store { return impl })
	if info := statestore.InfoOf(s); !info.NativeLeases {
		t.Fatalf("Info %+v: the constructed store's native leases are hidden", info)
	}
	if _, err := statestore.Leases(s).AcquireLease(t.Context(), "mirrors/m/leases/x", "a", time.Minute); err != nil || impl.calls.Load() != 1 {
		t.Fatalf("AcquireLease = %v; native lease calls %d, want 1", err, impl.calls.Load())
	}
	plain := dialConfiguredStore(t, func() statestore.Store { return plainStore{memstore.New()} })
	if info := statestore.InfoOf(plain); info.NativeLeases {
		t.Fatalf("Info %+v: a store without leases reported native ones", info)
	}
}

// plainStore hides every optional interface of the store it wraps, so that
// the plugin side serves it through the generic helpers (paging over List,
// CAS leases, DefaultInfo).
type plainStore struct{ s statestore.Store }

func (p plainStore) Get(ctx context.Context, key string) (statestore.Entry, error) {
	return p.s.Get(ctx, key)
}

func (p plainStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	return p.s.Put(ctx, key, value, expect)
}

func (p plainStore) Delete(ctx context.Context, key string, expect int64) error {
	return p.s.Delete(ctx, key, expect)
}

func (p plainStore) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	return p.s.List(ctx, prefix)
}

func (p plainStore) Close() error { return p.s.Close() }

// nativeLeaseStore is a memstore whose leases count the calls that reach
// them (they are generic leases underneath).
type nativeLeaseStore struct {
	*memstore.Store
	calls atomic.Int64
	once  atomic.Pointer[statestore.CASLeases]
}

func (s *nativeLeaseStore) leases() *statestore.CASLeases {
	s.once.CompareAndSwap(nil, statestore.NewCASLeases(s.Store))
	return s.once.Load()
}

func (s *nativeLeaseStore) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	s.calls.Add(1)
	return s.leases().AcquireLease(ctx, key, holder, ttl)
}

func (s *nativeLeaseStore) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	s.calls.Add(1)
	return s.leases().RenewLease(ctx, key, holder, ttl)
}

func (s *nativeLeaseStore) ReleaseLease(ctx context.Context, key, holder string) error {
	s.calls.Add(1)
	return s.leases().ReleaseLease(ctx, key, holder)
}

func (s *nativeLeaseStore) GetLease(ctx context.Context, key string) (statestore.Lease, error) {
	s.calls.Add(1)
	return s.leases().GetLease(ctx, key)
}
