// Package runtimemirror keeps the records of mirrors created at run time
// in the state store: failback mirrors, and mirrors an operator created
// through the admin API. core/mirror starts every recorded one at each
// start of the daemon; a record never holds a secret. See
// docs/design/failover.md.
package runtimemirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// Spec is a mirror created at run time, kept in the state store: either a
// failback mirror (FailbackOf, Topics) or one an operator created
// (Config). It never holds a secret.
type Spec struct {
	// FailbackOf names the mirror this one reverses.
	FailbackOf string `json:"failback_of,omitempty"`
	// Topics are the topics it mirrors back (exact names).
	Topics []string `json:"topics,omitempty"`
	// Config holds an operator-created mirror's settings (YAML, the keys
	// of one entry of mirrors:, secrets only as file references).
	Config string `json:"config,omitempty"`
}

// Key is the state store key of mirror's record.
func Key(mirror string) string { return statestore.MirrorPrefix(mirror) + "spec" }

// Put records mirror's spec if the record is at version (statestore.Absent:
// none yet; statestore.AnyVersion: whatever it is).
func Put(ctx context.Context, store statestore.Store, mirror string, spec Spec, version int64) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	_, err = store.Put(ctx, Key(mirror), b, version)
	return err
}

// Get reads mirror's record: statestore.ErrNotFound when there is none;
// ok is false when one is there but unreadable.
func Get(ctx context.Context, store statestore.Store, mirror string) (spec Spec, ok bool, err error) {
	ent, err := store.Get(ctx, Key(mirror))
	if err != nil {
		return Spec{}, false, err
	}
	return spec, json.Unmarshal(ent.Value, &spec) == nil, nil
}

// Recorded is one recorded mirror; Err says why its record is unreadable.
type Recorded struct {
	Name string
	Spec Spec
	Err  error
}

// List returns every recorded mirror.
func List(ctx context.Context, store statestore.Store) ([]Recorded, error) {
	root := strings.TrimSuffix(statestore.MirrorPrefix(""), "/") // "mirrors/"
	entries, err := store.List(ctx, root)
	if err != nil {
		return nil, err
	}
	var out []Recorded
	for _, ent := range entries {
		name, ok := strings.CutSuffix(strings.TrimPrefix(ent.Key, root), "/spec")
		if !ok || strings.Contains(name, "/") {
			continue
		}
		r := Recorded{Name: name}
		r.Err = json.Unmarshal(ent.Value, &r.Spec)
		out = append(out, r)
	}
	return out, nil
}

// Delete deletes every record of mirror in the state store (partitions,
// offset maps, operator record), its spec last: a crash in the middle
// leaves a mirror that starts again with STOPPED partitions, and a
// repeated delete ends it.
func Delete(ctx context.Context, store statestore.Store, mirror string) error {
	entries, err := store.List(ctx, statestore.MirrorPrefix(mirror))
	if err != nil {
		return fmt.Errorf("mirror %s: listing its state: %w", mirror, err)
	}
	for _, ent := range entries {
		if ent.Key == Key(mirror) {
			continue
		}
		if err := store.Delete(ctx, ent.Key, statestore.AnyVersion); err != nil && !errors.Is(err, statestore.ErrNotFound) {
			return fmt.Errorf("mirror %s: deleting %s: %w", mirror, ent.Key, err)
		}
	}
	if err := store.Delete(ctx, Key(mirror), statestore.AnyVersion); err != nil && !errors.Is(err, statestore.ErrNotFound) {
		return fmt.Errorf("mirror %s: deleting its record: %w", mirror, err)
	}
	return nil
}
