package filterrpc

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
	"github.com/kmirror/kmirror/sdk/internal/pb/filterv1"
)

// kind is the name the tests dispense the filter under.
const kind = "filter"

// dispenseFilter serves impl as a plugin over go-plugin's gRPC transport
// and returns the host side, as a host gets it (Dispense), or the error
// Dispense returned. conn is the host's connection, for raw calls.
func dispenseFilter(t *testing.T, impl filter.Filter) (f filter.Filter, conn *grpc.ClientConn, err error) {
	t.Helper()
	// Close shuts the server down through go-plugin's controller, as a
	// host does; calling the server's Stop as well races with it.
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{kind: &Plugin{Impl: impl}})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		return nil, client.Conn, err
	}
	return raw.(filter.Filter), client.Conn, nil
}

// mustDispenseFilter is dispenseFilter for a plugin that must be accepted.
func mustDispenseFilter(t *testing.T, impl filter.Filter) filter.Filter {
	t.Helper()
	f, _, err := dispenseFilter(t, impl)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	return f
}

// rpcCounter counts, per full method name, the calls a gRPC server
// received, and the request messages and the largest one.
type rpcCounter struct {
	mu       sync.Mutex
	calls    map[string]int
	messages int
	largest  int
}

func (c *rpcCounter) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c.mu.Lock()
	c.calls[info.FullMethod]++
	c.mu.Unlock()
	return handler(srv, &countingStream{ServerStream: ss, c: c})
}

func (c *rpcCounter) get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls["/kmirror.plugin.filter.v1.Filter/"+method]
}

type countingStream struct {
	grpc.ServerStream
	c *rpcCounter
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		n := proto.Size(m.(proto.Message))
		s.c.mu.Lock()
		s.c.messages++
		s.c.largest = max(s.c.largest, n)
		s.c.mu.Unlock()
	}
	return err
}

// serveFilterServer serves srv on an in-memory connection whose server and
// client refuse messages larger than maxMsg bytes (gRPC's default when 0),
// and returns the host's connection and the server's counts.
func serveFilterServer(t *testing.T, srv filterv1.FilterServer, maxMsg int) (*grpc.ClientConn, *rpcCounter) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	counter := &rpcCounter{calls: map[string]int{}}
	sopts := []grpc.ServerOption{grpc.StreamInterceptor(counter.stream)}
	dopts := []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}
	if maxMsg > 0 {
		sopts = append(sopts, grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))
		dopts = append(dopts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)))
	}
	s := grpc.NewServer(sopts...)
	filterv1.RegisterFilterServer(s, srv)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	cc, err := grpc.NewClient("passthrough:///filter", dopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return cc, counter
}

// keepEveryOther is a filter of every kind that keeps the items at even
// positions of its input, and records the size of each batch it was given.
type keepEveryOther struct {
	kinds   []filter.Kind
	mu      sync.Mutex
	batches map[filter.Kind][]int
}

func newKeepEveryOther(kinds ...filter.Kind) *keepEveryOther {
	return &keepEveryOther{kinds: kinds, batches: map[filter.Kind][]int{}}
}

func (k *keepEveryOther) Info() filter.Info {
	return filter.Info{Name: "every-other", Version: "1.2.3", ProtocolMajor: filter.ProtocolMajor,
		ProtocolMinor: filter.ProtocolMinor, Kinds: slices.Clone(k.kinds)}
}

func (k *keepEveryOther) seen(kind filter.Kind) []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.batches[kind])
}

func everyOther[T filter.Item](k *keepEveryOther, kind filter.Kind, ctx context.Context, in []T) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("every-other: %w", err)
	}
	k.mu.Lock()
	k.batches[kind] = append(k.batches[kind], len(in))
	k.mu.Unlock()
	if !slices.Contains(k.kinds, kind) {
		return in, nil
	}
	var out []T
	for i, x := range in {
		if i%2 == 0 {
			out = append(out, x)
		}
	}
	return out, nil
}

func (k *keepEveryOther) FilterTopics(ctx context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
	return everyOther(k, filter.Topics, ctx, in)
}

func (k *keepEveryOther) FilterGroups(ctx context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
	return everyOther(k, filter.Groups, ctx, in)
}

func (k *keepEveryOther) FilterACLs(ctx context.Context, _ string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
	return everyOther(k, filter.ACLs, ctx, in)
}

// The conformance suite passes through the RPC path against the filters it
// passes in process (sdk/filter's own tests).
func TestFilterConformanceOverRPC(t *testing.T) {
	t.Parallel()
	dropOdd := filter.Funcs{Name: "drop-odd", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for i, tp := range in {
			if i%2 == 0 {
				out = append(out, tp)
			}
		}
		return out, nil
	}}
	appOnly := filter.Funcs{Name: "app-only", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for _, tp := range in {
			if strings.HasPrefix(tp.Name, "app-") {
				out = append(out, tp)
			}
		}
		return out, nil
	}}
	allGroups := filter.Funcs{Name: "all-groups", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
		return in, nil
	}}
	impls := map[string]filter.Filter{
		"funcs":     dropOdd,
		"chain":     filter.Chain(appOnly, allGroups),
		"all-kinds": newKeepEveryOther(filter.AllKinds()...),
	}
	for name, impl := range impls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			filtertest.Run(t, mustDispenseFilter(t, impl))
		})
	}
}

// What a plugin decides arrives intact on the host, for every kind.
func TestFilterDecisionsCrossTheRPC(t *testing.T) {
	t.Parallel()
	impl := newKeepEveryOther(filter.AllKinds()...)
	f := mustDispenseFilter(t, impl)
	if got, want := f.Info(), impl.Info(); got.Name != want.Name || got.Version != want.Version || !slices.Equal(got.Kinds, want.Kinds) {
		t.Fatalf("Info over RPC = %+v, want %+v", got, want)
	}
	topics := filtertest.SampleTopics()
	gotT, err := f.FilterTopics(t.Context(), "m", topics)
	if err != nil {
		t.Fatal(err)
	}
	wantT, _ := impl.FilterTopics(t.Context(), "m", filtertest.SampleTopics())
	if !slices.EqualFunc(gotT, wantT, func(a, b filter.Topic) bool { return filter.VerifyOutput([]filter.Topic{a}, []filter.Topic{b}) == nil }) {
		t.Fatalf("topics over RPC differ from in process: %d vs %d items", len(gotT), len(wantT))
	}
	gotG, err := f.FilterGroups(t.Context(), "m", filtertest.SampleGroups())
	if err != nil {
		t.Fatal(err)
	}
	wantG, _ := impl.FilterGroups(t.Context(), "m", filtertest.SampleGroups())
	if !slices.Equal(gotG, wantG) {
		t.Fatalf("groups over RPC differ from in process: %v... vs %v...", gotG[:2], wantG[:2])
	}
	gotA, err := f.FilterACLs(t.Context(), "m", filtertest.SampleACLs())
	if err != nil {
		t.Fatal(err)
	}
	wantA, _ := impl.FilterACLs(t.Context(), "m", filtertest.SampleACLs())
	if !slices.Equal(gotA, wantA) {
		t.Fatalf("ACLs over RPC differ from in process: %d vs %d items", len(gotA), len(wantA))
	}

	// What the host gets back shares nothing with what it passed.
	i := slices.IndexFunc(gotT, func(tp filter.Topic) bool { return len(tp.Configs) > 0 })
	name := gotT[i].Name
	gotT[i].Configs["cleanup.policy"] = "changed"
	j := slices.IndexFunc(topics, func(tp filter.Topic) bool { return tp.Name == name })
	if topics[j].Configs["cleanup.policy"] == "changed" {
		t.Fatal("a returned topic's Configs is the input's map")
	}
}

// Group.LastCommit (protocol 1.1) reaches the plugin as the same instant,
// to the nanosecond, and an unknown (zero) one stays zero; the host gets
// back its own groups, LastCommit untouched.
func TestFilterGroupLastCommitCrossesTheRPC(t *testing.T) {
	t.Parallel()
	var seen []filter.Group
	impl := filter.Funcs{Name: "capture", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
		seen = slices.Clone(in)
		return in, nil
	}}
	f := mustDispenseFilter(t, impl)
	at := time.Date(2026, 12, 1, 19, 30, 5, 987654321, time.FixedZone("X", 5*3600))
	in := []filter.Group{
		{ID: "busy", Kind: filter.GroupConsumer, State: "Stable", LastCommit: time.Now()}, // with a monotonic reading
		{ID: "idle", Kind: filter.GroupClassic, State: "Empty", LastCommit: at},
		{ID: "old", Kind: filter.GroupShare, State: "Empty", LastCommit: time.Unix(1, 1)},
		{ID: "unknown", Kind: filter.GroupConsumer, State: "Empty"},
	}
	out, err := f.FilterGroups(t.Context(), "m", in)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(in) {
		t.Fatalf("the plugin saw %d groups, want %d", len(seen), len(in))
	}
	for i, g := range seen {
		w := in[i]
		if g.ID != w.ID || !g.LastCommit.Equal(w.LastCommit) || g.LastCommit.IsZero() != w.LastCommit.IsZero() {
			t.Errorf("the plugin saw %s LastCommit %v (zero %v), the host sent %v", g.ID, g.LastCommit, g.LastCommit.IsZero(), w.LastCommit)
		}
		if !g.LastCommit.IsZero() && g.LastCommit.UnixNano() != w.LastCommit.UnixNano() {
			t.Errorf("%s: %d ns, want %d", g.ID, g.LastCommit.UnixNano(), w.LastCommit.UnixNano())
		}
	}
	if !slices.Equal(out, in) {
		t.Errorf("the host got back %v, want its own groups %v", out, in)
	}
}

// A host of protocol 1.0 sends no last_commit: the plugin sees zero
// (unknown), never the Unix epoch.
func TestFilterGroupWithoutLastCommitIsUnknown(t *testing.T) {
	t.Parallel()
	got := groupCodec.fromPB(&filterv1.Group{Id: "g", Kind: "classic", State: "Empty"})
	if !got.LastCommit.IsZero() {
		t.Errorf("no last_commit read as %v, want the zero time", got.LastCommit)
	}
	if pb := groupCodec.toPB(filter.Group{ID: "g"}); pb.LastCommit != nil {
		t.Errorf("a zero LastCommit is sent as %v, want unset", pb.LastCommit)
	}
}

// A batch far larger than gRPC's 4 MiB message limit goes through the
// go-plugin transport (default limits), and the filter sees it whole, in
// one call.
func TestFilterLargeBatchOverRPC(t *testing.T) {
	t.Parallel()
	const n = 100_000
	topics := make([]filter.Topic, n)
	for i := range topics {
		topics[i] = filter.Topic{Name: fmt.Sprintf("team-%03d.payments-service-%06d.events-v2", i%500, i), Partitions: 12}
		if i%10 == 0 {
			topics[i].Configs = map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"}
		}
	}
	wire := 0
	reqs, _ := chunk(topicCodec, "dc1-to-dc2", topics, 1<<62)
	for _, r := range reqs {
		wire += proto.Size(r)
	}
	if wire <= 4<<20 {
		t.Fatalf("the batch is %d bytes on the wire; the test needs more than 4 MiB", wire)
	}
	t.Logf("%d topics, %d bytes on the wire", n, wire)
	impl := newKeepEveryOther(filter.Topics)
	f := mustDispenseFilter(t, impl)
	out, err := f.FilterTopics(t.Context(), "dc1-to-dc2", topics)
	if err != nil {
		t.Fatalf("%d topics (%d bytes): %v", n, wire, err)
	}
	if len(out) != n/2 || out[1].Name != topics[2].Name || out[n/2-1].Name != topics[n-2].Name {
		t.Fatalf("kept %d of %d topics, want every other one", len(out), n)
	}
	if got := impl.seen(filter.Topics); !slices.Equal(got, []int{n}) {
		t.Fatalf("the plugin's filter was called with batches of %v items, want one of %d", got, n)
	}
}

// No message of a call exceeds filterChunkBytes: a server and a client that
// refuse anything larger carry a 60,000-group batch (3 MB) and its answers in
// several messages.
func TestFilterMessagesStayUnderTheChunkSize(t *testing.T) {
	t.Parallel()
	const n = 60_000
	groups := make([]filter.Group, n)
	for i := range groups {
		groups[i] = filter.Group{ID: fmt.Sprintf("consumer-group-of-service-%06d", i), Kind: filter.GroupConsumer, State: "Stable"}
	}
	impl := newKeepEveryOther(filter.Groups)
	cc, counter := serveFilterServer(t, &filterServer{impl: impl}, 1<<20)
	f, err := newFilterClient(t.Context(), filterv1.NewFilterClient(cc))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.FilterGroups(t.Context(), "dc1-to-dc2", groups)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != n/2 {
		t.Fatalf("kept %d of %d groups, want every other one", len(out), n)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if counter.messages < 3 || counter.largest > 1<<20 {
		t.Fatalf("%d request messages, the largest %d bytes: want several, none over 1 MiB", counter.messages, counter.largest)
	}
}

func TestFilterChunksAreBoundedAndKeepOrder(t *testing.T) {
	t.Parallel()
	groups := filtertest.SampleGroups()
	const limit = 2000
	reqs, counts := chunk(groupCodec, "dc1", groups, limit)
	var all []filter.Group
	for i, r := range reqs {
		if size := proto.Size(r); size > limit {
			t.Errorf("request %d is %d bytes, over %d", i, size, limit)
		}
		if r.GetMirror() != "dc1" || len(r.GetGroups()) != counts[i] {
			t.Errorf("request %d: mirror %q, %d groups, counted %d", i, r.GetMirror(), len(r.GetGroups()), counts[i])
		}
		for _, g := range r.GetGroups() {
			all = append(all, groupCodec.fromPB(g))
		}
	}
	// LastCommit comes back in UTC: the same instant, so Kept matches every
	// group in order.
	kept, err := filter.Kept(groups, all)
	if len(reqs) < 10 || err != nil || len(all) != len(groups) || slices.Contains(kept, false) ||
		!slices.EqualFunc(all, groups, func(a, b filter.Group) bool { return a.ID == b.ID && a.LastCommit.Equal(b.LastCommit) }) {
		t.Fatalf("%d requests carry %d groups, want the %d sample groups in order", len(reqs), len(all), len(groups))
	}
	// An empty batch is still one message; an item larger than the limit
	// travels alone.
	if reqs, counts := chunk(groupCodec, "dc1", nil, limit); len(reqs) != 1 || counts[0] != 0 {
		t.Fatalf("empty batch: %d requests %v", len(reqs), counts)
	}
	big := filtertest.Groups("a", strings.Repeat("b", 3*limit), "c")
	if _, counts := chunk(groupCodec, "dc1", big, limit); !slices.Equal(counts, []int{1, 1, 1}) {
		t.Fatalf("oversized item: chunks of %v items, want [1 1 1]", counts)
	}
}

// The host never calls the RPC of a kind the plugin does not announce: it
// passes the items through (as copies). Asked anyway, the plugin side
// refuses with ErrUnsupportedKind.
func TestFilterUnannouncedKindsAreNotCalled(t *testing.T) {
	t.Parallel()
	impl := newKeepEveryOther(filter.Topics)
	cc, counter := serveFilterServer(t, &filterServer{impl: impl}, 0)
	f, err := newFilterClient(t.Context(), filterv1.NewFilterClient(cc))
	if err != nil {
		t.Fatal(err)
	}
	groups := filtertest.SampleGroups()
	gotG, err := f.FilterGroups(t.Context(), "m", groups)
	if err != nil || !slices.Equal(gotG, groups) {
		t.Fatalf("groups (not announced): %d of %d passed, %v; want all", len(gotG), len(groups), err)
	}
	acls := filtertest.SampleACLs()
	gotA, err := f.FilterACLs(t.Context(), "m", acls)
	if err != nil || !slices.Equal(gotA, acls) {
		t.Fatalf("ACLs (not announced): %d of %d passed, %v; want all", len(gotA), len(acls), err)
	}
	if _, err := f.FilterTopics(t.Context(), "m", filtertest.SampleTopics()); err != nil {
		t.Fatal(err)
	}
	if g, a, tp := counter.get("FilterGroups"), counter.get("FilterACLs"), counter.get("FilterTopics"); g != 0 || a != 0 || tp != 1 {
		t.Fatalf("RPCs received: FilterGroups %d, FilterACLs %d, FilterTopics %d; want 0, 0, 1", g, a, tp)
	}

	// A client that asks anyway (a buggy host, or another language's).
	stream, err := filterv1.NewFilterClient(cc).FilterGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&filterv1.FilterGroupsRequest{Mirror: "m", Groups: []*filterv1.Group{{Id: "g"}}})
	_ = stream.CloseSend()
	_, err = stream.Recv()
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("asked about groups: code %v (%v), want Unimplemented", status.Code(err), err)
	}
	if err := filterErrors.FromStatus(err); !errors.Is(err, filter.ErrUnsupportedKind) || !strings.Contains(err.Error(), `filter "every-other" was asked about groups`) {
		t.Fatalf("asked about groups: %v, want ErrUnsupportedKind naming the filter and kind", err)
	}
	if got := impl.seen(filter.Groups); len(got) != 0 {
		t.Fatalf("the filter's FilterGroups was called %d times", len(got))
	}
}

// Every sentinel of package filter a plugin returns matches errors.Is on the
// host, and the table lists every sentinel the package declares.
func TestFilterSentinelsSurviveTheRPC(t *testing.T) {
	t.Parallel()
	declared := sentinelsDeclaredIn(t, filepath.Join("..", "..", "filter"))
	var listed []string
	for _, s := range filterSentinels {
		listed = append(listed, s.Name)
	}
	if len(declared) != len(filterSentinels) {
		t.Fatalf("package filter declares %v; filterSentinels lists %v", declared, listed)
	}
	var which atomic.Int32
	impl := filter.Funcs{Name: "fails", Groups: func(_ context.Context, mirror string, _ []filter.Group) ([]filter.Group, error) {
		s := filterSentinels[which.Load()]
		return nil, fmt.Errorf("mirror %s: consulting the policy service: %w", mirror, s.Err)
	}}
	f := mustDispenseFilter(t, impl)
	for i, s := range filterSentinels {
		which.Store(int32(i))
		_, err := f.FilterGroups(t.Context(), "dc1", filtertest.Groups("g"))
		if !errors.Is(err, s.Err) {
			t.Errorf("%s: errors.Is(%v, %v) is false on the host", s.Name, err, s.Err)
		}
		for _, other := range filterSentinels {
			if other.Err != s.Err && errors.Is(err, other.Err) {
				t.Errorf("%s: the host's error also matches %s", s.Name, other.Name)
			}
		}
		if want := `filter plugin "fails": mirror dc1: consulting the policy service: ` + s.Err.Error(); err == nil || err.Error() != want {
			t.Errorf("%s: host error %q, want %q", s.Name, err, want)
		}
	}
}

// sentinelsDeclaredIn returns the names of the exported Err* variables of
// the package in dir.
func sentinelsDeclaredIn(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(id.Name, "Err") && id.IsExported() {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	return names
}

// A plugin's filter sees the host's deadline and cancellation: a call blocked
// until its context ends returns, on the host, an error wrapping
// context.DeadlineExceeded or context.Canceled.
func TestFilterContextReachesThePlugin(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	ended := make(chan error, 1) // what the plugin's context said
	impl := filter.Funcs{Name: "blocks", Topics: func(ctx context.Context, _ string, _ []filter.Topic) ([]filter.Topic, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, fmt.Errorf("blocks: %w", ctx.Err())
	}}
	f := mustDispenseFilter(t, impl)

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := f.FilterTopics(ctx, "m", filtertest.Topics("a"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want an error wrapping context.DeadlineExceeded", err)
		}
		<-started
		if err := <-ended; err == nil {
			t.Fatal("the plugin's context did not end")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		_, err := f.FilterTopics(ctx, "m", filtertest.Topics("a"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want an error wrapping context.Canceled", err)
		}
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("the plugin's context ended with %v, want context.Canceled", err)
		}
	})
}

// A Go filter that invents or changes items is refused on the host with
// ErrInvalidOutput naming the item; the plugin side checks before it
// answers.
func TestFilterInventedOrChangedItemsAreRefused(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mangle func(in []filter.Topic) []filter.Topic
		want   string
	}{
		"invents": {func(in []filter.Topic) []filter.Topic {
			return append(slices.Clone(in[:1]), filtertest.Topics("invented")...)
		},
			`topic "invented" was not in the input`},
		"changes": {func(in []filter.Topic) []filter.Topic {
			out := slices.Clone(in[:2])
			out[1].Partitions = 99
			return out
		}, `topic "b" was changed`},
		"returns twice": {func(in []filter.Topic) []filter.Topic { return []filter.Topic{in[0], in[0]} },
			`topic "a" was not in the input, or is returned twice`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := mustDispenseFilter(t, filter.Funcs{Name: "bad", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
				return c.mangle(in), nil
			}})
			_, err := f.FilterTopics(t.Context(), "dc1", filtertest.Topics("a", "b", "c"))
			if !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrInvalidOutput with %q", err, c.want)
			}
		})
	}
}

// rawFilter is a plugin written against the protocol directly, as one in
// another language would be, answering what answer returns per request.
type rawFilter struct {
	filterv1.UnimplementedFilterServer
	info   *filterv1.InfoResponse
	answer func(reqs []*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse
}

func (r *rawFilter) Info(context.Context, *filterv1.InfoRequest) (*filterv1.InfoResponse, error) {
	return r.info, nil
}

func (r *rawFilter) FilterTopics(stream grpc.BidiStreamingServer[filterv1.FilterTopicsRequest, filterv1.FilterResponse]) error {
	var reqs []*filterv1.FilterTopicsRequest
	for {
		req, err := stream.Recv()
		if err != nil {
			break
		}
		reqs = append(reqs, req)
	}
	for _, resp := range r.answer(reqs) {
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

var rawInfo = &filterv1.InfoResponse{Name: "raw", ProtocolMajor: 1, Kinds: []filterv1.Kind{filterv1.Kind_KIND_TOPICS}}

// A plugin that answers the wrong number of flags or responses is refused
// with ErrInvalidOutput saying what was wrong; a correct one is understood.
func TestFilterMalformedAnswersAreRefused(t *testing.T) {
	t.Parallel()
	flags := func(reqs []*filterv1.FilterTopicsRequest, extra int) []*filterv1.FilterResponse {
		var out []*filterv1.FilterResponse
		for _, r := range reqs {
			kept := make([]bool, len(r.GetTopics())+extra)
			for i := range kept {
				kept[i] = strings.HasSuffix(r.GetTopics()[min(i, len(r.GetTopics())-1)].GetName(), ".events")
			}
			out = append(out, &filterv1.FilterResponse{Kept: kept})
		}
		return out
	}
	cases := map[string]struct {
		answer func([]*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse
		want   string // "" for a valid answer
	}{
		"valid":         {func(r []*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse { return flags(r, 0) }, ""},
		"too few flags": {func(r []*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse { return flags(r, -1) }, "flags to request message 1 of"},
		"extra flag":    {func(r []*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse { return flags(r, 1) }, "flags to request message 1 of"},
		"no answer":     {func([]*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse { return nil }, "answered 0 of"},
		"one answer too many": {func(r []*filterv1.FilterTopicsRequest) []*filterv1.FilterResponse {
			return append(flags(r, 0), &filterv1.FilterResponse{})
		}, "answered more than the"},
	}
	topics := filtertest.SampleTopics()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cc, _ := serveFilterServer(t, &rawFilter{info: rawInfo, answer: c.answer}, 0)
			f, err := newFilterClient(t.Context(), filterv1.NewFilterClient(cc))
			if err != nil {
				t.Fatal(err)
			}
			f.chunkBytes = 4096 // several request messages
			out, err := f.FilterTopics(t.Context(), "dc1", topics)
			if c.want == "" {
				if err != nil || len(out) != 1000 {
					t.Fatalf("valid answer: %d topics kept, %v; want the 1000 .events topics", len(out), err)
				}
				return
			}
			if !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `filter plugin "raw"`) {
				t.Fatalf("got %v, want ErrInvalidOutput naming the plugin and %q", err, c.want)
			}
		})
	}
}

// A plugin whose Info does not validate (another major version, an unknown
// or no kind, a bad name) is refused when the host side is made, with an
// error wrapping ErrIncompatible that says why.
func TestFilterInfoIsValidatedAtDispense(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		info *filterv1.InfoResponse
		want string
	}{
		"major 2":      {&filterv1.InfoResponse{Name: "next", ProtocolMajor: 2, ProtocolMinor: 1, Kinds: []filterv1.Kind{filterv1.Kind_KIND_TOPICS}}, `filter "next" speaks filter protocol 2.1, this host speaks 1.x`},
		"major 0":      {&filterv1.InfoResponse{Name: "zero", Kinds: []filterv1.Kind{filterv1.Kind_KIND_TOPICS}}, "speaks filter protocol 0.0"},
		"no kind":      {&filterv1.InfoResponse{Name: "idle", ProtocolMajor: 1}, "handles no kind"},
		"unknown kind": {&filterv1.InfoResponse{Name: "odd", ProtocolMajor: 1, Kinds: []filterv1.Kind{filterv1.Kind(7)}}, `unknown kind "7"`},
		"unspecified":  {&filterv1.InfoResponse{Name: "odd", ProtocolMajor: 1, Kinds: []filterv1.Kind{filterv1.Kind_KIND_UNSPECIFIED}}, `unknown kind "KIND_UNSPECIFIED"`},
		"twice":        {&filterv1.InfoResponse{Name: "odd", ProtocolMajor: 1, Kinds: []filterv1.Kind{filterv1.Kind_KIND_ACLS, filterv1.Kind_KIND_ACLS}}, `kind "acls" twice`},
		"bad name":     {&filterv1.InfoResponse{Name: "My Filter", ProtocolMajor: 1, Kinds: []filterv1.Kind{filterv1.Kind_KIND_ACLS}}, `name "My Filter"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cc, _ := serveFilterServer(t, &rawFilter{info: c.info}, 0)
			_, err := newFilterClient(t.Context(), filterv1.NewFilterClient(cc))
			if !errors.Is(err, filter.ErrIncompatible) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrIncompatible with %q", err, c.want)
			}
		})
	}

	// Through go-plugin's Dispense, as a host makes it.
	_, _, err := dispenseFilter(t, badMajor{newKeepEveryOther(filter.Topics)})
	if !errors.Is(err, filter.ErrIncompatible) || !strings.Contains(err.Error(), "speaks filter protocol 2.0") {
		t.Fatalf("Dispense of a major-2 filter: %v, want ErrIncompatible", err)
	}
}

// badMajor is a filter announcing protocol 2.0.
type badMajor struct{ *keepEveryOther }

func (b badMajor) Info() filter.Info {
	i := b.keepEveryOther.Info()
	i.ProtocolMajor, i.ProtocolMinor = 2, 0
	return i
}

// BenchmarkFilterTopicsOverRPC is the cost of one filter call through
// go-plugin's gRPC transport (a local socket), for batches of the sizes a
// mirror sees; compare with the in-process call of the same filter.
func BenchmarkFilterTopicsOverRPC(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		topics := make([]filter.Topic, n)
		for i := range topics {
			topics[i] = filter.Topic{Name: fmt.Sprintf("team-%03d.service-%06d.events", i%500, i), Partitions: 12}
		}
		impl := newKeepEveryOther(filter.Topics)
		client, _ := goplugin.TestPluginGRPCConn(b, false, map[string]goplugin.Plugin{kind: &Plugin{Impl: impl}})
		raw, err := client.Dispense(kind)
		if err != nil {
			b.Fatal(err)
		}
		for name, f := range map[string]filter.Filter{"rpc": raw.(filter.Filter), "in-process": impl} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := f.FilterTopics(b.Context(), "m", topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		_ = client.Close()
	}
}
