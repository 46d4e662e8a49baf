package partition_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

const (
	mirror = "dc1-to-dc2"
	topic  = "orders.v2"
	part   = int32(3)
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
func (c *clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// recorder is an observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []partition.Event
}

func (r *recorder) observe(e partition.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) list() []partition.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]partition.Event(nil), r.events...)
}

// flakyStore fails Put while failPuts is set, and counts Puts.
type flakyStore struct {
	statestore.Store
	mu       sync.Mutex
	failPuts error
	puts     int
}

func (f *flakyStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	f.mu.Lock()
	err := f.failPuts
	f.puts++
	f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return f.Store.Put(ctx, key, value, expect)
}

func (f *flakyStore) setFail(err error) { f.mu.Lock(); f.failPuts = err; f.mu.Unlock() }

type env struct {
	store *flakyStore
	clock *clock
	rec   *recorder
	m     *partition.Machine
}

func newEnv(t *testing.T, opts ...partition.Option) *env {
	t.Helper()
	e := &env{store: &flakyStore{Store: memstore.New()}, clock: &clock{now: t0}, rec: &recorder{}}
	e.m = e.machine(t, opts...)
	return e
}

// machine returns another Machine on the same store, clock and observer
// (a second daemon, or the same daemon after a restart).
func (e *env) machine(t *testing.T, opts ...partition.Option) *partition.Machine {
	t.Helper()
	all := append([]partition.Option{
		partition.WithClock(e.clock.Now),
		partition.WithObserver(e.rec.observe),
		partition.WithBackoff(partition.Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, MaxAttempts: 5}),
	}, opts...)
	m, err := partition.NewMachine(e.store, all...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) create(t *testing.T) *partition.Partition {
	t.Helper()
	p, err := e.m.Create(t.Context(), mirror, topic, part, "topic found on source")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stored returns the raw stored entry of the test partition.
func (e *env) stored(t *testing.T) statestore.Entry {
	t.Helper()
	en, err := e.store.Get(t.Context(), statestore.PartitionKey(mirror, topic, part))
	if err != nil {
		t.Fatal(err)
	}
	return en
}

func (e *env) storedRecord(t *testing.T) partition.Record {
	t.Helper()
	var r partition.Record
	if err := json.Unmarshal(e.stored(t).Value, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// expectedSuccessors is docs/design/contract.md §2 written out independently of the
// package's table. FAILED is keyed by the state it failed in.
var expectedSuccessors = map[string][]partition.State{
	"PREPARING":             {partition.Mirroring, partition.Failed},
	"MIRRORING":             {partition.Paused, partition.Stopping, partition.Failed},
	"PAUSED":                {partition.Mirroring, partition.Stopping},
	"STOPPING":              {partition.Stopped},
	"STOPPED":               {partition.Preparing},
	"FAILED from PREPARING": {partition.Preparing, partition.Stopping},
	"FAILED from MIRRORING": {partition.Mirroring, partition.Stopping, partition.Preparing},
}

// reach brings a fresh PREPARING partition to the state named by the keys
// of expectedSuccessors, through allowed transitions only.
func reach(t *testing.T, p *partition.Partition, name string) {
	t.Helper()
	ctx := t.Context()
	tr := func(s partition.State) { must(t, p.Transition(ctx, s, "setup")) }
	switch name {
	case "PREPARING":
	case "MIRRORING":
		tr(partition.Mirroring)
	case "PAUSED":
		tr(partition.Mirroring)
		tr(partition.Paused)
	case "STOPPING":
		tr(partition.Mirroring)
		tr(partition.Stopping)
	case "STOPPED":
		tr(partition.Mirroring)
		tr(partition.Stopping)
		tr(partition.Stopped)
	case "FAILED from PREPARING":
		must(t, p.Fail(ctx, errors.New("setup failure")))
	case "FAILED from MIRRORING":
		tr(partition.Mirroring)
		must(t, p.Fail(ctx, errors.New("setup failure")))
	default:
		t.Fatalf("unknown setup %q", name)
	}
}

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	targets := append([]partition.State{partition.Unknown}, partition.States()...)
	for from, allowed := range expectedSuccessors {
		for _, to := range targets {
			ok := false
			for _, a := range allowed {
				ok = ok || a == to
			}
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				e := newEnv(t)
				p := e.create(t)
				reach(t, p, from)
				before := e.stored(t)
				fromState := p.State()
				events := len(e.rec.list())

				err := p.Transition(t.Context(), to, "test reason")

				if ok {
					if err != nil {
						t.Fatalf("allowed transition failed: %v", err)
					}
					if p.State() != to {
						t.Fatalf("in-memory state %v, want %v", p.State(), to)
					}
					got := e.storedRecord(t)
					if got.State != to || got.PreviousState != fromState || got.Reason != "test reason" {
						t.Fatalf("stored record state %v previous %v reason %q; want %v, %v, %q", got.State, got.PreviousState, got.Reason, to, fromState, "test reason")
					}
					if after := e.stored(t); after.Version <= before.Version || after.Version != p.Version() {
						t.Fatalf("stored version %d (was %d), partition says %d", after.Version, before.Version, p.Version())
					}
					if n := len(e.rec.list()) - events; n != 1 {
						t.Fatalf("observer called %d times, want 1", n)
					}
					return
				}
				if !errors.Is(err, partition.ErrInvalidTransition) {
					t.Fatalf("disallowed transition: err %v, want ErrInvalidTransition", err)
				}
				for _, want := range []string{mirror, topic, "partition 3", fromState.String() + " -> " + to.String()} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				if p.State() != fromState {
					t.Fatalf("in-memory state changed to %v", p.State())
				}
				if after := e.stored(t); after.Version != before.Version || !bytes.Equal(after.Value, before.Value) {
					t.Fatalf("a refused transition changed the stored record")
				}
				if n := len(e.rec.list()) - events; n != 0 {
					t.Fatalf("observer called %d times for a refused transition", n)
				}
			})
		}
	}
}

func TestTableFunctionsAgreeWithDesign(t *testing.T) {
	t.Parallel()
	for from, allowed := range expectedSuccessors {
		s, prev := partition.Failed, partition.Unknown
		switch from {
		case "FAILED from PREPARING":
			prev = partition.Preparing
		case "FAILED from MIRRORING":
			prev = partition.Mirroring
		default:
			var err error
			if s, err = partition.ParseState(from); err != nil {
				t.Fatal(err)
			}
		}
		got := partition.Successors(s, prev)
		if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(allowed)) {
			t.Errorf("Successors(%s) = %v, want %v", from, got, allowed)
		}
		if partition.CanFail(s) != (s != partition.Failed && contains(allowed, partition.Failed)) {
			t.Errorf("CanFail(%v) = %v", s, partition.CanFail(s))
		}
	}
	if partition.CanTransition(partition.Unknown, partition.Unknown, partition.Preparing) {
		t.Errorf("Unknown -> PREPARING must go through Create, not the table")
	}
}

func sorted(s []partition.State) []partition.State {
	out := append([]partition.State(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func contains(s []partition.State, x partition.State) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func TestCreateStartsPreparing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.create(t)
	if p.State() != partition.Preparing {
		t.Fatalf("new partition in %v", p.State())
	}
	r := e.storedRecord(t)
	if r.State != partition.Preparing || r.Mirror != mirror || r.Topic != topic || r.Partition != part ||
		r.LastMirroredOffset != -1 || r.Mode != partition.ModeUndecided || !r.UpdatedAt.Equal(t0) {
		t.Fatalf("stored record of a new partition: %+v", r)
	}
	if !strings.Contains(string(e.stored(t).Value), `"state":"PREPARING"`) {
		t.Errorf("record does not store the state by name: %s", e.stored(t).Value)
	}
	ev := e.rec.list()
	if len(ev) != 1 || ev[0].From != partition.Unknown || ev[0].To != partition.Preparing || ev[0].Reason != "topic found on source" {
		t.Fatalf("creation events: %+v", ev)
	}

	_, err := e.m.Create(t.Context(), mirror, topic, part, "again")
	if !errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("second Create: %v, want ErrVersionMismatch", err)
	}
	p2, created, err := e.m.LoadOrCreate(t.Context(), mirror, topic, part, "again")
	if err != nil || created || p2.State() != partition.Preparing {
		t.Fatalf("LoadOrCreate of an existing partition: %v, created=%v", err, created)
	}
	p3, created, err := e.m.LoadOrCreate(t.Context(), mirror, topic, part+1, "new")
	if err != nil || !created || p3.State() != partition.Preparing {
		t.Fatalf("LoadOrCreate of a new partition: %v, created=%v", err, created)
	}
	if len(e.rec.list()) != 2 {
		t.Fatalf("want one event per created partition, got %d", len(e.rec.list()))
	}
}

// CreateWith records the new partition with its first data in one write;
// an init that fails creates nothing; LoadOrCreateWith leaves an existing
// record as it is.
func TestCreateWithWritesTheFirstDataInTheSameWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	setID := func(d *partition.Data) error { d.SourceTopicID = "0123"; return nil }
	p, created, err := e.m.LoadOrCreateWith(t.Context(), mirror, topic, part, "topic found on source", setID)
	if err != nil || !created {
		t.Fatalf("LoadOrCreateWith: %v, created=%v", err, created)
	}
	if e.store.puts != 1 {
		t.Fatalf("%d writes to create a partition with its source topic id, want 1", e.store.puts)
	}
	if r := e.storedRecord(t); r.State != partition.Preparing || r.SourceTopicID != "0123" || p.Record().SourceTopicID != "0123" {
		t.Fatalf("stored record %+v, want PREPARING with source topic id 0123", r)
	}
	other := func(d *partition.Data) error { d.SourceTopicID = "4567"; return nil }
	if p2, created, err := e.m.LoadOrCreateWith(t.Context(), mirror, topic, part, "again", other); err != nil || created || p2.Record().SourceTopicID != "0123" {
		t.Fatalf("LoadOrCreateWith of an existing partition: %v, created=%v, id %q", err, created, p2.Record().SourceTopicID)
	}
	refuse := func(*partition.Data) error { return errors.New("no") }
	if _, err := e.m.CreateWith(t.Context(), mirror, topic, part+1, "new", refuse); err == nil {
		t.Fatal("CreateWith with a failing init succeeded")
	}
	if _, err := e.store.Get(t.Context(), statestore.PartitionKey(mirror, topic, part+1)); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("a failed CreateWith left a record: %v", err)
	}
}

func TestCreateRejectsBadNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		mirror, topic string
		part          int32
	}{{"", "t", 0}, {"m", "", 0}, {"m/x", "t", 0}, {"m", "a/b", 0}, {"m", "t", -1}} {
		if _, err := e.m.Create(t.Context(), c.mirror, c.topic, c.part, "x"); err == nil {
			t.Errorf("Create(%q, %q, %d) succeeded", c.mirror, c.topic, c.part)
		}
	}
	if all, _ := e.store.List(t.Context(), ""); len(all) != 0 {
		t.Fatalf("bad names left records: %v", all)
	}
}

func TestPersistBeforeEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	before := e.stored(t)
	beforeRec := p.Record()
	events := len(e.rec.list())

	boom := errors.New("disk full")
	e.store.setFail(boom)
	steps := map[string]func() error{
		"Transition": func() error { return p.Transition(t.Context(), partition.Paused, "pause") },
		"TransitionWith": func() error {
			return p.TransitionWith(t.Context(), partition.Stopping, "stop", func(d *partition.Data) error {
				d.LastMirroredOffset = 99
				return nil
			})
		},
		"Fail": func() error { return p.Fail(t.Context(), errors.New("fetch failed")) },
		"Update": func() error {
			return p.Update(t.Context(), func(d *partition.Data) error { d.Mode = partition.ModeMap; return nil })
		},
	}
	for name, step := range steps {
		err := step()
		if !errors.Is(err, boom) {
			t.Fatalf("%s with a failing store: %v, want it to wrap %v", name, err, boom)
		}
		if got := p.Record(); fmt.Sprint(got) != fmt.Sprint(beforeRec) || p.Version() != before.Version {
			t.Fatalf("%s changed the partition although the write failed: %+v", name, got)
		}
	}
	if after := e.stored(t); after.Version != before.Version {
		t.Fatalf("store changed")
	}
	if n := len(e.rec.list()) - events; n != 0 {
		t.Fatalf("observers told about %d transitions that did not persist", n)
	}

	e.store.setFail(nil)
	must(t, p.Transition(t.Context(), partition.Paused, "pause"))
	if p.State() != partition.Paused || e.storedRecord(t).State != partition.Paused {
		t.Fatalf("transition after the store recovered did not take effect")
	}
}

func TestCompareAndSetConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ours := e.create(t)
	theirs, err := e.machine(t).Load(t.Context(), mirror, topic, part)
	must(t, err)

	must(t, theirs.Transition(t.Context(), partition.Mirroring, "other daemon"))
	events := len(e.rec.list())

	err = ours.Transition(t.Context(), partition.Failed, "mine")
	if !errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("transition over someone else's write: %v, want ErrVersionMismatch", err)
	}
	if err := ours.Fail(t.Context(), errors.New("x")); !errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("Fail over someone else's write: %v, want ErrVersionMismatch", err)
	}
	if ours.State() != partition.Preparing {
		t.Fatalf("a conflicting write changed memory state to %v", ours.State())
	}
	if got := e.storedRecord(t); got.State != partition.Mirroring || got.Reason != "other daemon" {
		t.Fatalf("the other writer's record was overwritten: %+v", got)
	}
	if n := len(e.rec.list()) - events; n != 0 {
		t.Fatalf("observers told about %d conflicting transitions", n)
	}

	must(t, ours.Reload(t.Context()))
	if ours.State() != partition.Mirroring || ours.Version() != theirs.Version() {
		t.Fatalf("after Reload: %v v%d", ours.State(), ours.Version())
	}
	must(t, ours.Transition(t.Context(), partition.Paused, "after reload"))
}

func TestBackoffCap(t *testing.T) {
	t.Parallel()
	b := partition.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, MaxAttempts: 3}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Cap(i + 1); got != w*time.Millisecond {
			t.Errorf("Cap(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	huge := partition.Backoff{Initial: time.Nanosecond, Max: time.Duration(1<<63 - 1), MaxAttempts: 1}
	if got := huge.Cap(100000); got <= 0 {
		t.Errorf("Cap overflowed: %v", got)
	}
	for _, bad := range []partition.Backoff{
		{Initial: 0, Max: time.Second}, {Initial: time.Second, Max: time.Millisecond}, {Initial: 1, Max: 1, MaxAttempts: -1},
	} {
		if _, err := partition.NewMachine(memstore.New(), partition.WithBackoff(bad)); err == nil {
			t.Errorf("NewMachine accepted backoff %+v", bad)
		}
	}
}

// failRetryCycle makes the partition fail and retries it when due, n times,
// returning each retry delay that was scheduled.
func failRetryCycle(t *testing.T, e *env, p *partition.Partition, n int) []time.Duration {
	t.Helper()
	var delays []time.Duration
	for i := range n {
		now := e.clock.Now()
		must(t, p.Fail(t.Context(), fmt.Errorf("connection refused (%d)", i)))
		r := p.Record()
		if r.RetryAt.IsZero() {
			t.Fatalf("failure %d: no retry scheduled: %+v", i+1, r)
		}
		delays = append(delays, r.RetryAt.Sub(now))
		e.clock.Set(r.RetryAt)
		must(t, p.Retry(t.Context()))
	}
	return delays
}

func TestBackoffGrowsExponentially(t *testing.T) {
	t.Parallel()
	e := newEnv(t, partition.WithJitter(func(max time.Duration) time.Duration { return max }))
	p := e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	delays := failRetryCycle(t, e, p, 5)
	want := []time.Duration{100, 200, 400, 800, 1600}
	for i := range want {
		if delays[i] != want[i]*time.Millisecond {
			t.Fatalf("delays with jitter at its maximum: %v, want %v ms", delays, want)
		}
	}
	if r := p.Record(); r.State != partition.Mirroring || r.Attempts != 5 {
		t.Fatalf("after 5 retries: %v with %d attempts", r.State, r.Attempts)
	}
}

func TestBackoffFullJitterBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, partition.WithBackoff(partition.Backoff{Initial: time.Second, Max: time.Second, MaxAttempts: 1000}))
	p := e.create(t)
	delays := failRetryCycle(t, e, p, 300)
	lo, hi := delays[0], delays[0]
	for _, d := range delays {
		if d < 0 || d > time.Second {
			t.Fatalf("delay %v outside [0, 1s]", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	// Uniform on [0, 1s]: 300 draws all above 250ms or all below 750ms
	// happens with probability 2 * 0.75^300, about 1e-37.
	if lo > 250*time.Millisecond || hi < 750*time.Millisecond {
		t.Fatalf("delays do not spread over [0, 1s]: min %v max %v", lo, hi)
	}

	// A jitter function that misbehaves is clamped to [0, cap].
	for _, j := range []time.Duration{-time.Hour, time.Hour} {
		e := newEnv(t, partition.WithJitter(func(time.Duration) time.Duration { return j }))
		p := e.create(t)
		must(t, p.Fail(t.Context(), errors.New("x")))
		if d := p.Record().RetryAt.Sub(t0); d < 0 || d > 100*time.Millisecond {
			t.Fatalf("jitter %v gave delay %v", j, d)
		}
	}
}

func TestMaxAttemptsThenOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, partition.WithBackoff(partition.Backoff{Initial: time.Millisecond, Max: time.Second, MaxAttempts: 3}))
	p := e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	failRetryCycle(t, e, p, 3)

	must(t, p.Fail(t.Context(), errors.New("still refused")))
	r := p.Record()
	if !r.RetryAt.IsZero() || !r.NeedsOperator() || r.Attempts != 4 || !r.Retryable {
		t.Fatalf("after attempts ran out: %+v", r)
	}
	if p.DueForRetry(t0.Add(24 * time.Hour)) {
		t.Fatalf("DueForRetry true with no retry scheduled")
	}
	err := p.Retry(t.Context())
	if !errors.Is(err, partition.ErrNeedsOperator) || !strings.Contains(err.Error(), "still refused") {
		t.Fatalf("Retry after attempts ran out: %v", err)
	}
	if p.State() != partition.Failed {
		t.Fatalf("refused retry changed state to %v", p.State())
	}
	must(t, p.Reset(t.Context(), "operator: start-mirror-topics"))
	if r := p.Record(); r.State != partition.Preparing || r.Attempts != 0 || r.PreviousState != partition.Failed {
		t.Fatalf("after Reset: %+v", r)
	}
}

func TestZeroMaxAttemptsNeverRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, partition.WithBackoff(partition.Backoff{Initial: time.Millisecond, Max: time.Second, MaxAttempts: 0}))
	p := e.create(t)
	must(t, p.Fail(t.Context(), errors.New("x")))
	if !p.Record().NeedsOperator() {
		t.Fatalf("MaxAttempts 0 scheduled a retry: %+v", p.Record())
	}
	if err := p.Retry(t.Context()); !errors.Is(err, partition.ErrNeedsOperator) {
		t.Fatalf("Retry: %v", err)
	}
}

var errTopicRecreated = errors.New("source topic was recreated (new topic id)")

type classified struct{ retry bool }

func (c classified) Error() string   { return fmt.Sprintf("classified(%v)", c.retry) }
func (c classified) Retryable() bool { return c.retry }

func TestRetryableClassification(t *testing.T) {
	t.Parallel()
	nr := partition.NonRetryable(errTopicRecreated)
	cases := []struct {
		err  error
		want bool
	}{
		{errors.New("timeout"), true},
		{nr, false},
		{fmt.Errorf("partition 3: %w", nr), false},
		{partition.NonRetryable(fmt.Errorf("wrapped: %w", errTopicRecreated)), false},
		{classified{true}, true},
		{fmt.Errorf("x: %w", classified{false}), false},
		{partition.NonRetryable(classified{true}), false}, // the outermost classification decides
	}
	for _, c := range cases {
		if got := partition.IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", nr), errTopicRecreated) || nr.Error() != errTopicRecreated.Error() {
		t.Errorf("NonRetryable hides the error it wraps")
	}
	if partition.NonRetryable(nil) != nil {
		t.Errorf("NonRetryable(nil) != nil")
	}

	e := newEnv(t)
	p := e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	must(t, p.Fail(t.Context(), fmt.Errorf("check source topic id: %w", nr)))
	r := p.Record()
	if r.Retryable || !r.RetryAt.IsZero() || r.PreviousState != partition.Mirroring || !strings.Contains(r.Reason, "recreated") {
		t.Fatalf("non-retryable failure: %+v", r)
	}
	if err := p.Retry(t.Context()); !errors.Is(err, partition.ErrNeedsOperator) {
		t.Fatalf("Retry of a non-retryable failure: %v", err)
	}
	must(t, p.Transition(t.Context(), partition.Stopping, "operator: failover"))
	if r := p.Record(); r.State != partition.Stopping || r.Retryable || !r.RetryAt.IsZero() || r.Attempts != 0 {
		t.Fatalf("stopping a FAILED partition left failure fields: %+v", r)
	}
}

func TestRetryWhenDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, partition.WithJitter(func(max time.Duration) time.Duration { return max / 2 }))
	p := e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	must(t, p.Fail(t.Context(), errors.New("broker not available")))
	r := p.Record()
	if r.State != partition.Failed || r.PreviousState != partition.Mirroring || r.Attempts != 1 || !r.Retryable ||
		!r.RetryAt.Equal(t0.Add(50*time.Millisecond)) || r.Reason != "broker not available" {
		t.Fatalf("after Fail: %+v", r)
	}
	if p.DueForRetry(r.RetryAt.Add(-time.Nanosecond)) || !p.DueForRetry(r.RetryAt) {
		t.Fatalf("DueForRetry around %v wrong", r.RetryAt)
	}
	e.clock.Advance(49 * time.Millisecond)
	if err := p.Retry(t.Context()); !errors.Is(err, partition.ErrRetryNotDue) {
		t.Fatalf("early Retry: %v", err)
	}
	if p.State() != partition.Failed {
		t.Fatalf("early Retry changed state")
	}
	e.clock.Advance(time.Millisecond)
	must(t, p.Retry(t.Context()))
	r = p.Record()
	if r.State != partition.Mirroring || r.Attempts != 1 || r.Retryable || !r.RetryAt.IsZero() ||
		!strings.Contains(r.Reason, "automatic retry 1 of 5") || !strings.Contains(r.Reason, "broker not available") {
		t.Fatalf("after Retry: %+v", r)
	}
	// The next failure in a row backs off further.
	must(t, p.Fail(t.Context(), errors.New("broker not available")))
	if r := p.Record(); r.Attempts != 2 || !r.RetryAt.Equal(e.clock.Now().Add(100*time.Millisecond)) {
		t.Fatalf("second failure: attempts %d, retry at %v", r.Attempts, r.RetryAt)
	}
	if err := (func() error { must(t, p.Reset(t.Context(), "op")); return p.Retry(t.Context()) })(); !errors.Is(err, partition.ErrInvalidTransition) {
		t.Fatalf("Retry of a partition that is not FAILED: %v", err)
	}
}

func TestAttemptsClearedByProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, partition.WithJitter(func(time.Duration) time.Duration { return 0 }))
	p := e.create(t)
	must(t, p.Fail(t.Context(), errors.New("x")))
	must(t, p.Retry(t.Context()))
	if a := p.Record().Attempts; a != 1 {
		t.Fatalf("retry to PREPARING cleared attempts: %d", a)
	}
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	if a := p.Record().Attempts; a != 0 {
		t.Fatalf("progress PREPARING -> MIRRORING kept %d attempts", a)
	}

	must(t, p.Fail(t.Context(), errors.New("y")))
	must(t, p.Retry(t.Context()))
	v := p.Version()
	must(t, p.MarkHealthy(t.Context()))
	if r := p.Record(); r.Attempts != 0 || r.State != partition.Mirroring || p.Version() == v {
		t.Fatalf("MarkHealthy: %+v (version %d, was %d)", r, p.Version(), v)
	}
	if e.storedRecord(t).Attempts != 0 {
		t.Fatalf("MarkHealthy not persisted")
	}
	v = p.Version()
	must(t, p.MarkHealthy(t.Context()))
	if p.Version() != v {
		t.Fatalf("MarkHealthy with nothing to clear wrote the record")
	}
	must(t, p.Fail(t.Context(), errors.New("z")))
	if err := p.MarkHealthy(t.Context()); err == nil {
		t.Fatalf("MarkHealthy of a FAILED partition succeeded")
	}
}

func TestResetOnlyFromFailedOrStopped(t *testing.T) {
	t.Parallel()
	for name := range expectedSuccessors {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.create(t)
			reach(t, p, name)
			err := p.Reset(t.Context(), "operator")
			canReset := strings.HasPrefix(name, "FAILED") || name == "STOPPED"
			if canReset != (err == nil) {
				t.Fatalf("Reset from %s: %v", name, err)
			}
			if !canReset && !errors.Is(err, partition.ErrInvalidTransition) {
				t.Fatalf("Reset from %s: %v, want ErrInvalidTransition", name, err)
			}
			if canReset && p.State() != partition.Preparing {
				t.Fatalf("Reset from %s left %v", name, p.State())
			}
		})
	}
}

func TestRestartRestoresState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	type txn struct {
		TransactionalID string `json:"transactional_id"`
		ProducerID      int64  `json:"producer_id"`
	}
	must(t, p.Update(t.Context(), func(d *partition.Data) error {
		d.Mode = partition.ModeMap
		d.LastMirroredOffset = 1234
		return d.SetExtension("open_txns", []txn{{"kmirror-dc1-orders-3", 42}})
	}))
	must(t, p.Fail(t.Context(), errors.New("fetch: NOT_LEADER_OR_FOLLOWER")))
	want := p.Record()
	retryAt := want.RetryAt

	// A new daemon on the same store.
	restarted := e.machine(t)
	q, err := restarted.Load(t.Context(), mirror, topic, part)
	must(t, err)
	got := q.Record()
	if !got.RetryAt.Equal(want.RetryAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("times not restored: %v %v, want %v %v", got.RetryAt, got.UpdatedAt, want.RetryAt, want.UpdatedAt)
	}
	got.RetryAt, got.UpdatedAt, want.RetryAt, want.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("restored record\n%+v\nwant\n%+v", got, want)
	}
	var txns []txn
	if ok, err := got.Extension("open_txns", &txns); !ok || err != nil || len(txns) != 1 || txns[0].ProducerID != 42 {
		t.Fatalf("extension after restart: %v %v %+v", ok, err, txns)
	}
	if q.Version() != p.Version() {
		t.Fatalf("restored version %d, want %d", q.Version(), p.Version())
	}
	e.clock.Set(retryAt.Add(time.Hour))
	if !q.DueForRetry(e.clock.Now()) {
		t.Fatalf("restored partition not due for retry")
	}
	must(t, q.Retry(t.Context()))
	if q.State() != partition.Mirroring {
		t.Fatalf("retry after restart went to %v", q.State())
	}

	if _, err := restarted.Load(t.Context(), mirror, topic, 99); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("Load of a partition without a record: %v", err)
	}
}

func TestUpdateAndTransitionWith(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.create(t)
	events := len(e.rec.list())
	must(t, p.Update(t.Context(), func(d *partition.Data) error { d.Mode = partition.ModePreserve; return nil }))
	if e.storedRecord(t).Mode != partition.ModePreserve || p.State() != partition.Preparing {
		t.Fatalf("Update not persisted")
	}
	if len(e.rec.list()) != events {
		t.Fatalf("Update reported as a transition")
	}

	v := p.Version()
	if err := p.Update(t.Context(), func(d *partition.Data) error { d.Mode = "sideways"; return nil }); !errors.Is(err, partition.ErrInvalidRecord) {
		t.Fatalf("Update to an invalid mode: %v", err)
	}
	fnErr := errors.New("cannot compute")
	if err := p.Update(t.Context(), func(d *partition.Data) error { d.LastMirroredOffset = 5; return fnErr }); !errors.Is(err, fnErr) {
		t.Fatalf("Update whose function fails: %v", err)
	}
	if p.Version() != v || p.Record().Mode != partition.ModePreserve || p.Record().LastMirroredOffset != -1 {
		t.Fatalf("failed Updates changed the record: %+v", p.Record())
	}

	// Extensions handed out are copies.
	must(t, p.Update(t.Context(), func(d *partition.Data) error { return d.SetExtension("x", map[string]int{"a": 1}) }))
	r := p.Record()
	r.Extensions["x"][0] = '!'
	var x map[string]int
	if ok, err := p.Record().Extension("x", &x); !ok || err != nil || x["a"] != 1 {
		t.Fatalf("Record() shares its extensions with the caller: %v %v %v", ok, err, x)
	}

	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))
	must(t, p.Transition(t.Context(), partition.Stopping, "failover"))
	v = p.Version()
	must(t, p.TransitionWith(t.Context(), partition.Stopped, "last mirrored offset recorded", func(d *partition.Data) error {
		d.LastMirroredOffset = 5000
		return d.SetExtension("x", nil)
	}))
	if got := e.storedRecord(t); got.State != partition.Stopped || got.LastMirroredOffset != 5000 || got.Extensions != nil {
		t.Fatalf("TransitionWith stored %+v", got)
	}
	if e.stored(t).Version != v+1 {
		t.Fatalf("TransitionWith took more than one write")
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.create(t)
	if err := p.Delete(t.Context()); !errors.Is(err, partition.ErrInvalidTransition) {
		t.Fatalf("Delete of a PREPARING partition: %v", err)
	}
	reach(t, p, "STOPPED")
	must(t, p.Delete(t.Context()))
	if _, err := e.store.Get(t.Context(), p.Key()); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("record still stored: %v", err)
	}
	if err := p.Reset(t.Context(), "x"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("Reset after Delete: %v", err)
	}
}

func TestLoadMirror(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for _, c := range []struct {
		mirror, topic string
		p             int32
	}{{"a", "t", 10}, {"a", "t", 2}, {"a", "s", 0}, {"ab", "t", 0}, {"b", "t", 0}} {
		_, err := e.m.Create(ctx, c.mirror, c.topic, c.p, "x")
		must(t, err)
	}
	bad := statestore.PartitionKey("a", "u", 0)
	_, err := e.store.Put(ctx, bad, []byte(`{"schema":1,"mirror":"a","topic":"u","partition":0,"state":"SLEEPING"}`), statestore.Absent)
	must(t, err)

	ps, err := e.m.LoadMirror(ctx, "a")
	if !errors.Is(err, partition.ErrInvalidRecord) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("LoadMirror with a bad record: %v", err)
	}
	var got []string
	for _, p := range ps {
		r := p.Record()
		got = append(got, fmt.Sprintf("%s/%s/%d", r.Mirror, r.Topic, r.Partition))
	}
	if want := "[a/s/0 a/t/2 a/t/10]"; fmt.Sprint(got) != want {
		t.Fatalf("LoadMirror(a) = %v, want %v", got, want)
	}
}

func TestInvalidStoredRecords(t *testing.T) {
	t.Parallel()
	key := statestore.PartitionKey(mirror, topic, part)
	cases := map[string]string{
		"not json":         `{`,
		"newer schema":     `{"schema":3,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3,"state":"MIRRORING"}`,
		"unknown state":    `{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3,"state":"PAUSING"}`,
		"no state":         `{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3}`,
		"wrong key":        `{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":4,"state":"MIRRORING"}`,
		"bad prev":         `{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3,"state":"FAILED","previous_state":"PAUSED"}`,
		"bad mode":         `{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3,"state":"MIRRORING","mode":"x"}`,
		"retry not FAILED": `{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3,"state":"MIRRORING","retryable":true}`,
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.store.Put(t.Context(), key, []byte(value), statestore.Absent)
			must(t, err)
			if _, err := e.m.Load(t.Context(), mirror, topic, part); !errors.Is(err, partition.ErrInvalidRecord) {
				t.Fatalf("Load: %v, want ErrInvalidRecord", err)
			}
		})
	}
	// Unknown extensions written by a newer kmirror survive a write by this one.
	e := newEnv(t)
	_, err := e.store.Put(t.Context(), key, []byte(`{"schema":1,"mirror":"dc1-to-dc2","topic":"orders.v2","partition":3,"state":"MIRRORING","last_mirrored_offset":-1,"extensions":{"future":{"k":[1,2]}}}`), statestore.Absent)
	must(t, err)
	p, err := e.m.Load(t.Context(), mirror, topic, part)
	must(t, err)
	must(t, p.Transition(t.Context(), partition.Paused, "pause"))
	if got := string(e.storedRecord(t).Extensions["future"]); got != `{"k":[1,2]}` {
		t.Fatalf("unknown extension after a write: %q", got)
	}
}

func TestObserverOncePerTransitionInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var p *partition.Partition
	var reads sync.WaitGroup
	// The observer reads the partition: allowed, and must not deadlock.
	observerReads := func(ev partition.Event) {
		if p != nil && ev.Record.Topic == topic {
			reads.Add(1)
			_ = p.State()
			_ = p.Record()
			reads.Done()
		}
	}
	e.m = e.machine(t, partition.WithObserver(observerReads))
	p = e.create(t)
	must(t, p.Transition(t.Context(), partition.Mirroring, "aligned"))

	// Two racing transitions out of MIRRORING, each invalid after the
	// other: exactly one happens.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, to := range []partition.State{partition.Paused, partition.Failed} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Transition(t.Context(), to, "race") }()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("racing transitions: %v, %v; want exactly one to succeed", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, partition.ErrInvalidTransition) {
			t.Fatalf("losing transition: %v, want ErrInvalidTransition", err)
		}
	}
	if p.State() == partition.Failed {
		must(t, p.Transition(t.Context(), partition.Mirroring, "back to where it failed"))
		must(t, p.Transition(t.Context(), partition.Paused, "pause"))
	}

	// Many goroutines toggle PAUSED <-> MIRRORING; every success is one
	// event, and the events chain.
	const workers, tries = 8, 40
	var mu sync.Mutex
	successes := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				to := partition.Mirroring
				if p.State() == partition.Mirroring {
					to = partition.Paused
				}
				err := p.Transition(t.Context(), to, "toggle")
				if err == nil {
					mu.Lock()
					successes++
					mu.Unlock()
				} else if !errors.Is(err, partition.ErrInvalidTransition) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	reads.Wait()

	evs := e.rec.list()
	toggles := 0
	for i, ev := range evs {
		if ev.Reason == "toggle" {
			toggles++
		}
		if i > 0 && ev.From != evs[i-1].To {
			t.Fatalf("event %d goes %v -> %v but the previous one ended in %v", i, ev.From, ev.To, evs[i-1].To)
		}
		if ev.Record.State != ev.To {
			t.Fatalf("event %d: record state %v, To %v", i, ev.Record.State, ev.To)
		}
	}
	if toggles != successes || successes == 0 {
		t.Fatalf("%d successful toggles but %d toggle events", successes, toggles)
	}
	if last := evs[len(evs)-1]; last.To != p.State() {
		t.Fatalf("last event ends in %v, partition is %v", last.To, p.State())
	}
}

func TestStateText(t *testing.T) {
	t.Parallel()
	for _, s := range partition.States() {
		b, err := s.MarshalText()
		must(t, err)
		var back partition.State
		must(t, back.UnmarshalText(b))
		if back != s || string(b) != s.String() {
			t.Errorf("%v round-trips as %q -> %v", s, b, back)
		}
		if p, err := partition.ParseState(strings.ToLower(s.String())); err != nil || p != s {
			t.Errorf("ParseState(lower %v) = %v, %v", s, p, err)
		}
	}
	if _, err := partition.ParseState("PAUSING"); err == nil {
		t.Errorf("ParseState accepted PAUSING")
	}
	if _, err := partition.State(42).MarshalText(); err == nil {
		t.Errorf("MarshalText of an invalid state succeeded")
	}
}
