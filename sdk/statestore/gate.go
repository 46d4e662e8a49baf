package statestore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Gate is what a store's operations share with its Close, for store
// implementations: every operation holds the gate shared from Begin until
// the done func Begin returns, and Close waits for the operations in
// progress, then makes every later Begin fail with ErrClosed. Begin also
// validates the key and bounds the operation by the request timeout.
// The zero Gate is open, with no name and no timeout.
type Gate struct {
	// Name prefixes every error (the store's name, e.g. "etcd store").
	Name string
	// Timeout bounds each operation on top of the caller's context; zero:
	// no bound of its own.
	Timeout time.Duration

	mu     sync.RWMutex
	closed bool
}

// Begin starts operation op on key: it fails with ErrClosed once the gate
// is closed, with the validation error when isKey and key is not a valid
// key (ValidateKey; a list prefix passes isKey false), and with ctx's error
// when ctx already ended. Otherwise it returns the operation's context
// (ctx bounded by Timeout) and done, which the caller must call once the
// operation returns.
func (g *Gate) Begin(ctx context.Context, op, key string, isKey bool) (context.Context, func(), error) {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return nil, nil, fmt.Errorf("%s: %s %q: %w", g.Name, op, key, ErrClosed)
	}
	if isKey {
		if err := ValidateKey(key); err != nil {
			g.mu.RUnlock()
			return nil, nil, fmt.Errorf("%s: %s: %w", g.Name, op, err)
		}
	}
	if err := ctx.Err(); err != nil {
		g.mu.RUnlock()
		return nil, nil, fmt.Errorf("%s: %s %q: %w", g.Name, op, key, err)
	}
	if g.Timeout <= 0 {
		return ctx, g.mu.RUnlock, nil
	}
	rctx, cancel := context.WithTimeout(ctx, g.Timeout)
	return rctx, func() { cancel(); g.mu.RUnlock() }, nil
}

// Close waits until no operation is in progress and closes the gate, then
// calls release (the store's own closing: clients, files) with no
// operation running. A second Close calls nothing and returns nil.
func (g *Gate) Close(release func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	if release == nil {
		return nil
	}
	return release()
}
