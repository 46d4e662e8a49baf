package mirror

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// clusterOf returns the mirror's status of one of its clusters.
func clusterOf(e *Engine, name string) (admin.ClusterStatus, bool) {
	for _, c := range mirrorStatus(e).Clusters {
		if c.Cluster == name {
			return c, true
		}
	}
	return admin.ClusterStatus{}, false
}

// TestEngineTracksAnUnreachableSource: when the source cluster goes away,
// kmirror_cluster_up{cluster=source} drops to 0, describe shows the source
// unreachable with a reason, and readiness fails once the grace
// (http.readyz.cluster.unreachable.ms) passed; when a cluster listens
// again on the same ports, all three recover. The destination stays up.
func TestEngineTracksAnUnreachableSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "orders", 2)
	f.produce(t, "orders", 50, "tx-a")
	cfg := f.config(t, "orders")
	e := startEngine(t, cfg, memstore.New())
	f.waitMirrored(t, e, "orders", 2)
	source := map[string]string{"cluster": "source", "mirror": "test"}
	destination := map[string]string{"cluster": "destination", "mirror": "test"}
	if up := metricValue(t, e, "kmirror_cluster_up", source); up != 1 {
		t.Fatalf("kmirror_cluster_up{source} = %v while mirroring, want 1", up)
	}
	cfg.ReadyzClusterUnreachable = 300 * time.Millisecond
	if why := e.NotReady(cfg, time.Now()); len(why) != 0 {
		t.Fatalf("not ready while every cluster answers: %q", why)
	}

	var ports []int
	for _, a := range f.src.ListenAddrs() {
		_, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		ports = append(ports, n)
	}
	f.src.Close()
	kfaketest.WaitFor(t, "kmirror_cluster_up{source} to drop to 0", func() (bool, string) {
		c, _ := clusterOf(e, "source")
		return metricValue(t, e, "kmirror_cluster_up", source) == 0, "source: " + c.LastError
	})
	c, ok := clusterOf(e, "source")
	if !ok || c.Reachable || c.LastError == "" || c.Since.IsZero() {
		t.Fatalf("describe's source: %+v (found %v), want unreachable with a reason and a time", c, ok)
	}
	if up := metricValue(t, e, "kmirror_cluster_up", destination); up != 1 {
		t.Errorf("kmirror_cluster_up{destination} = %v while only the source is down, want 1", up)
	}
	// The lag was 0 when the source went away; what was written since is
	// unknown, so the lag is too (-1), and a note says why.
	ms := mirrorStatus(e)
	for _, p := range ms.Partitions {
		if p.Lag != -1 {
			t.Errorf("orders[%d] lag %d while the source does not answer, want -1 (unknown)", p.Partition, p.Lag)
		}
	}
	if !slices.ContainsFunc(ms.Notes, func(n string) bool { return strings.Contains(n, "the source cluster has not answered since") }) {
		t.Errorf("no note says why the lag is unknown: %q", ms.Notes)
	}
	if _, found, err := e.opts.Metrics.Value("kmirror_max_lag", map[string]string{"mirror": "test"}); err != nil || found {
		t.Errorf("kmirror_max_lag is exported (found %v, %v) while no lag is known; want it absent", found, err)
	}
	kfaketest.WaitFor(t, "readiness to fail after the grace", func() (bool, string) {
		why := e.NotReady(cfg, time.Now())
		return len(why) == 1 && strings.Contains(why[0], "mirror test: the source cluster has been unreachable"), strings.Join(why, "; ")
	})
	cfg.ReadyzClusterUnreachable = 0 // off: never fails on a cluster
	if why := e.NotReady(cfg, time.Now()); len(why) != 0 {
		t.Fatalf("not ready with the check off: %q", why)
	}
	cfg.ReadyzClusterUnreachable = 300 * time.Millisecond

	back, err := kfake.NewCluster(kfake.NumBrokers(len(ports)), kfake.Ports(ports...))
	if err != nil {
		t.Skipf("the source's ports are not free again: %v", err)
	}
	t.Cleanup(back.Close)
	kfaketest.WaitFor(t, "kmirror_cluster_up{source} to be 1 again", func() (bool, string) {
		return metricValue(t, e, "kmirror_cluster_up", source) == 1, ""
	})
	if why := e.NotReady(cfg, time.Now()); len(why) != 0 {
		t.Fatalf("not ready once the source is back: %q", why)
	}
	if c, _ := clusterOf(e, "source"); !c.Reachable {
		t.Fatalf("describe's source once back: %+v", c)
	}
}

// TestEngineReadinessCountsFailedPartitions: with
// http.readyz.failed.partitions.max N, readiness fails while more than N
// partitions are FAILED, and the reason says how many.
func TestEngineReadinessCountsFailedPartitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "taken", 1)
	f.produce(t, "taken", 3, "tx-f")
	if _, err := kadm.NewClient(f.dstCl).CreateTopic(context.Background(), 1, 1, nil, "taken"); err != nil {
		t.Fatal(err)
	}
	if err := kfaketest.NewClient(t, f.dst, kgo.DefaultProduceTopic("taken")).ProduceSync(context.Background(), &kgo.Record{Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := f.config(t, "taken")
	e := startEngine(t, cfg, memstore.New())
	waitState(t, e, "taken", 0, "FAILED")
	for _, tc := range []struct {
		max  int
		fail bool
	}{{-1, false}, {1, false}, {0, true}} {
		cfg.ReadyzFailedPartitionsMax = tc.max
		why := e.NotReady(cfg, time.Now())
		if got := len(why) == 1 && strings.Contains(why[0], "1 partitions are FAILED"); got != tc.fail || (!tc.fail && len(why) != 0) {
			t.Errorf("http.readyz.failed.partitions.max %d: not ready because %q, want failing %v", tc.max, why, tc.fail)
		}
	}
}

// TestEngineTracksAnUnreachableDestination: when the destination goes
// away, kmirror_cluster_up{cluster=destination} drops to 0 and describe
// shows it unreachable with a reason, found by the requests the mirror
// makes anyway (its sync rounds and appends).
func TestEngineTracksAnUnreachableDestination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "orders", 1)
	f.produce(t, "orders", 20, "tx-a")
	e := startEngine(t, f.config(t, "orders"), memstore.New())
	f.waitMirrored(t, e, "orders", 1)
	destination := map[string]string{"cluster": "destination", "mirror": "test"}
	if up := metricValue(t, e, "kmirror_cluster_up", destination); up != 1 {
		t.Fatalf("kmirror_cluster_up{destination} = %v while mirroring, want 1", up)
	}
	f.dst.Close()
	kfaketest.WaitFor(t, "kmirror_cluster_up{destination} to drop to 0", func() (bool, string) {
		return metricValue(t, e, "kmirror_cluster_up", destination) == 0, ""
	})
	if c, ok := clusterOf(e, "destination"); !ok || c.Reachable || c.LastError == "" {
		t.Fatalf("describe's destination: %+v (found %v), want unreachable with a reason", c, ok)
	}
}
