// Package memstore is an in-memory statestore.Store: not durable, for tests
// of code that uses a state store and as the reference implementation of the
// contract (it runs the storetest conformance suite). It implements
// statestore.Informer and statestore.Pager; its leases are the generic ones
// (statestore.NewCASLeases).
package memstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// Store keeps entries in a map guarded by one mutex. Versions come from one
// store-wide counter, so they never repeat for a key across Delete.
type Store struct {
	mu      sync.Mutex
	closed  bool
	counter int64
	entries map[string]statestore.Entry
}

var (
	_ statestore.Store    = (*Store)(nil)
	_ statestore.Informer = (*Store)(nil)
	_ statestore.Pager    = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{entries: make(map[string]statestore.Entry)}
}

func (s *Store) begin(ctx context.Context, op, key string, checkKey bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s %q: %w", op, key, err)
	}
	if checkKey {
		if err := statestore.ValidateKey(key); err != nil {
			return fmt.Errorf("memstore: %s: %w", op, err)
		}
	}
	if s.closed {
		return fmt.Errorf("memstore: %s %q: %w", op, key, statestore.ErrClosed)
	}
	return nil
}

// Get implements statestore.Store.
func (s *Store) Get(ctx context.Context, key string) (statestore.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "get", key, true); err != nil {
		return statestore.Entry{}, err
	}
	e, ok := s.entries[key]
	if !ok {
		return statestore.Entry{}, fmt.Errorf("memstore: get %q: %w", key, statestore.ErrNotFound)
	}
	return clone(e), nil
}

// Put implements statestore.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "put", key, true); err != nil {
		return 0, err
	}
	if err := statestore.ValidatePutVersion(expect); err != nil {
		return 0, fmt.Errorf("memstore: put %q: %w", key, err)
	}
	if err := statestore.CheckVersion(key, s.entries[key].Version, expect); err != nil {
		return 0, fmt.Errorf("memstore: put: %w", err)
	}
	s.counter++
	s.entries[key] = clone(statestore.Entry{Key: key, Value: value, Version: s.counter})
	return s.counter, nil
}

// Delete implements statestore.Store.
func (s *Store) Delete(ctx context.Context, key string, expect int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "delete", key, true); err != nil {
		return err
	}
	if err := statestore.ValidateDeleteVersion(expect); err != nil {
		return fmt.Errorf("memstore: delete %q: %w", key, err)
	}
	e, ok := s.entries[key]
	if !ok {
		return fmt.Errorf("memstore: delete %q: %w", key, statestore.ErrNotFound)
	}
	if err := statestore.CheckVersion(key, e.Version, expect); err != nil {
		return fmt.Errorf("memstore: delete: %w", err)
	}
	delete(s.entries, key)
	return nil
}

// List implements statestore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "list", prefix, false); err != nil {
		return nil, err
	}
	var out []statestore.Entry
	for k, e := range s.entries {
		if strings.HasPrefix(k, prefix) {
			out = append(out, clone(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ListPage implements statestore.Pager.
func (s *Store) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "list", prefix, false); err != nil {
		return nil, false, err
	}
	if err := statestore.ValidateLimit(limit); err != nil {
		return nil, false, fmt.Errorf("memstore: list %q: %w", prefix, err)
	}
	var keys []string
	for k := range s.entries {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	more := len(keys) > limit
	if more {
		keys = keys[:limit]
	}
	out := make([]statestore.Entry, 0, len(keys))
	for _, k := range keys {
		out = append(out, clone(s.entries[k]))
	}
	return out, more, nil
}

// Info implements statestore.Informer: "memstore", not shared (it lives in
// one process).
func (s *Store) Info() statestore.Info {
	return statestore.Info{Name: "memstore", ProtocolMajor: statestore.ProtocolMajor, ProtocolMinor: statestore.ProtocolMinor}
}

// Close implements statestore.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func clone(e statestore.Entry) statestore.Entry {
	e.Value = append([]byte{}, e.Value...)
	return e
}
