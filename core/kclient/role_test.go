package kclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
)

// TestClusterOptsBoundReadsPerRole: a source client's reads are bounded by
// replica.socket.timeout.ms (its connections carry long polls), a
// destination client's by request.timeout.ms; both retry after
// reconnect.backoff.ms, doubled per try up to 10 s.
func TestClusterOptsBoundReadsPerRole(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, `
request.timeout.ms: 12000
replica.socket.timeout.ms: 45000
reconnect.backoff.ms: 100
destination:
  bootstrap.servers: dst:9092
state:
  dir: /unused
mirrors:
  - name: dc1
    bootstrap.servers: src:9092
`, nil, nil)
	for _, tc := range []struct {
		role string
		cl   *config.Cluster
		want time.Duration
	}{
		{kclient.RoleSource, &cfg.Mirrors[0].Source, 45 * time.Second},
		{kclient.RoleDestination, &cfg.Destination, 12 * time.Second},
	} {
		opts, err := kclient.ClusterOpts(context.Background(), cfg, tc.cl, tc.role, "", nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.role, err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.role, err)
		}
		if got := cl.OptValue(kgo.RequestTimeoutOverhead); got != tc.want {
			t.Errorf("%s: request timeout overhead %v, want %v", tc.role, got, tc.want)
		}
		backoff := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)
		if got := []time.Duration{backoff(0), backoff(1), backoff(3), backoff(20)}; got[0] != 100*time.Millisecond || got[1] != 200*time.Millisecond || got[2] != 800*time.Millisecond || got[3] != 10*time.Second {
			t.Errorf("%s: retry backoffs %v, want 100ms 200ms 800ms 10s", tc.role, got)
		}
		cl.Close()
	}
}

// TestClientIDDefaultsToKmirrorAndTheRole: client.id wins when set.
func TestClientIDDefaultsToKmirrorAndTheRole(t *testing.T) {
	t.Parallel()
	if got := kclient.ClientID("", "source-dc1"); got != "kmirror-source-dc1" {
		t.Errorf("ClientID without client.id = %q, want kmirror-source-dc1", got)
	}
	if got := kclient.ClientID("mine", "source-dc1"); got != "mine" {
		t.Errorf("ClientID with client.id = %q, want mine", got)
	}
}
