package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Mirrors created at run time (the admin API's create) are recorded in the
// state store and started again at every start of the daemon; mirrors in
// the configuration file stay declarative and cannot be deleted through the
// API. See docs/design/failover.md.

// CreateMirror records and starts a mirror whose settings (YAML: the keys
// of one entry of mirrors:, see config.ParseMirror) an operator gave at run
// time. Creating the same mirror with the same settings again is a no-op;
// a name in use with other settings is a conflict.
func (e *Engine) CreateMirror(ctx context.Context, name string, settings []byte) (admin.OpResult, error) {
	if _, err := config.ParseMirror(settings, name); err != nil {
		return admin.OpResult{}, fmt.Errorf("%w: %v", admin.ErrInvalidRequest, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, declared := e.cfg.Mirror(name); declared {
		return admin.OpResult{}, fmt.Errorf("%w: mirror %s is declared in the configuration file; change it there (and reload)", admin.ErrConflict, name)
	}
	if strings.HasSuffix(name, "-failback") {
		return admin.OpResult{}, fmt.Errorf("%w: names ending in -failback are kept for failback mirrors", admin.ErrInvalidRequest)
	}
	spec := runtimeSpec{Config: string(settings)}
	b, err := json.Marshal(spec)
	if err != nil {
		return admin.OpResult{}, err
	}
	if ent, err := e.opts.Store.Get(ctx, specKey(name)); err == nil {
		var old runtimeSpec
		if json.Unmarshal(ent.Value, &old) == nil && old.Config == spec.Config && e.mirrors[name] != nil {
			return admin.OpResult{Mirror: name, Message: "mirror " + name + " exists with these settings"}, nil
		}
		return admin.OpResult{}, fmt.Errorf("%w: a run-time mirror named %s exists with other settings; delete it first", admin.ErrConflict, name)
	} else if !errors.Is(err, statestore.ErrNotFound) {
		return admin.OpResult{}, fmt.Errorf("reading run-time mirror %s: %w", name, err)
	}
	if _, err := e.opts.Store.Put(ctx, specKey(name), b, statestore.Absent); err != nil {
		return admin.OpResult{}, fmt.Errorf("recording run-time mirror %s: %w", name, err)
	}
	if err := e.startRuntime(name, spec); err != nil {
		return admin.OpResult{}, err
	}
	e.log.Info("run-time mirror created", "mirror", name)
	return admin.OpResult{Mirror: name, Message: "mirror " + name + " created; it survives restarts until deleted"}, nil
}

// DeleteMirror stops and forgets a run-time mirror (one created through
// CreateMirror, or a failback mirror) whose partitions are all STOPPED:
// stop its topics first (or fail it over), so that no destination topic is
// left read-only or with a transaction open. Its records in the state
// store (partitions, offset maps, operator record) are deleted; the
// destination topics are kept. Deleting a mirror that does not exist is a
// no-op.
func (e *Engine) DeleteMirror(ctx context.Context, name string) (admin.OpResult, error) {
	// The name is a prefix of state store keys: "dc1/partitions" would
	// name part of mirror dc1's state.
	if err := config.CheckMirrorName(name); err != nil {
		return admin.OpResult{}, fmt.Errorf("%w: %v", admin.ErrInvalidRequest, err)
	}
	e.mu.Lock()
	if _, declared := e.cfg.Mirror(name); declared {
		e.mu.Unlock()
		return admin.OpResult{}, fmt.Errorf("%w: mirror %s is declared in the configuration file; remove it there (and reload)", admin.ErrConflict, name)
	}
	m := e.mirrors[name]
	e.mu.Unlock()
	parts, err := e.machine.LoadMirror(ctx, name)
	if err != nil && len(parts) == 0 {
		return admin.OpResult{}, fmt.Errorf("mirror %s: loading partition states: %w", name, err)
	}
	for _, p := range parts {
		if st := p.State(); st != partition.Stopped {
			return admin.OpResult{}, fmt.Errorf("%w: mirror %s: %s/%d is %s; stop its topics first (kmirror mirrors stop --mirror %s --topics '.*', or kmirror failover --mirror %s)",
				admin.ErrConflict, name, p.Record().Topic, p.Record().Partition, st, name, name)
		}
	}
	if m != nil {
		e.mu.Lock()
		delete(e.mirrors, name)
		e.mu.Unlock()
		m.stop(ctx)
	}
	entries, err := e.opts.Store.List(ctx, statestore.MirrorPrefix(name))
	if err != nil {
		return admin.OpResult{}, fmt.Errorf("mirror %s: listing its state: %w", name, err)
	}
	// The spec goes last: a crash in the middle leaves a mirror that
	// starts again with STOPPED partitions, and a repeated delete ends it.
	for _, ent := range entries {
		if ent.Key == specKey(name) {
			continue
		}
		if err := e.opts.Store.Delete(ctx, ent.Key, statestore.AnyVersion); err != nil && !errors.Is(err, statestore.ErrNotFound) {
			return admin.OpResult{}, fmt.Errorf("mirror %s: deleting %s: %w", name, ent.Key, err)
		}
	}
	if err := e.opts.Store.Delete(ctx, specKey(name), statestore.AnyVersion); err != nil && !errors.Is(err, statestore.ErrNotFound) {
		return admin.OpResult{}, fmt.Errorf("mirror %s: deleting its record: %w", name, err)
	}
	e.ctlMu.Lock()
	delete(e.controls, name)
	e.ctlMu.Unlock()
	e.log.Info("run-time mirror deleted", "mirror", name)
	return admin.OpResult{Mirror: name, Message: "mirror " + name + " deleted; its destination topics are kept"}, nil
}
