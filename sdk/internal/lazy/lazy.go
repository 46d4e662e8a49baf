// Package lazy holds the stand-ins a plugin serves until the host
// configures it: sdk/plugin's ServeConfig constructors (NewStateStore,
// NewAuth, NewFilter) build the implementation only when the host's
// Configure call brings its `config:` block, but go-plugin registers the
// kind's service at start. Until Set, every call of a stand-in fails with
// ErrNotConfigured; afterwards it passes through to the implementation.
package lazy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// ErrNotConfigured: the plugin was used before the host configured it
// (sdk/plugin exports it as plugin.ErrNotConfigured).
var ErrNotConfigured = errors.New("plugin: not configured yet")

// slot holds the implementation, set once, when the host configures the
// plugin.
type slot[T any] struct {
	mu    sync.RWMutex
	impl  T
	ready bool
}

// Set makes impl the implementation every later call goes to.
func (l *slot[T]) Set(impl T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.impl, l.ready = impl, true
}

func (l *slot[T]) get() (T, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.ready {
		var zero T
		return zero, ErrNotConfigured
	}
	return l.impl, nil
}

// Store stands in for a statestore.Store. It also offers the optional
// interfaces of statestore (Info, paging, leases): the store's own once it
// is configured, else the generic ones over it, so that what a plugin
// constructs natively stays visible over the RPC.
type Store struct {
	slot[statestore.Store]
	leasesOnce sync.Once
	leases     statestore.Leaser
}

func (l *Store) leaser() (statestore.Leaser, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	l.leasesOnce.Do(func() { l.leases = statestore.Leases(s) })
	return l.leases, nil
}

// LeasesNative reports whether the configured store has leases of its own
// (the state-store adaptor's Info asks, as Store always offers leases).
func (l *Store) LeasesNative() bool {
	s, err := l.get()
	if err != nil {
		return false
	}
	_, ok := s.(statestore.Leaser)
	return ok
}

// Info implements statestore.Informer (DefaultInfo until configured).
func (l *Store) Info() statestore.Info {
	s, err := l.get()
	if err != nil {
		return statestore.DefaultInfo()
	}
	return statestore.InfoOf(s)
}

// ListPage implements statestore.Pager.
func (l *Store) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	s, err := l.get()
	if err != nil {
		return nil, false, err
	}
	return statestore.ListPage(ctx, s, prefix, after, limit)
}

// AcquireLease implements statestore.Leaser.
func (l *Store) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	ls, err := l.leaser()
	if err != nil {
		return statestore.Lease{}, err
	}
	return ls.AcquireLease(ctx, key, holder, ttl)
}

// RenewLease implements statestore.Leaser.
func (l *Store) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	ls, err := l.leaser()
	if err != nil {
		return statestore.Lease{}, err
	}
	return ls.RenewLease(ctx, key, holder, ttl)
}

// ReleaseLease implements statestore.Leaser.
func (l *Store) ReleaseLease(ctx context.Context, key, holder string) error {
	ls, err := l.leaser()
	if err != nil {
		return err
	}
	return ls.ReleaseLease(ctx, key, holder)
}

// GetLease implements statestore.Leaser.
func (l *Store) GetLease(ctx context.Context, key string) (statestore.Lease, error) {
	ls, err := l.leaser()
	if err != nil {
		return statestore.Lease{}, err
	}
	return ls.GetLease(ctx, key)
}

// Get implements statestore.Store.
func (l *Store) Get(ctx context.Context, key string) (statestore.Entry, error) {
	s, err := l.get()
	if err != nil {
		return statestore.Entry{}, err
	}
	return s.Get(ctx, key)
}

// Put implements statestore.Store.
func (l *Store) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s, err := l.get()
	if err != nil {
		return 0, err
	}
	return s.Put(ctx, key, value, expect)
}

// Delete implements statestore.Store.
func (l *Store) Delete(ctx context.Context, key string, expect int64) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Delete(ctx, key, expect)
}

// List implements statestore.Store.
func (l *Store) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.List(ctx, prefix)
}

// Close implements statestore.Store (nil until configured).
func (l *Store) Close() error {
	s, err := l.get()
	if err != nil {
		return nil
	}
	return s.Close()
}

// Auth stands in for an auth.Provider.
type Auth struct{ slot[auth.Provider] }

// Info implements auth.Provider (the protocol version only, until configured).
func (l *Auth) Info() auth.Info {
	p, err := l.get()
	if err != nil {
		return auth.Info{ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor}
	}
	return p.Info()
}

// Credentials implements auth.Provider.
func (l *Auth) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	p, err := l.get()
	if err != nil {
		return auth.Credentials{}, err
	}
	return p.Credentials(ctx, req)
}

// Close implements auth.Provider (nil until configured).
func (l *Auth) Close() error {
	p, err := l.get()
	if err != nil {
		return nil
	}
	return p.Close()
}

// Filter stands in for a filter.Filter.
type Filter struct{ slot[filter.Filter] }

// Info implements filter.Filter (the protocol version only, until configured).
func (l *Filter) Info() filter.Info {
	f, err := l.get()
	if err != nil {
		return filter.Info{ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor}
	}
	return f.Info()
}

// FilterTopics implements filter.Filter.
func (l *Filter) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	f, err := l.get()
	if err != nil {
		return nil, err
	}
	return f.FilterTopics(ctx, mirror, in)
}

// FilterGroups implements filter.Filter.
func (l *Filter) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	f, err := l.get()
	if err != nil {
		return nil, err
	}
	return f.FilterGroups(ctx, mirror, in)
}

// FilterACLs implements filter.Filter.
func (l *Filter) FilterACLs(ctx context.Context, mirror string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
	f, err := l.get()
	if err != nil {
		return nil, err
	}
	return f.FilterACLs(ctx, mirror, in)
}
