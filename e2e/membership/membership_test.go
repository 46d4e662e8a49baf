package membership

import (
	"context"
	"fmt"
	"log"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/membership"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// kafka is the one-broker cluster of every test, started by TestMain with a
// low group.min.session.timeout.ms so that a silent member is dropped
// quickly.
var kafka *kafkatest.Cluster

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	kafka, err = kafkatest.Start(ctx, kafkatest.Options{
		Name:         "membership",
		BrokerConfig: map[string]string{"group.min.session.timeout.ms": "500"},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "membership: starting the cluster: %v\n", err)
		return 1
	}
	defer func() {
		if err := kafka.Close(); err != nil {
			log.Printf("membership: %v", err)
		}
	}()
	return m.Run()
}

const (
	session   = 3 * time.Second
	heartbeat = 300 * time.Millisecond
	rebalance = 10 * time.Second
)

// owners is the handlers' shared record: every callback checks, under the
// lock, that no item has two owners at once.
type owners struct {
	mu         sync.Mutex
	owner      map[string]string
	violations []string
}

type handler struct {
	o    *owners
	name string
}

func (h handler) OnAssigned(gen int32, items []string) {
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	for _, it := range items {
		if prev, ok := h.o.owner[it]; ok {
			h.o.violations = append(h.o.violations, fmt.Sprintf("generation %d: %s got %s, which %s still owns", gen, h.name, it, prev))
		}
		h.o.owner[it] = h.name
	}
}

func (h handler) OnRevoked(gen int32, items []string) {
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	for _, it := range items {
		if h.o.owner[it] != h.name {
			h.o.violations = append(h.o.violations, fmt.Sprintf("generation %d: %s revoked %s, which %q owns", gen, h.name, it, h.o.owner[it]))
		}
		delete(h.o.owner, it)
	}
}

func (o *owners) snapshot() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.owner)
}

type daemon struct {
	m      *membership.Member
	cancel context.CancelFunc
	done   chan error
}

// TestDaemonsShareItemsThroughTheGroup: three members split 30 items
// evenly; a fourth takes its share and only its share moves; one that
// closes hands its items over at once; one that goes silent loses them
// after the session timeout; no item ever has two owners.
func TestDaemonsShareItemsThroughTheGroup(t *testing.T) {
	items := make([]string, 30)
	for i := range items {
		items[i] = fmt.Sprintf("mirror/orders/%d", i)
	}
	o := &owners{owner: map[string]string{}}
	group := "kmirror-e2e-membership"
	start := func(name string) *daemon {
		cl, err := kafka.NewClient(kafka.AdminIdentity(), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		m, err := membership.New(cl, group, membership.Metadata{DaemonID: name, Items: items}, handler{o, name},
			membership.WithSessionTimeout(session), membership.WithHeartbeatInterval(heartbeat), membership.WithRebalanceTimeout(rebalance))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		d := &daemon{m: m, cancel: cancel, done: make(chan error, 1)}
		go func() { d.done <- m.Run(ctx) }()
		t.Cleanup(func() {
			m.Close()
			cancel()
			if err := <-d.done; err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
		})
		return d
	}
	// settled waits until the owners are want's counts and every running
	// member's view agrees.
	settled := func(what string, want map[string]int, ds ...*daemon) map[string]string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			snap := o.snapshot()
			counts := map[string]int{}
			for _, who := range snap {
				counts[who]++
			}
			ok := len(snap) == len(items) && maps.Equal(counts, want)
			for _, d := range ds {
				v := d.m.Members()
				ok = ok && len(v.Members) == len(ds) && len(v.Moving) == 0
				for _, it := range items {
					mi, found := v.Owner(it)
					ok = ok && found && mi.DaemonID == snap[it]
				}
			}
			if ok {
				return snap
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s: owners %v", what, counts)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	a, b, c := start("a"), start("b"), start("c")
	before := settled("three members own 10 each", map[string]int{"a": 10, "b": 10, "c": 10}, a, b, c)

	d := start("d")
	deadline := time.Now().Add(60 * time.Second)
	var after map[string]string
	for {
		snap := o.snapshot()
		counts := map[string]int{}
		for _, who := range snap {
			counts[who]++
		}
		if len(snap) == 30 && counts["d"] >= 7 && counts["a"] <= 8 && counts["b"] <= 8 && counts["c"] <= 8 && len(d.m.Members().Moving) == 0 {
			after = snap
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the fourth member's share: %v", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for it, who := range after {
		if before[it] != who && who != "d" {
			t.Errorf("item %s moved from %s to %s, not to the newcomer", it, before[it], who)
		}
	}

	// b closes: its items move at once, and only them.
	snap := o.snapshot()
	closed := time.Now()
	b.m.Close()
	final := settled("three members own 10 each after b closed", map[string]int{"a": 10, "c": 10, "d": 10}, a, c, d)
	if took := time.Since(closed); took >= session {
		t.Errorf("b's items took %s to move after it closed", took)
	}
	for it, who := range final {
		if snap[it] != "b" && snap[it] != who {
			t.Errorf("item %s moved from %s to %s; only b's items should move", it, snap[it], who)
		}
	}

	// c goes silent (no LeaveGroup): its items move after the session
	// timeout.
	silent := time.Now()
	c.cancel()
	settled("two members own 15 each after c went silent", map[string]int{"a": 15, "d": 15}, a, d)
	if took := time.Since(silent); took < session-2*heartbeat {
		t.Errorf("c's items moved %s after it went silent, before the session timeout %s", took, session)
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range o.violations {
		t.Error(v)
	}
}
