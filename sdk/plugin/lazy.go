package plugin

import (
	"context"
	"sync"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The lazy implementations stand in for a plugin's implementation until
// the host configures it (ServeConfig's constructors): every call before
// then fails with ErrNotConfigured.

type lazy[T any] struct {
	mu    sync.RWMutex
	impl  T
	ready bool
}

func (l *lazy[T]) set(impl T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.impl, l.ready = impl, true
}

func (l *lazy[T]) get() (T, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.ready {
		var zero T
		return zero, ErrNotConfigured
	}
	return l.impl, nil
}

// lazyStore also offers the optional interfaces of statestore (Info,
// paging, leases): the store's own once it is configured, else the generic
// ones over it, so that what a plugin constructs natively stays visible
// over the RPC.
type lazyStore struct {
	lazy[statestore.Store]
	leasesOnce sync.Once
	leases     statestore.Leaser
}

func (l *lazyStore) leaser() (statestore.Leaser, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	l.leasesOnce.Do(func() { l.leases = statestore.Leases(s) })
	return l.leases, nil
}

// leasesNative: the configured store has leases of its own.
func (l *lazyStore) leasesNative() bool {
	s, err := l.get()
	if err != nil {
		return false
	}
	_, ok := s.(statestore.Leaser)
	return ok
}

func (l *lazyStore) Info() statestore.Info {
	s, err := l.get()
	if err != nil {
		return statestore.DefaultInfo()
	}
	return statestore.InfoOf(s)
}

func (l *lazyStore) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	s, err := l.get()
	if err != nil {
		return nil, false, err
	}
	return statestore.ListPage(ctx, s, prefix, after, limit)
}

func (l *lazyStore) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	ls, err := l.leaser()
	if err != nil {
		return statestore.Lease{}, err
	}
	return ls.AcquireLease(ctx, key, holder, ttl)
}

func (l *lazyStore) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	ls, err := l.leaser()
	if err != nil {
		return statestore.Lease{}, err
	}
	return ls.RenewLease(ctx, key, holder, ttl)
}

func (l *lazyStore) ReleaseLease(ctx context.Context, key, holder string) error {
	ls, err := l.leaser()
	if err != nil {
		return err
	}
	return ls.ReleaseLease(ctx, key, holder)
}

func (l *lazyStore) GetLease(ctx context.Context, key string) (statestore.Lease, error) {
	ls, err := l.leaser()
	if err != nil {
		return statestore.Lease{}, err
	}
	return ls.GetLease(ctx, key)
}

func (l *lazyStore) Get(ctx context.Context, key string) (statestore.Entry, error) {
	s, err := l.get()
	if err != nil {
		return statestore.Entry{}, err
	}
	return s.Get(ctx, key)
}

func (l *lazyStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	s, err := l.get()
	if err != nil {
		return 0, err
	}
	return s.Put(ctx, key, value, expect)
}

func (l *lazyStore) Delete(ctx context.Context, key string, expect int64) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Delete(ctx, key, expect)
}

func (l *lazyStore) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.List(ctx, prefix)
}

func (l *lazyStore) Close() error {
	s, err := l.get()
	if err != nil {
		return nil
	}
	return s.Close()
}

type lazyAuth struct{ lazy[auth.Provider] }

func (l *lazyAuth) Info() auth.Info {
	p, err := l.get()
	if err != nil {
		return auth.Info{ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor}
	}
	return p.Info()
}

func (l *lazyAuth) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	p, err := l.get()
	if err != nil {
		return auth.Credentials{}, err
	}
	return p.Credentials(ctx, req)
}

func (l *lazyAuth) Close() error {
	p, err := l.get()
	if err != nil {
		return nil
	}
	return p.Close()
}

type lazyFilter struct{ lazy[filter.Filter] }

func (l *lazyFilter) Info() filter.Info {
	f, err := l.get()
	if err != nil {
		return filter.Info{ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor}
	}
	return f.Info()
}

func (l *lazyFilter) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	f, err := l.get()
	if err != nil {
		return nil, err
	}
	return f.FilterTopics(ctx, mirror, in)
}

func (l *lazyFilter) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	f, err := l.get()
	if err != nil {
		return nil, err
	}
	return f.FilterGroups(ctx, mirror, in)
}

func (l *lazyFilter) FilterACLs(ctx context.Context, mirror string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
	f, err := l.get()
	if err != nil {
		return nil, err
	}
	return f.FilterACLs(ctx, mirror, in)
}
