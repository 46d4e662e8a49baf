package mirror

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/daemon"
	"github.com/kmirror/kmirror/core/kclient/kclienttest"
	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestReadyzFollowsAnUnreachableSource: a daemon running the engine with
// http.readyz.cluster.unreachable.ms set answers /readyz 503, naming the
// cluster, once the source has been unreachable for longer than that, with
// kmirror_ready 0; and 200 again, kmirror_ready 1, once the source is back.
func TestReadyzFollowsAnUnreachableSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "orders", 1)
	f.produce(t, "orders", 20, "tx-a")
	cfg := f.config(t, "orders")
	cfg.HTTPAddress = "127.0.0.1:0"
	cfg.ReadyzClusterUnreachable = 300 * time.Millisecond
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	logger, err := logging.New(io.Discard, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Store: memstore.New(), Logger: logger, Metrics: mp, Credentials: kclienttest.KeysCredentials})
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{Load: func() (*config.Config, error) { return cfg, nil }, Logger: logger, Metrics: mp, Components: []daemon.Component{e}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the daemon did not stop")
		}
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + d.Addr() + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	kfaketest.WaitFor(t, "/readyz to answer 200 while mirroring", func() (bool, string) {
		if d.Addr() == "" {
			return false, "not listening"
		}
		code, body := get("/readyz")
		return code == http.StatusOK, body
	})
	f.waitMirrored(t, e, "orders", 1)

	var ports []int
	for _, a := range f.src.ListenAddrs() {
		_, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		ports = append(ports, n)
	}
	f.src.Close()
	kfaketest.WaitFor(t, "/readyz to answer 503 naming the source", func() (bool, string) {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "mirror test: the source cluster has been unreachable"), body
	})
	if _, m := get("/metrics"); !strings.Contains(m, "kmirror_ready 0") || !strings.Contains(m, `kmirror_cluster_up{cluster="source",mirror="test"} 0`) {
		t.Fatalf("kmirror_ready or kmirror_cluster_up not 0 while the source is down:\n%s", m)
	}
	back, err := kfake.NewCluster(kfake.NumBrokers(len(ports)), kfake.Ports(ports...))
	if err != nil {
		t.Skipf("the source's ports are not free again: %v", err)
	}
	t.Cleanup(back.Close)
	kfaketest.WaitFor(t, "/readyz to answer 200 again", func() (bool, string) {
		code, body := get("/readyz")
		return code == http.StatusOK, body
	})
	if _, m := get("/metrics"); !strings.Contains(m, "kmirror_ready 1") {
		t.Fatalf("kmirror_ready not 1 once the source is back:\n%s", m)
	}
}
