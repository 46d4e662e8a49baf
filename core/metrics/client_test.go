package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// newKfake starts a kfake cluster, closed when the test ends.
func newKfake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A client's connections and requests show on /metrics under its cluster
// and mirror: a dial, the bytes written and read, the requests by API with
// their latency, the connection open until the client closes.
func TestClientMetricsCountConnectionsAndRequests(t *testing.T) {
	t.Parallel()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Client("source", "dc1")
	if err != nil {
		t.Fatal(err)
	}
	cluster := newKfake(t, kfake.SeedTopics(1, "orders"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), c.Hook())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	src := map[string]string{"cluster": "source", "mirror": "dc1"}
	if v := value(t, p, "kmirror_client_dials_total", map[string]string{"cluster": "source", "result": "ok"}); v < 1 {
		t.Errorf("kmirror_client_dials_total{result=ok} = %v, want at least 1", v)
	}
	if v := value(t, p, "kmirror_client_connections", src); v < 1 {
		t.Errorf("kmirror_client_connections = %v while the client is open, want at least 1", v)
	}
	for _, name := range []string{"kmirror_client_incoming_bytes_total", "kmirror_client_outgoing_bytes_total"} {
		if v := value(t, p, name, src); v <= 0 {
			t.Errorf("%s = %v after 5 produce requests, want > 0", name, v)
		}
	}
	produce := map[string]string{"cluster": "source", "mirror": "dc1", "api": "Produce"}
	if v := value(t, p, "kmirror_client_requests_total", map[string]string{"api": "Produce", "result": "ok"}); v != 5 {
		t.Errorf("kmirror_client_requests_total{api=Produce,result=ok} = %v, want 5", v)
	}
	if n, _ := histogram(t, p, "kmirror_client_request_latency_seconds", produce); n != 5 {
		t.Errorf("kmirror_client_request_latency_seconds{api=Produce}: %d samples, want 5", n)
	}
	if v := value(t, p, "kmirror_client_authentication_failures_total", src); v != 0 {
		t.Errorf("kmirror_client_authentication_failures_total = %v without SASL, want 0", v)
	}
	cl.Close()
	if v := value(t, p, "kmirror_client_connections", src); v != 0 {
		t.Errorf("kmirror_client_connections = %v once the client closed, want 0", v)
	}
	if v := value(t, p, "kmirror_client_disconnects_total", src); v < 1 {
		t.Errorf("kmirror_client_disconnects_total = %v once the client closed, want at least 1", v)
	}
	if again, _ := p.Client("source", "dc1"); again != c {
		t.Error("Provider.Client returned a new Client for the same cluster and mirror: its counters would start again")
	}
}

// A connection whose SASL authentication the broker refuses (a wrong
// password) is a failed dial and an authentication failure; the right
// password authenticates without one. (That Kafka's refusal, an error
// code, counts too is TestAuthFailureKnowsKafkasRefusals.)
func TestClientMetricsCountAuthenticationFailures(t *testing.T) {
	t.Parallel()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cluster := newKfake(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "kmirror", "right"))
	dial := func(cl *Client, pass string) error {
		k, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), cl.Hook(),
			kgo.SASL(scram.Auth{User: "kmirror", Pass: pass}.AsSha256Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return k.Ping(ctx)
	}
	bad, err := p.Client("source", "bad")
	if err != nil {
		t.Fatal(err)
	}
	// kfake closes the connection on a wrong password (Kafka answers
	// SASL_AUTHENTICATION_FAILED first): both count.
	if err := dial(bad, "wrong"); err == nil {
		t.Fatal("ping with a wrong password succeeded")
	}
	labels := map[string]string{"cluster": "source", "mirror": "bad"}
	if v := value(t, p, "kmirror_client_authentication_failures_total", labels); v < 1 {
		t.Errorf("kmirror_client_authentication_failures_total = %v after a refused password, want at least 1", v)
	}
	if v := value(t, p, "kmirror_client_dials_total", map[string]string{"mirror": "bad", "result": "error"}); v < 1 {
		t.Errorf("kmirror_client_dials_total{result=error} = %v after a refused password, want at least 1", v)
	}
	if v := value(t, p, "kmirror_client_connections", labels); v != 0 {
		t.Errorf("kmirror_client_connections = %v: a connection that failed authentication counted open", v)
	}

	good, err := p.Client("source", "good")
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(good, "right"); err != nil {
		t.Fatalf("ping with the right password: %v", err)
	}
	if v := value(t, p, "kmirror_client_authentication_failures_total", map[string]string{"mirror": "good"}); v != 0 {
		t.Errorf("kmirror_client_authentication_failures_total = %v with the right password, want 0", v)
	}
	if v := value(t, p, "kmirror_client_requests_total", map[string]string{"mirror": "good", "api": "SASLAuthenticate", "result": "ok"}); v < 1 {
		t.Errorf("kmirror_client_requests_total{api=SASLAuthenticate} = %v, want at least 1", v)
	}
}

// A dial to an address nothing listens on is a failed dial, not an
// authentication failure.
func TestClientMetricsCountFailedDials(t *testing.T) {
	t.Parallel()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Client("destination", "")
	if err != nil {
		t.Fatal(err)
	}
	cluster := newKfake(t)
	addr := cluster.ListenAddrs()[0]
	cluster.Close() // nothing listens there any more
	k, err := kgo.NewClient(kgo.SeedBrokers(addr), c.Hook(), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Ping(ctx); err == nil {
		t.Fatal("ping of a closed cluster succeeded")
	}
	dst := map[string]string{"cluster": "destination", "mirror": ""}
	if v := value(t, p, "kmirror_client_dials_total", map[string]string{"cluster": "destination", "result": "error"}); v < 1 {
		t.Errorf("kmirror_client_dials_total{result=error} = %v after a refused dial, want at least 1", v)
	}
	if v := value(t, p, "kmirror_client_authentication_failures_total", dst); v != 0 {
		t.Errorf("kmirror_client_authentication_failures_total = %v after a refused dial, want 0", v)
	}
}

// Kafka refuses credentials with an error code, which franz-go returns
// from the connection's set-up, wrapped or not.
func TestAuthFailureKnowsKafkasRefusals(t *testing.T) {
	t.Parallel()
	for _, err := range []error{kerr.SaslAuthenticationFailed, fmt.Errorf("bad password: %w", kerr.SaslAuthenticationFailed), kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism} {
		if !authFailure(err) {
			t.Errorf("authFailure(%v) = false, want true", err)
		}
	}
	for _, err := range []error{io.EOF, kerr.NotLeaderForPartition, errors.New("dial tcp: connection refused")} {
		if authFailure(err) {
			t.Errorf("authFailure(%v) = true, want false", err)
		}
	}
}
