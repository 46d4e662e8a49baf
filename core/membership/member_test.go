package membership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Short timeouts keep the tests quick; the session is long enough for a
// loaded CI machine to heartbeat in time.
const (
	testSession   = 1500 * time.Millisecond
	testHeartbeat = 100 * time.Millisecond
	testRebalance = 3 * time.Second
)

// recorder is the handlers' shared record of who owns what: every
// OnAssigned and OnRevoked checks, under its lock, that an item never has
// two owners at once.
type recorder struct {
	mu         sync.Mutex
	owner      map[string]string // item → daemon
	violations []string
	revoked    map[string]int // daemon → items revoked so far
}

func newRecorder() *recorder {
	return &recorder{owner: map[string]string{}, revoked: map[string]int{}}
}

type recHandler struct {
	r    *recorder
	name string
}

func (h recHandler) OnAssigned(gen int32, items []string) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	for _, it := range items {
		if o, ok := h.r.owner[it]; ok {
			h.r.violations = append(h.r.violations, fmt.Sprintf("generation %d: %s assigned %s, which %s still owns", gen, h.name, it, o))
		}
		h.r.owner[it] = h.name
	}
}

func (h recHandler) OnRevoked(gen int32, items []string) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	for _, it := range items {
		if o := h.r.owner[it]; o != h.name {
			h.r.violations = append(h.r.violations, fmt.Sprintf("generation %d: %s revoked %s, which %q owns", gen, h.name, it, o))
		}
		delete(h.r.owner, it)
	}
	h.r.revoked[h.name] += len(items)
}

// snapshot returns a copy of the owners.
func (r *recorder) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.owner)
}

// counts returns how many items each daemon owns.
func (r *recorder) counts() map[string]int {
	out := map[string]int{}
	for _, o := range r.snapshot() {
		out[o]++
	}
	return out
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		t.Error(v)
	}
}

// waitFor polls cond (every few milliseconds: the members' state changes
// in their own goroutines) until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type harness struct {
	t     *testing.T
	c     *kfake.Cluster
	group string
	items []string
	rec   *recorder
}

func newHarness(t *testing.T, n int) *harness {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("mirror/topic/%d", i)
	}
	return &harness{t: t, c: c, group: "kmirror-" + strings.ReplaceAll(t.Name(), "/", "-"), items: items, rec: newRecorder()}
}

// client returns a client of the cluster whose internal retries (of a
// request refused with NOT_COORDINATOR) wait 20ms, not franz-go's 250ms
// and more, which would add up to the short session timeout.
func (h *harness) client() *kgo.Client {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.c.ListenAddrs()...), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(cl.Close)
	return cl
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

type running struct {
	m      *Member
	cancel context.CancelFunc
	done   chan error
}

// start runs a member named name until the test ends.
func (h *harness) start(name string, opts ...Opt) *running {
	h.t.Helper()
	cl := h.client()
	opts = append([]Opt{WithLogger(hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: testWriter{h.t}})), WithSessionTimeout(testSession), WithHeartbeatInterval(testHeartbeat), WithRebalanceTimeout(testRebalance)}, opts...)
	m, err := New(cl, h.group, Metadata{DaemonID: name, Host: name + ".example", AdminAddress: name + ":8080", Items: h.items}, recHandler{h.rec, name}, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	h.t.Cleanup(func() {
		m.Close()
		cancel()
		if err := <-r.done; err != nil {
			h.t.Errorf("%s: Run: %v", name, err)
		}
	})
	return r
}

// settled reports whether the recorder shows every item owned, each member
// of want owning its count, and every running member's view in one
// generation with nothing moving that agrees with the recorder.
func (h *harness) settled(want map[string]int, members ...*running) bool {
	owners := h.rec.snapshot()
	if len(owners) != len(h.items) {
		return false
	}
	got := map[string]int{}
	for _, o := range owners {
		got[o]++
	}
	if !maps.Equal(got, want) {
		return false
	}
	var gen int32
	for i, r := range members {
		v := r.m.Members()
		if len(v.Moving) > 0 || len(v.Members) != len(members) || i > 0 && v.Generation != gen {
			return false
		}
		gen = v.Generation
		for _, it := range h.items {
			mi, ok := v.Owner(it)
			if !ok || mi.DaemonID != owners[it] {
				return false
			}
		}
	}
	return true
}

// evenly returns the counts an even split of n items over names gives, in
// any order: it checks got against them.
func evenly(got map[string]int, n int, names ...string) bool {
	if len(got) != len(names) {
		return false
	}
	total := 0
	for _, name := range names {
		c := got[name]
		if c < n/len(names) || c > (n+len(names)-1)/len(names) {
			return false
		}
		total += c
	}
	return total == n
}

func (h *harness) waitEven(what string, members []*running, names ...string) {
	h.t.Helper()
	waitFor(h.t, what, 20*time.Second, func() bool {
		c := h.rec.counts()
		return evenly(c, len(h.items), names...) && h.settled(c, members...)
	})
}

// TestMembersSplitEvenlyAndANewcomerTakesItsShare: three members split 30
// items 10/10/10; a fourth takes 7 or 8 of them, and only those move; no
// item ever has two owners (the recorder checks every callback).
func TestMembersSplitEvenlyAndANewcomerTakesItsShare(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 30)
	a, b, c := h.start("a"), h.start("b"), h.start("c")
	h.waitEven("three members own 10 items each", []*running{a, b, c}, "a", "b", "c")
	before := h.rec.snapshot()

	d := h.start("d")
	h.waitEven("four members own 7 or 8 items each", []*running{a, b, c, d}, "a", "b", "c", "d")
	after := h.rec.snapshot()
	moved := 0
	for it, o := range after {
		if before[it] != o {
			moved++
			if o != "d" {
				t.Errorf("item %s moved from %s to %s, not to the newcomer", it, before[it], o)
			}
		}
	}
	if moved < 7 || moved > 8 {
		t.Errorf("%d items moved to the newcomer, want 7 or 8", moved)
	}
	h.rec.check(t)

	// Every member, leader or follower, describes the whole group.
	v := b.m.Members()
	if len(v.Members) != 4 || v.Self == "" || v.Leader == "" {
		t.Fatalf("view %+v", v)
	}
	for _, mi := range v.Members {
		if mi.Host != mi.DaemonID+".example" || mi.AdminAddress != mi.DaemonID+":8080" {
			t.Errorf("member %s: host %q admin %q", mi.DaemonID, mi.Host, mi.AdminAddress)
		}
	}
}

// TestCloseMovesOnlyTheLeaversItems: a member that closes revokes its items
// and leaves; the others take them at once (no session timeout) and keep
// their own.
func TestCloseMovesOnlyTheLeaversItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 30)
	a, b, c := h.start("a"), h.start("b"), h.start("c")
	h.waitEven("three members own 10 items each", []*running{a, b, c}, "a", "b", "c")
	before := h.rec.snapshot()

	var leaves atomic.Int32
	h.c.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.c.KeepControl()
		leaves.Add(1)
		return nil, nil, false
	})
	start := time.Now()
	b.m.Close()
	if err := <-b.done; err != nil {
		t.Fatalf("b: Run: %v", err)
	}
	b.done <- nil // for the cleanup
	if leaves.Load() != 1 {
		t.Fatalf("%d LeaveGroup requests, want 1", leaves.Load())
	}
	h.waitEven("two members own 15 items each", []*running{a, c}, "a", "c")
	if took := time.Since(start); took >= testSession {
		t.Errorf("the items took %s to move after a LeaveGroup, not less than the session timeout %s", took, testSession)
	}
	for it, o := range h.rec.snapshot() {
		if before[it] != "b" && before[it] != o {
			t.Errorf("item %s moved from %s to %s; only b's items should move", it, before[it], o)
		}
	}
	h.rec.check(t)
}

// TestSilentMemberLosesItsItemsAfterTheSessionTimeout: a member that stops
// heartbeating without leaving (its context ends, as a crash) keeps its
// items in the group until the coordinator's session timeout drops it; then
// the others take them.
func TestSilentMemberLosesItsItemsAfterTheSessionTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 30)
	a, b, c := h.start("a"), h.start("b"), h.start("c")
	h.waitEven("three members own 10 items each", []*running{a, b, c}, "a", "b", "c")

	var leaves atomic.Int32
	h.c.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.c.KeepControl()
		leaves.Add(1)
		return nil, nil, false
	})
	start := time.Now()
	c.cancel()
	if err := <-c.done; err != nil {
		t.Fatalf("c: Run: %v", err)
	}
	c.done <- nil
	// Run revoked c's items locally before it returned.
	if n := h.rec.counts()["c"]; n != 0 {
		t.Fatalf("c still owns %d items after Run returned", n)
	}
	h.waitEven("two members own 15 items each", []*running{a, b}, "a", "b")
	if took := time.Since(start); took < testSession-2*testHeartbeat {
		t.Errorf("c's items moved %s after it went silent, before the session timeout %s", took, testSession)
	}
	if leaves.Load() != 0 {
		t.Errorf("%d LeaveGroup requests from a member whose context ended, want none", leaves.Load())
	}
	h.rec.check(t)
}

// TestCoordinatorErrorsAreRetried: joins refused with
// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (retried by franz-go, which
// finds the coordinator again) or UNKNOWN_SERVER_ERROR (retried by the
// member after a backoff), and heartbeats refused with NOT_COORDINATOR, are
// retried; a stable member keeps its items through them.
func TestCoordinatorErrorsAreRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 30)
	var joins atomic.Int32
	h.c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		n := joins.Add(1)
		if n > 6 {
			return nil, nil, false
		}
		h.c.KeepControl()
		resp := req.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
		switch n % 3 {
		case 0: // franz-go looks for the coordinator again and retries
			resp.ErrorCode = kerr.NotCoordinator.Code
		case 1:
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case 2: // not franz-go's to retry: the member backs off and retries
			resp.ErrorCode = kerr.UnknownServerError.Code
		}
		return resp, nil, true
	})
	a, b := h.start("a"), h.start("b")
	h.waitEven("two members own 15 items each", []*running{a, b}, "a", "b")
	if joins.Load() < 7 {
		t.Fatalf("%d joins, want the 6 refused ones and more", joins.Load())
	}

	revokedBefore := h.rec.revokedTotal()
	var refused atomic.Int32
	h.c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Add(1) > 6 {
			return nil, nil, false
		}
		h.c.KeepControl()
		resp := req.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil, true
	})
	waitFor(t, "six heartbeats refused and more answered", 10*time.Second, func() bool { return refused.Load() > 10 })
	if got := h.rec.revokedTotal(); got != revokedBefore {
		t.Errorf("%d items revoked while heartbeats were refused, want none", got-revokedBefore)
	}
	if c := h.rec.counts(); !evenly(c, 30, "a", "b") {
		t.Errorf("owners after the refused heartbeats: %v", c)
	}
	h.rec.check(t)
}

func (r *recorder) revokedTotal() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for _, n := range r.revoked {
		total += n
	}
	return total
}

// TestLostMembershipRevokesEverythingBeforeRejoining: a member whose
// heartbeat the coordinator answers UNKNOWN_MEMBER_ID revokes every item
// before it joins again, and the group settles again.
func TestLostMembershipRevokesEverythingBeforeRejoining(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 12)
	a, b := h.start("a"), h.start("b")
	h.waitEven("two members own 6 items each", []*running{a, b}, "a", "b")
	self := b.m.Members().Self

	var once atomic.Bool
	var revokedAtRejoin atomic.Int32
	h.c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hb := req.(*kmsg.HeartbeatRequest)
		h.c.KeepControl()
		if hb.MemberID != self || !once.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		resp := hb.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	h.c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		h.c.KeepControl()
		if once.Load() && req.(*kmsg.JoinGroupRequest).MemberID == "" {
			revokedAtRejoin.Store(int32(h.rec.counts()["b"]))
		}
		return nil, nil, false
	})
	waitFor(t, "b's heartbeat refused", 10*time.Second, once.Load)
	waitFor(t, "the group to settle again", 20*time.Second, func() bool {
		c := h.rec.counts()
		return h.rec.revokedTotal() >= 6 && evenly(c, 12, "a", "b") && h.settled(c, a, b)
	})
	if n := revokedAtRejoin.Load(); n != 0 {
		t.Errorf("b joined again owning %d items, want none", n)
	}
	h.rec.check(t)
}

// TestStaticMemberRestartKeepsItsItems: with static membership, a daemon
// that stops without leaving and starts again within the session timeout
// gets its own items back and the others keep theirs.
func TestStaticMemberRestartKeepsItsItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 20)
	a, b := h.start("a", WithStaticMembership()), h.start("b", WithStaticMembership())
	h.waitEven("two members own 10 items each", []*running{a, b}, "a", "b")
	before := h.rec.snapshot()
	revokedA := h.rec.revokedOf("a")

	b.cancel()
	if err := <-b.done; err != nil {
		t.Fatalf("b: Run: %v", err)
	}
	b.done <- nil
	b2 := h.start("b", WithStaticMembership())
	waitFor(t, "b to own its items again", 20*time.Second, func() bool {
		c := h.rec.counts()
		return evenly(c, 20, "a", "b") && h.settled(c, a, b2)
	})
	if !maps.Equal(h.rec.snapshot(), before) {
		t.Errorf("owners changed across b's restart:\nbefore %v\nafter  %v", before, h.rec.snapshot())
	}
	if got := h.rec.revokedOf("a"); got != revokedA {
		t.Errorf("a revoked %d items during b's restart", got-revokedA)
	}
	h.rec.check(t)
}

func (r *recorder) revokedOf(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revoked[name]
}

// TestGroupOfAnotherKindIsRefused: a group id a consumer group uses is not
// joined: Run fails with ErrGroupInUse, naming the group.
func TestGroupOfAnotherKindIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	raw, err := kgo.NewClient(kgo.SeedBrokers(h.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// A consumer joins the group (JoinGroup v4+: the second join with the
	// id the broker gave is the member's).
	join := func(memberID string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = h.group, memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60000, 60000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
		resp, err := req.RequestWith(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := join(""); resp.ErrorCode == kerr.MemberIDRequired.Code {
		join(resp.MemberID)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(h.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m, err := New(cl, h.group, Metadata{DaemonID: "a", Items: h.items}, recHandler{h.rec, "a"},
		WithSessionTimeout(testSession), WithHeartbeatInterval(testHeartbeat), WithRebalanceTimeout(testRebalance))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = m.Run(ctx)
	if !errors.Is(err, ErrGroupInUse) || !strings.Contains(err.Error(), h.group) {
		t.Fatalf("Run = %v, want ErrGroupInUse naming the group", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	h := recHandler{newRecorder(), "a"}
	for _, tc := range []struct {
		name  string
		group string
		self  Metadata
		opts  []Opt
		want  string
	}{
		{"no group", "", Metadata{DaemonID: "a"}, nil, "group id is empty"},
		{"no daemon id", "g", Metadata{}, nil, "daemon id is empty"},
		{"heartbeat not below session", "g", Metadata{DaemonID: "a"}, []Opt{WithHeartbeatInterval(10 * time.Second)}, "heartbeat interval"},
		{"rebalance below session", "g", Metadata{DaemonID: "a"}, []Opt{WithRebalanceTimeout(time.Second)}, "rebalance timeout"},
	} {
		if _, err := New(cl, tc.group, tc.self, h, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(cl, "g", Metadata{DaemonID: "a"}, h); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

// TestAssignmentSizeAt10000Items: the whole generation travels in every
// member's SyncGroup assignment; at 10,000 items over 3 members it stays far
// below the broker's default message.max.bytes (1 MiB), and so do the
// JoinGroup metadata of each member listing all the items.
func TestAssignmentSizeAt10000Items(t *testing.T) {
	t.Parallel()
	var items []string
	for topic := range 100 {
		for p := range 100 {
			items = append(items, fmt.Sprintf("mirror-eu-west-to-us-east/orders.v2.events-%03d/%d", topic, p))
		}
	}
	cands := candidates([]string{"member-a-0f3b1c", "member-b-7d2e4a", "member-c-9a8b7c"}, items, nil)
	target := Assign(cands, nil)
	ga := groupAssignment{V: wireVersion, Generation: 7, Leader: cands[0].ID}
	for _, c := range cands {
		ga.Members = append(ga.Members, MemberInfo{MemberID: c.ID, DaemonID: c.ID, Host: "host", AdminAddress: "host:8080", Items: target[c.ID]})
	}
	b, err := encode(ga)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := encode(joinMetadata{V: wireVersion, Metadata: Metadata{DaemonID: "d", Items: items}, Owned: target[cands[0].ID]})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10,000 items (%d bytes of names): assignment %d bytes, member metadata %d bytes", len(strings.Join(items, "")), len(b), len(meta))
	const limit = 256 << 10
	if len(b) > limit || len(meta) > limit {
		t.Errorf("assignment %d bytes, metadata %d bytes: want each under %d", len(b), len(meta), limit)
	}
	var back groupAssignment
	if err := decode(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Members[1].Items, target[cands[1].ID]) {
		t.Error("the assignment did not survive its encoding")
	}
	if err := decode(append([]byte{9}, b[1:]...), &back); err == nil {
		t.Error("an unknown encoding byte was accepted")
	}
}
