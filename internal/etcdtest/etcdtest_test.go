package etcdtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestPauseResumeStop: a paused server answers nothing until it is
// resumed; Stop removes its data and may be called twice.
func TestPauseResumeStop(t *testing.T) {
	s := StartT(t, Options{})
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = c.Get(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get from a paused server: %v, want DeadlineExceeded", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Get(t.Context(), "k"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("Get after Resume: %v", err)
	}
	if a, b := s.Prefix(t), s.Prefix(t); a == b {
		t.Fatalf("two prefixes of one test are equal: %q", a)
	}
	s.Stop()
	s.Stop()
	if _, err := os.Stat(s.dataDir); !os.IsNotExist(err) {
		t.Fatalf("data directory after Stop: %v", err)
	}
}
