package etcd

import (
	"fmt"
	"os"
	"testing"

	"github.com/kmirror/kmirror/internal/etcdtest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// srv is the etcd server the tests share, each under its own prefix.
var srv *etcdtest.Server

func TestMain(m *testing.M) {
	s, err := etcdtest.Start(etcdtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// config is the default configuration for ep, under a prefix of t's own.
func config(t *testing.T, s *etcdtest.Server) Config {
	c := DefaultConfig()
	c.Endpoints = []string{s.Endpoint}
	c.Prefix = s.Prefix(t)
	return c
}

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Store {
		return open(t, config(t, srv))
	})
}
