// Package faultstore is a state store for tests that fails on demand: it
// wraps a statestore.Store, fails every call while Fail(true) is in force
// (a store that cannot be reached), and runs BeforePut before each Put (to
// let something else happen between a read and a write). Only tests import
// it.
package faultstore

import (
	"context"
	"errors"
	"sync"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// ErrDown is what every call returns while the store fails.
var ErrDown = errors.New("state store unreachable (test)")

// Store wraps a statestore.Store.
type Store struct {
	statestore.Store

	mu        sync.Mutex
	failing   bool
	beforePut func()
}

// New wraps s.
func New(s statestore.Store) *Store { return &Store{Store: s} }

// Fail makes every call fail (on) or pass through again.
func (s *Store) Fail(on bool) {
	s.mu.Lock()
	s.failing = on
	s.mu.Unlock()
}

// BeforePut sets a function run before each Put (nil: none).
func (s *Store) BeforePut(fn func()) {
	s.mu.Lock()
	s.beforePut = fn
	s.mu.Unlock()
}

func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return ErrDown
	}
	return nil
}

// Get is the wrapped store's, unless the store fails.
func (s *Store) Get(ctx context.Context, key string) (statestore.Entry, error) {
	if err := s.check(); err != nil {
		return statestore.Entry{}, err
	}
	return s.Store.Get(ctx, key)
}

// Put runs BeforePut's function, then the wrapped store's Put, unless the
// store fails.
func (s *Store) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	hook := s.beforePut
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return s.Store.Put(ctx, key, value, expect)
}

// Delete is the wrapped store's, unless the store fails.
func (s *Store) Delete(ctx context.Context, key string, expect int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key, expect)
}

// List is the wrapped store's, unless the store fails.
func (s *Store) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}
