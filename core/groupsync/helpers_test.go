package groupsync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/filter"
)

const (
	topic    = "orders"
	unmirror = "other"
)

// seededCluster starts an in-process cluster seeded with the mirrored topic
// and one topic that is not mirrored.
func seededCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	return kfaketest.NewCluster(t, append([]kfake.Opt{kfake.SeedTopics(2, topic, unmirror)}, opts...)...)
}

// fakeMirrored mirrors every partition of topic up to end, translating by
// adding shift.
type fakeMirrored struct {
	mu       sync.Mutex
	end      int64
	shift    int64
	failPart int32 // partition whose Translate fails; -1 for none
}

func (m *fakeMirrored) End(tp string, _ int32) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.end, tp == topic
}

func (m *fakeMirrored) Translate(tp string, p int32, off int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == m.failPart {
		return 0, fmt.Errorf("no mapping for %s/%d offset %d", tp, p, off)
	}
	return off + m.shift, nil
}

func (m *fakeMirrored) setEnd(end int64) {
	m.mu.Lock()
	m.end = end
	m.mu.Unlock()
}

type env struct {
	src, dst       *kfake.Cluster
	srcAdm, dstAdm *kadm.Client
	mirrored       *fakeMirrored
	metrics        *metrics.Provider
	syncer         *Syncer
}

func newEnv(t *testing.T, include func(string) bool, dstOpts ...kfake.Opt) *env {
	t.Helper()
	e := &env{src: seededCluster(t), dst: seededCluster(t, dstOpts...), mirrored: &fakeMirrored{end: 1000, failPart: -1}}
	e.srcAdm, e.dstAdm = kfaketest.NewAdmin(t, e.src), kfaketest.NewAdmin(t, e.dst)
	p, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = p
	e.syncer = e.newSyncer(t, include)
	return e
}

func (e *env) newSyncer(t *testing.T, include func(string) bool) *Syncer {
	t.Helper()
	var f filter.Filter
	if include != nil {
		f = includeFilter(include)
	}
	return e.newSyncerWith(t, f)
}

func (e *env) newSyncerWith(t *testing.T, f filter.Filter) *Syncer {
	t.Helper()
	s, err := New(Options{
		Mirror: "m1", Source: e.srcAdm, Destination: e.dstAdm, Filter: f, Mirrored: e.mirrored,
		Meter: e.metrics.Meter("test"),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// includeFilter is a group filter keeping the groups include accepts.
func includeFilter(include func(string) bool) filter.Filter {
	return filter.Funcs{Name: "test", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
		var out []filter.Group
		for _, g := range in {
			if include(g.ID) {
				out = append(out, g)
			}
		}
		return out, nil
	}}
}

// commit commits offsets (partition → offset) of topic for group on a cluster.
func commit(t *testing.T, adm *kadm.Client, group, meta string, offs map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for p, o := range offs {
		addOffset(os, kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1, Metadata: meta})
	}
	if err := adm.CommitAllOffsets(kfaketest.Context(t), group, os); err != nil {
		t.Fatalf("committing %v for group %s: %v", offs, group, err)
	}
}

// committed returns the committed offset of topic/p for group, -1 if none.
func committed(t *testing.T, adm *kadm.Client, group string, p int32) (int64, string) {
	t.Helper()
	resp, err := adm.FetchOffsets(kfaketest.Context(t), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return -1, ""
	}
	if err != nil {
		t.Fatalf("fetching offsets of %s: %v", group, err)
	}
	o, ok := resp.Lookup(topic, p)
	if !ok {
		return -1, ""
	}
	return o.At, o.Metadata
}

func (e *env) sync(t *testing.T) Report {
	t.Helper()
	rep, err := e.syncer.Sync(kfaketest.Context(t))
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return rep
}

func find(list []GroupReport, group string) (GroupReport, bool) {
	for _, g := range list {
		if g.Group == group {
			return g, true
		}
	}
	return GroupReport{}, false
}

func mustFind(t *testing.T, list []GroupReport, group string) GroupReport {
	t.Helper()
	g, ok := find(list, group)
	if !ok {
		t.Fatalf("group %s missing from report %+v", group, list)
	}
	return g
}
