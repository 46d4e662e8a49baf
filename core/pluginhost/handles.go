package pluginhost

import (
	"context"
	"slices"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The handles forward each call to the instance serving at the time of the
// call. They stay valid across restarts; while the plugin is down a call
// fails at once with an *UnavailableError. Their Close does nothing: the
// Host owns the processes and stops them in Close.

// ref names the plugin a handle stands for. A plugin that Ensure
// replaced is a new supervised under the same name, so a handle looks its
// plugin up at each call; one that was dropped keeps answering as dropped.
type ref struct {
	h    *Host
	name string
	last *supervised
}

func (r ref) sv() *supervised {
	if s := r.h.plugin(r.name); s != nil && s.spec.Kind == r.last.spec.Kind {
		return s
	}
	return r.last
}

// call runs f on the current implementation of s.
func call[I, R any](s *supervised, f func(I) (R, error)) (R, error) {
	inst, err := s.get()
	if err != nil {
		var zero R
		return zero, err
	}
	r, err := f(inst.impl.(I))
	return r, s.failed(inst, err)
}

// StateStore returns the handle of the statestore plugin named name.
func (h *Host) StateStore(name string) (statestore.Store, error) {
	s, err := h.lookup(name, plugin.KindStateStore)
	if err != nil {
		return nil, err
	}
	return storeHandle{ref{h, name, s}}, nil
}

type storeHandle struct{ r ref }

// MaxStoreCalls bounds the Get, Put and Delete calls in flight to one
// state-store plugin; more wait in the daemon (or until their context
// ends). When 10,000 partitions start, their records are written at once:
// unbounded, each call was a gRPC stream in the daemon and a goroutine with
// its buffers in the plugin's process, all waiting there for the disk. The
// file store fsyncs 32 at a time; a networked store gains nothing from more
// than this in flight either. Leases, List and ListPage are not bounded: a
// lease renewal never waits behind writes.
const MaxStoreCalls = 64

// bounded runs f with one of s's store-call tokens, waiting for one until
// ctx ends.
func bounded[R any](ctx context.Context, s *supervised, f func(statestore.Store) (R, error)) (R, error) {
	select {
	case s.storeCalls <- struct{}{}:
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
	defer func() { <-s.storeCalls }()
	return call(s, f)
}

func (h storeHandle) Get(ctx context.Context, key string) (statestore.Entry, error) {
	return bounded(ctx, h.r.sv(), func(st statestore.Store) (statestore.Entry, error) { return st.Get(ctx, key) })
}

func (h storeHandle) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	return bounded(ctx, h.r.sv(), func(st statestore.Store) (int64, error) { return st.Put(ctx, key, value, expect) })
}

func (h storeHandle) Delete(ctx context.Context, key string, expect int64) error {
	_, err := bounded(ctx, h.r.sv(), func(st statestore.Store) (struct{}, error) { return struct{}{}, st.Delete(ctx, key, expect) })
	return err
}

func (h storeHandle) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	return call(h.r.sv(), func(st statestore.Store) ([]statestore.Entry, error) { return st.List(ctx, prefix) })
}

func (h storeHandle) Close() error { return nil }

// Info is the serving instance's Info (statestore.DefaultInfo while the
// plugin is down).
func (h storeHandle) Info() statestore.Info {
	inst, err := h.r.sv().get()
	if err != nil {
		return statestore.DefaultInfo()
	}
	return statestore.InfoOf(inst.impl.(statestore.Store))
}

// ListPage implements statestore.Pager.
func (h storeHandle) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	type page struct {
		entries []statestore.Entry
		more    bool
	}
	p, err := call(h.r.sv(), func(st statestore.Store) (page, error) {
		e, more, err := statestore.ListPage(ctx, st, prefix, after, limit)
		return page{e, more}, err
	})
	return p.entries, p.more, err
}

// AcquireLease implements statestore.Leaser.
func (h storeHandle) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	return call(h.r.sv(), func(st statestore.Store) (statestore.Lease, error) {
		return statestore.Leases(st).AcquireLease(ctx, key, holder, ttl)
	})
}

// RenewLease implements statestore.Leaser.
func (h storeHandle) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	return call(h.r.sv(), func(st statestore.Store) (statestore.Lease, error) {
		return statestore.Leases(st).RenewLease(ctx, key, holder, ttl)
	})
}

// ReleaseLease implements statestore.Leaser.
func (h storeHandle) ReleaseLease(ctx context.Context, key, holder string) error {
	_, err := call(h.r.sv(), func(st statestore.Store) (struct{}, error) {
		return struct{}{}, statestore.Leases(st).ReleaseLease(ctx, key, holder)
	})
	return err
}

// GetLease implements statestore.Leaser.
func (h storeHandle) GetLease(ctx context.Context, key string) (statestore.Lease, error) {
	return call(h.r.sv(), func(st statestore.Store) (statestore.Lease, error) {
		return statestore.Leases(st).GetLease(ctx, key)
	})
}

// Auth returns the handle of the auth plugin named name.
func (h *Host) Auth(name string) (auth.Provider, error) {
	s, err := h.lookup(name, plugin.KindAuth)
	if err != nil {
		return nil, err
	}
	return authHandle{ref{h, name, s}}, nil
}

type authHandle struct{ r ref }

// Info is the plugin's Info as read when it was last launched (a copy:
// changing its Mechanisms changes nothing of the handle's).
func (h authHandle) Info() auth.Info {
	s := h.r.sv()
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := s.authInfo
	i.Mechanisms = slices.Clone(i.Mechanisms)
	return i
}

func (h authHandle) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	return call(h.r.sv(), func(p auth.Provider) (auth.Credentials, error) { return p.Credentials(ctx, req) })
}

func (h authHandle) Close() error { return nil }

// Filter returns the handle of the filter plugin named name.
func (h *Host) Filter(name string) (filter.Filter, error) {
	s, err := h.lookup(name, plugin.KindFilter)
	if err != nil {
		return nil, err
	}
	return filterHandle{ref{h, name, s}}, nil
}

type filterHandle struct{ r ref }

// Info is the plugin's Info as read when it was last launched (a copy:
// changing its Kinds changes nothing of the handle's).
func (h filterHandle) Info() filter.Info {
	s := h.r.sv()
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := s.filtInfo
	i.Kinds = slices.Clone(i.Kinds)
	return i
}

func (h filterHandle) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	return call(h.r.sv(), func(f filter.Filter) ([]filter.Topic, error) { return f.FilterTopics(ctx, mirror, in) })
}

func (h filterHandle) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	return call(h.r.sv(), func(f filter.Filter) ([]filter.Group, error) { return f.FilterGroups(ctx, mirror, in) })
}

func (h filterHandle) FilterACLs(ctx context.Context, mirror string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
	return call(h.r.sv(), func(f filter.Filter) ([]filter.ACLBinding, error) { return f.FilterACLs(ctx, mirror, in) })
}
