// Package statemigrate copies a daemon's state from one state store to
// another (`kmirror state migrate`), with the daemon stopped, and proves the
// copy by reading every key back.
package statemigrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// ErrTargetNotEmpty: the target store already holds kmirror state; a
// migration never merges two states.
var ErrTargetNotEmpty = errors.New("the target state store already holds kmirror state")

// pageSize is how many entries a page of the source is read in.
const pageSize = 500

// Report says what a migration did.
type Report struct {
	// Keys is the number of keys copied and read back.
	Keys int
	// Bytes is the total size of their values.
	Bytes int64
}

// Migrate copies every entry under "mirrors/" from src to dst. dst must
// hold nothing there (ErrTargetNotEmpty names a key it holds). Each key is
// created in dst (expected version Absent), then every key is read back
// from dst and compared with src byte for byte; a difference fails the
// migration naming the key. Versions are the target store's own: they are
// never copied (every store draws them from its own counter). Leases are
// not copied either: a lease names a daemon that is stopped.
func Migrate(ctx context.Context, src, dst statestore.Store) (Report, error) {
	var rep Report
	prefix := "mirrors/"
	if existing, _, err := statestore.ListPage(ctx, dst, prefix, "", 1); err != nil {
		return rep, fmt.Errorf("reading the target store: %w", err)
	} else if len(existing) > 0 {
		return rep, fmt.Errorf("%w (for example %s); migrate into an empty store", ErrTargetNotEmpty, existing[0].Key)
	}
	entries, err := statestore.ListAll(ctx, pager{src}, prefix, pageSize)
	if err != nil {
		return rep, fmt.Errorf("reading the source store: %w", err)
	}
	var copied []statestore.Entry
	for _, e := range entries {
		if isLease(e.Key) {
			continue
		}
		if _, err := dst.Put(ctx, e.Key, e.Value, statestore.Absent); err != nil {
			return rep, fmt.Errorf("writing %s to the target store after %d keys: %w", e.Key, len(copied), err)
		}
		copied = append(copied, e)
	}
	for _, e := range copied {
		got, err := dst.Get(ctx, e.Key)
		if err != nil {
			return rep, fmt.Errorf("reading %s back from the target store: %w", e.Key, err)
		}
		if !bytes.Equal(got.Value, e.Value) {
			return rep, fmt.Errorf("%s reads back different from the target store (%d bytes, %d written)", e.Key, len(got.Value), len(e.Value))
		}
		rep.Keys++
		rep.Bytes += int64(len(e.Value))
	}
	return rep, nil
}

// isLease reports whether key is a lease (mirrors/<m>/leases/<name>).
func isLease(key string) bool {
	rest, ok := bytes.CutPrefix([]byte(key), []byte("mirrors/"))
	if !ok {
		return false
	}
	i := bytes.IndexByte(rest, '/')
	return i >= 0 && bytes.HasPrefix(rest[i+1:], []byte("leases/"))
}

// pager pages any store: its own ListPage, or statestore's over List.
type pager struct{ s statestore.Store }

func (p pager) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	return statestore.ListPage(ctx, p.s, prefix, after, limit)
}
