package kclient

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// syncBuffer is a bytes.Buffer safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHealthFollowsTheCluster: a client's Health turns unreachable, with a
// reason, when its kfake cluster is closed, and reachable again when a
// cluster listens on the same port.
func TestHealthFollowsTheCluster(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	addr := c.ListenAddrs()[0]
	_, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	var logs syncBuffer
	h := NewHealth(hclog.New(&hclog.LoggerOptions{Output: &logs}), time.Hour)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), h.Hook(), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if s := h.Snapshot(); !s.Reachable || s.LastError != "" {
		t.Fatalf("after a ping: %+v, want reachable without error", s)
	}
	c.Close()
	waitFor(t, "the cluster is unreachable", func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = cl.Ping(pctx)
		return !h.Snapshot().Reachable
	})
	down := h.Snapshot()
	if down.LastError == "" || down.Since.IsZero() {
		t.Fatalf("unreachable without a reason or time: %+v", down)
	}
	if !strings.Contains(logs.String(), "cluster unreachable") {
		t.Fatalf("no log line on the transition:\n%s", logs.String())
	}
	c2, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Skipf("port %d not free again: %v", port, err)
	}
	defer c2.Close()
	waitFor(t, "the cluster is reachable again", func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = cl.Ping(pctx)
		return h.Snapshot().Reachable
	})
	if s := h.Snapshot(); !s.Since.After(down.Since) {
		t.Fatalf("since did not move on recovery: %+v, down %+v", s, down)
	}
	if !strings.Contains(logs.String(), "cluster reachable again") {
		t.Fatalf("no log line on recovery:\n%s", logs.String())
	}
}

// TestHealthLogsRepeatsAtABoundedRate: the first failure is logged at
// once; later ones are counted and logged at most once per interval with
// the count; the recovery is logged with the total.
func TestHealthLogsRepeatsAtABoundedRate(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := NewHealth(hclog.New(&hclog.LoggerOptions{Output: &logs}), 10*time.Second)
	now := time.Unix(1000, 0)
	h.now = func() time.Time { return now }
	fail := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	h.observe(1, nil)
	h.observe(1, fail) // logged at once
	for range 50 {     // 5 s: counted, not logged
		now = now.Add(100 * time.Millisecond)
		h.observe(1, fail)
	}
	if n := strings.Count(logs.String(), "unreachable"); n != 1 {
		t.Fatalf("%d lines in the first interval, want 1:\n%s", n, logs.String())
	}
	now = now.Add(5 * time.Second)
	h.observe(1, fail) // the 51st repeat, 10 s after the first line
	if !strings.Contains(logs.String(), "cluster still unreachable") || !strings.Contains(logs.String(), "repeated=51") {
		t.Fatalf("no line with the count after the interval:\n%s", logs.String())
	}
	h.observe(1, fail)
	if n := strings.Count(logs.String(), "still unreachable"); n != 1 {
		t.Fatalf("%d repeat lines, want 1:\n%s", n, logs.String())
	}
	h.observe(1, nil)
	if !strings.Contains(logs.String(), "cluster reachable again") || !strings.Contains(logs.String(), "failures=53") {
		t.Fatalf("no recovery line with the count:\n%s", logs.String())
	}
	// Canceled requests and a closed client say nothing about the cluster.
	h.observe(1, context.Canceled)
	h.observe(1, net.ErrClosed)
	if !h.Snapshot().Reachable {
		t.Fatal("a canceled request made the cluster unreachable")
	}
}

// TestHealthAnyBrokerKeepsTheClusterReachable: one broker down does not
// make the cluster unreachable; an idle broker is forgotten.
func TestHealthAnyBrokerKeepsTheClusterReachable(t *testing.T) {
	t.Parallel()
	h := NewHealth(hclog.NewNullLogger(), 0)
	h.observe(1, nil)
	h.observe(2, errors.New("refused"))
	if !h.Snapshot().Reachable {
		t.Fatal("unreachable while broker 1 answers")
	}
	h.forget(1) // broker 1's idle connection closed
	h.forget(2) // a failed broker is not forgotten
	h.observe(2, errors.New("refused"))
	if s := h.Snapshot(); s.Reachable || s.LastError != "refused" {
		t.Fatalf("%+v, want unreachable: refused", s)
	}
}
