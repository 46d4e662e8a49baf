package statestorerpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// kind is the name the tests dispense the store under.
const kind = "statestore"

// dialStore serves impl through go-plugin's in-process gRPC connection and
// returns what the host gets from Dispense, or the error of Dispense.
func dialStore(t *testing.T, impl statestore.Store) (statestore.Store, error) {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		kind: &Plugin{Impl: impl},
	})
	// Close asks the server to stop (go-plugin's controller), as a host
	// does with a plugin process.
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		return nil, err
	}
	s, ok := raw.(statestore.Store)
	if !ok {
		t.Fatalf("Dispense returned %T, not a statestore.Store", raw)
	}
	return s, nil
}

func mustDialStore(t *testing.T, impl statestore.Store) statestore.Store {
	t.Helper()
	s, err := dialStore(t, impl)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	return s
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

// TestStateStoreConformanceOverRPC runs storetest against the host side of
// the RPC, serving the reference store (which pages natively) and a store
// with none of the optional interfaces.
func TestStateStoreConformanceOverRPC(t *testing.T) {
	t.Parallel()
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) statestore.Store { return mustDialStore(t, memstore.New()) })
	})
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) statestore.Store { return mustDialStore(t, plainStore{memstore.New()}) })
	})
}

// failingStore fails every call with err.
type failingStore struct{ err error }

func (f failingStore) Get(context.Context, string) (statestore.Entry, error) {
	return statestore.Entry{}, f.err
}
func (f failingStore) Put(context.Context, string, []byte, int64) (int64, error) { return 0, f.err }
func (f failingStore) Delete(context.Context, string, int64) error               { return f.err }
func (f failingStore) List(context.Context, string) ([]statestore.Entry, error)  { return nil, f.err }
func (f failingStore) Close() error                                              { return f.err }

// stateStoreSentinels is every sentinel of package statestore, checked
// against the package's source by TestEveryStateStoreSentinelIsTested.
var stateStoreSentinels = map[string]error{
	"ErrNotFound":        statestore.ErrNotFound,
	"ErrVersionMismatch": statestore.ErrVersionMismatch,
	"ErrClosed":          statestore.ErrClosed,
	"ErrLocked":          statestore.ErrLocked,
	"ErrInvalidKey":      statestore.ErrInvalidKey,
	"ErrInvalidVersion":  statestore.ErrInvalidVersion,
	"ErrInvalidArgument": statestore.ErrInvalidArgument,
	"ErrLeaseHeld":       statestore.ErrLeaseHeld,
	"ErrLeaseNotHeld":    statestore.ErrLeaseNotHeld,
	"ErrIncompatible":    statestore.ErrIncompatible,
}

func TestEveryStateStoreSentinelIsTested(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../statestore/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("finding package statestore's source: %v", err)
	}
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						found = append(found, n.Name)
					}
				}
			}
		}
	}
	slices.Sort(found)
	var tested []string
	for n := range stateStoreSentinels {
		tested = append(tested, n)
	}
	slices.Sort(tested)
	if !slices.Equal(found, tested) {
		t.Fatalf("package statestore declares sentinels %v; this test (and the wire table) covers %v", found, tested)
	}
}

// TestStateStoreSentinelsSurviveRPC: for every sentinel, every kind of call
// (unary, server stream, client stream, leases) returns on the host an
// error that errors.Is the sentinel, with the plugin's text.
func TestStateStoreSentinelsSurviveRPC(t *testing.T) {
	t.Parallel()
	for name, sentinel := range stateStoreSentinels {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text := "somestore: key \"mirrors/m/x\": " + sentinel.Error()
			s := mustDialStore(t, failingStore{err: fmt.Errorf("somestore: key %q: %w", "mirrors/m/x", sentinel)})
			ctx := t.Context()
			leases := statestore.Leases(s)
			calls := map[string]func() error{
				"Get":      func() error { _, err := s.Get(ctx, "k"); return err },
				"Put":      func() error { _, err := s.Put(ctx, "k", make([]byte, 3<<20), 0); return err },
				"Delete":   func() error { return s.Delete(ctx, "k", 1) },
				"List":     func() error { _, err := s.List(ctx, ""); return err },
				"ListPage": func() error { _, _, err := statestore.ListPage(ctx, s, "", "", 5); return err },
				"Acquire":  func() error { _, err := leases.AcquireLease(ctx, "k", "a", time.Minute); return err },
				"Renew":    func() error { _, err := leases.RenewLease(ctx, "k", "a", time.Minute); return err },
				"Release":  func() error { return leases.ReleaseLease(ctx, "k", "a") },
				"GetLease": func() error { _, err := leases.GetLease(ctx, "k"); return err },
				"Close":    s.Close, // last: the client is closed afterwards
			}
			for _, op := range []string{"Get", "Put", "Delete", "List", "ListPage", "Acquire", "Renew", "Release", "GetLease", "Close"} {
				err := calls[op]()
				want, wantName, wantText := sentinel, name, text
				if sentinel == statestore.ErrNotFound && (op == "Renew" || op == "Release") {
					// The generic leases: a lease record that is not
					// found is a lease the caller does not hold.
					want, wantName, wantText = statestore.ErrLeaseNotHeld, "ErrLeaseNotHeld", "nobody holds it"
				}
				if !errors.Is(err, want) || !strings.Contains(err.Error(), wantText) || !strings.Contains(err.Error(), `statestore plugin "store"`) {
					t.Errorf("%s: host got %v, want an error wrapping %s, naming the plugin and saying %q", op, err, wantName, wantText)
				}
				for other, o := range stateStoreSentinels {
					if other != wantName && errors.Is(err, o) && !errors.Is(want, o) {
						t.Errorf("%s: the host's error also matches %s", op, other)
					}
				}
			}
		})
	}
}

// TestUntypedErrorKeepsItsText: an error matching no sentinel arrives with
// its text and matches none.
func TestUntypedErrorKeepsItsText(t *testing.T) {
	t.Parallel()
	s := mustDialStore(t, failingStore{err: errors.New("disk on fire")})
	_, err := s.Get(t.Context(), "k")
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Get: %v", err)
	}
	for name, sentinel := range stateStoreSentinels {
		if errors.Is(err, sentinel) {
			t.Errorf("an untyped error matches %s", name)
		}
	}
}

// blockingStore blocks every call until its context ends, then reports
// that it saw the end and returns an error wrapping ctx.Err().
type blockingStore struct {
	entered chan time.Time // the call's deadline (zero: none)
	ended   chan error
}

func newBlockingStore() blockingStore {
	return blockingStore{entered: make(chan time.Time, 1), ended: make(chan error, 1)}
}

func (b blockingStore) wait(ctx context.Context) error {
	deadline, _ := ctx.Deadline()
	b.entered <- deadline
	<-ctx.Done()
	b.ended <- ctx.Err()
	return fmt.Errorf("blockingstore: %w", ctx.Err())
}

func (b blockingStore) Get(ctx context.Context, _ string) (statestore.Entry, error) {
	return statestore.Entry{}, b.wait(ctx)
}
func (b blockingStore) Put(ctx context.Context, _ string, _ []byte, _ int64) (int64, error) {
	return 0, b.wait(ctx)
}
func (b blockingStore) Delete(ctx context.Context, _ string, _ int64) error { return b.wait(ctx) }
func (b blockingStore) List(ctx context.Context, _ string) ([]statestore.Entry, error) {
	return nil, b.wait(ctx)
}
func (b blockingStore) Close() error { return nil }

// TestStateStoreContextReachesThePlugin: a call blocked in the plugin until
// its context ends returns, on the host, an error wrapping
// context.DeadlineExceeded or context.Canceled, and the plugin saw its
// context end the same way.
func TestStateStoreContextReachesThePlugin(t *testing.T) {
	t.Parallel()
	calls := map[string]func(context.Context, statestore.Store) error{
		"Get": func(ctx context.Context, s statestore.Store) error { _, err := s.Get(ctx, "k"); return err },
		"Put": func(ctx context.Context, s statestore.Store) error {
			_, err := s.Put(ctx, "k", []byte("v"), 0)
			return err
		},
		"Delete": func(ctx context.Context, s statestore.Store) error { return s.Delete(ctx, "k", 1) },
		"List":   func(ctx context.Context, s statestore.Store) error { _, err := s.List(ctx, ""); return err },
		"Acquire": func(ctx context.Context, s statestore.Store) error {
			_, err := statestore.Leases(s).AcquireLease(ctx, "k", "a", time.Minute)
			return err
		},
		"GetLease": func(ctx context.Context, s statestore.Store) error {
			_, err := statestore.Leases(s).GetLease(ctx, "k")
			return err
		},
	}
	for op, call := range calls {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			impl := newBlockingStore()
			s := mustDialStore(t, impl)

			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			hostDeadline, _ := ctx.Deadline()
			err := call(ctx, s)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("past its deadline: host got %v, want an error wrapping context.DeadlineExceeded", err)
			}
			select {
			case deadline := <-impl.entered:
				// gRPC sends the remaining time; the plugin's deadline is
				// the host's, give or take the time in transit.
				if d := deadline.Sub(hostDeadline).Abs(); deadline.IsZero() || d > 400*time.Millisecond {
					t.Errorf("the plugin's context had deadline %v, the host's %v", deadline, hostDeadline)
				}
				// The plugin's context ends with the deadline, or with
				// the cancellation the host's gRPC sends when it fires
				// first.
				if seen := <-impl.ended; seen == nil {
					t.Errorf("the plugin's context did not end")
				}
			default:
				t.Errorf("the call never reached the plugin within 500ms")
			}

			ctx, cancel = context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- call(ctx, s) }()
			<-impl.entered // blocked in the plugin: now cancel
			cancel()
			if seen := <-impl.ended; !errors.Is(seen, context.Canceled) {
				t.Errorf("the plugin's context ended with %v, want Canceled", seen)
			}
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("canceled: host got %v, want an error wrapping context.Canceled", err)
			}
		})
	}
}

// infoStore is a memstore with another Info.
type infoStore struct {
	*memstore.Store
	info statestore.Info
}

func (s infoStore) Info() statestore.Info { return s.info }

func TestStateStoreInfoIsValidatedWhenTheClientIsMade(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		info statestore.Info
		msg  string
	}{
		{statestore.Info{Name: "etcd", ProtocolMajor: 2, ProtocolMinor: 1}, "speaks statestore protocol 2.1, this host speaks 1.x"},
		{statestore.Info{Name: "etcd", ProtocolMajor: 0}, "speaks statestore protocol 0.0"},
		{statestore.Info{Name: "My Store", ProtocolMajor: statestore.ProtocolMajor}, `name "My Store"`},
	} {
		_, err := dialStore(t, infoStore{memstore.New(), c.info})
		if !errors.Is(err, statestore.ErrIncompatible) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Dispense of a store announcing %+v: %v, want ErrIncompatible saying %q", c.info, err, c.msg)
		}
	}
}

func TestStateStoreInfoTravels(t *testing.T) {
	t.Parallel()
	want := statestore.Info{Name: "etcd", Version: "3.6.1", ProtocolMajor: statestore.ProtocolMajor, ProtocolMinor: 4, Shared: true}
	s := mustDialStore(t, infoStore{memstore.New(), want})
	if got := statestore.InfoOf(s); got != want {
		t.Fatalf("host's Info = %+v, want the plugin's %+v", got, want)
	}
	if got := statestore.InfoOf(mustDialStore(t, plainStore{memstore.New()})); got != statestore.DefaultInfo() {
		t.Fatalf("host's Info of a store without Info = %+v, want DefaultInfo", got)
	}
	native := mustDialStore(t, &nativeLeaseStore{Store: memstore.New()})
	if got := statestore.InfoOf(native); !got.NativeLeases {
		t.Fatalf("host's Info of a store with native leases = %+v, want NativeLeases", got)
	}
}

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

func TestStateStorePluginUsesNativeLeases(t *testing.T) {
	t.Parallel()
	impl := &nativeLeaseStore{Store: memstore.New()}
	leases := statestore.Leases(mustDialStore(t, impl))
	ctx := t.Context()
	if _, err := leases.AcquireLease(ctx, "mirrors/m/leases/x", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.RenewLease(ctx, "mirrors/m/leases/x", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.GetLease(ctx, "mirrors/m/leases/x"); err != nil {
		t.Fatal(err)
	}
	if err := leases.ReleaseLease(ctx, "mirrors/m/leases/x", "a"); err != nil {
		t.Fatal(err)
	}
	if n := impl.calls.Load(); n != 4 {
		t.Fatalf("the store's native leases served %d of 4 calls", n)
	}
}

// TestStateStoreLargeStateListsOverRPC: 10,000 partition records of ~1 KiB
// plus a few values of several MiB, far more than gRPC's 4 MiB message
// limit in total, list through the RPC intact and in order.
func TestStateStoreLargeStateListsOverRPC(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	impl := memstore.New()
	for p := range 10000 {
		key := statestore.PartitionKey("dc1", fmt.Sprintf("topic-%d", p/100), int32(p%100))
		val := bytes.Repeat([]byte{byte(p)}, 1000+p%48)
		if _, err := impl.Put(ctx, key, val, statestore.Absent); err != nil {
			t.Fatal(err)
		}
	}
	for i, size := range []int{3 << 20, 5 << 20, 1<<20 - 7} {
		val := bytes.Repeat([]byte{byte(i + 1)}, size)
		if _, err := impl.Put(ctx, statestore.OffsetMapKey("dc1", "big", int32(i)), val, statestore.Absent); err != nil {
			t.Fatal(err)
		}
	}
	want, err := impl.List(ctx, "mirrors/dc1/")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range want {
		total += len(e.Key) + len(e.Value)
	}
	if total <= 4<<20 {
		t.Fatalf("test state is only %d bytes", total)
	}
	s := mustDialStore(t, impl)
	for _, prefix := range []string{"mirrors/dc1/", statestore.PartitionsPrefix("dc1"), ""} {
		got, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List(%q) of %d bytes over RPC: %v", prefix, total, err)
		}
		exp, _ := impl.List(ctx, prefix)
		if len(got) != len(exp) {
			t.Fatalf("List(%q) over RPC: %d entries, want %d", prefix, len(got), len(exp))
		}
		for i := range exp {
			if got[i].Key != exp[i].Key || got[i].Version != exp[i].Version || !bytes.Equal(got[i].Value, exp[i].Value) {
				t.Fatalf("List(%q) over RPC: entry %d = %q v%d (%d bytes), want %q v%d (%d bytes)",
					prefix, i, got[i].Key, got[i].Version, len(got[i].Value), exp[i].Key, exp[i].Version, len(exp[i].Value))
			}
		}
	}
	e, err := s.Get(ctx, statestore.OffsetMapKey("dc1", "big", 1))
	if err != nil || len(e.Value) != 5<<20 {
		t.Fatalf("Get of a 5 MiB value over RPC: %d bytes, %v", len(e.Value), err)
	}
	if _, err := s.Put(ctx, "big/put", make([]byte, 9<<20), statestore.Absent); err != nil {
		t.Fatalf("Put of a 9 MiB value over RPC: %v", err)
	}
}
