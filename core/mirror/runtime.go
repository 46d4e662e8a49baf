package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runtimemirror"
	"github.com/kmirror/kmirror/core/supervisor"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Mirrors created at run time (the admin API's create) are recorded in the
// state store and started again at every start of the daemon; mirrors in
// the configuration file stay declarative and cannot be deleted through the
// API. See docs/design/failover.md.

// startRuntime starts a recorded run-time mirror; e.mu must be held.
func (e *Engine) startRuntime(name string, spec runtimemirror.Spec) error {
	if spec.FailbackOf == "" {
		mc, err := config.ParseMirror([]byte(spec.Config), name)
		if err != nil {
			return err
		}
		if _, clash := e.cfg.Mirror(name); clash {
			return fmt.Errorf("the configuration now declares a mirror named %s, like the run-time mirror of that name; delete one of them", name)
		}
		m := e.newMirror(mc)
		m.MarkRuntime()
		e.mirrors[name] = m
		m.Start()
		return nil
	}
	of, ok := e.cfg.Mirror(spec.FailbackOf)
	if !ok {
		// A mirror created through the admin API: its settings are
		// those it runs with (startRecordedRuntime starts it first).
		if fm := e.mirrors[spec.FailbackOf]; fm != nil && fm.Runtime() && fm.ReverseOf() == "" {
			_, mc := fm.Settings()
			of = &mc
		} else {
			return fmt.Errorf("failback mirror %s reverses mirror %s, which is neither in the configuration nor a running mirror created through the admin API; restore it, or delete %s", name, spec.FailbackOf, name)
		}
	}
	if _, clash := e.cfg.Mirror(name); clash {
		return fmt.Errorf("the configuration has a mirror named %s, the name of mirror %s's failback mirror; rename it", name, spec.FailbackOf)
	}
	mc, err := failback.ReverseConfig(e.cfg, *of, name, spec.Topics)
	if err != nil {
		return err
	}
	m := e.newMirror(mc)
	m.Reverse(*of)
	e.mirrors[name] = m
	m.Start()
	return nil
}

// startRecordedRuntime starts every run-time mirror recorded in the state
// store; e.mu must be held. A mirror that cannot start is logged and left
// recorded.
func (e *Engine) startRecordedRuntime(ctx context.Context) {
	recorded, err := runtimemirror.List(ctx, e.opts.Store)
	if err != nil {
		e.log.Error("cannot list run-time mirrors in the state store; they start at the next reload", "error", err)
		return
	}
	// Mirrors created through the admin API first: a failback mirror of
	// one takes its settings from it.
	slices.SortStableFunc(recorded, func(a, b runtimemirror.Recorded) int {
		return cmp.Compare(boolInt(a.Spec.FailbackOf != ""), boolInt(b.Spec.FailbackOf != ""))
	})
	for _, r := range recorded {
		if e.mirrors[r.Name] != nil {
			continue
		}
		if r.Err != nil {
			e.log.Error("unreadable run-time mirror record; not started", "mirror", r.Name, "error", r.Err)
			continue
		}
		if err := e.startRuntime(r.Name, r.Spec); err != nil {
			e.log.Error("run-time mirror not started", "mirror", r.Name, "error", err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

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
	spec := runtimemirror.Spec{Config: string(settings)}
	if old, ok, err := runtimemirror.Get(ctx, e.opts.Store, name); err == nil {
		if ok && old.Config == spec.Config && e.mirrors[name] != nil {
			return admin.OpResult{Mirror: name, Message: "mirror " + name + " exists with these settings"}, nil
		}
		return admin.OpResult{}, fmt.Errorf("%w: a run-time mirror named %s exists with other settings; delete it first", admin.ErrConflict, name)
	} else if !errors.Is(err, statestore.ErrNotFound) {
		return admin.OpResult{}, fmt.Errorf("reading run-time mirror %s: %w", name, err)
	}
	if err := runtimemirror.Put(ctx, e.opts.Store, name, spec, statestore.Absent); err != nil {
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
// destination topics are kept. A mirror that does not exist (neither
// running nor recorded) is ErrNoMirror: a misspelt name is not "deleted".
func (e *Engine) DeleteMirror(ctx context.Context, name string) (admin.OpResult, error) {
	m, _, err := e.deletable(ctx, name)
	if err != nil {
		return admin.OpResult{}, err
	}
	if m != nil {
		e.mu.Lock()
		delete(e.mirrors, name)
		e.mu.Unlock()
		m.Stop(ctx)
	}
	// Its spec goes last (runtimemirror.Delete).
	if err := runtimemirror.Delete(ctx, e.opts.Store, name); err != nil {
		return admin.OpResult{}, err
	}
	e.ctlMu.Lock()
	delete(e.controls, name)
	e.ctlMu.Unlock()
	e.log.Info("run-time mirror deleted", "mirror", name)
	return admin.OpResult{Mirror: name, Message: "mirror " + name + " deleted; its destination topics are kept"}, nil
}

// deletable runs DeleteMirror's checks, changing nothing: it returns the
// running mirror (nil if it does not run) and its partition records.
func (e *Engine) deletable(ctx context.Context, name string) (*supervisor.Mirror, []*partition.Partition, error) {
	// The name is a prefix of state store keys: "dc1/partitions" would
	// name part of mirror dc1's state.
	if err := config.CheckMirrorName(name); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", admin.ErrInvalidRequest, err)
	}
	e.mu.Lock()
	if _, declared := e.cfg.Mirror(name); declared {
		e.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: mirror %s is declared in the configuration file; remove it there (and reload)", admin.ErrConflict, name)
	}
	m := e.mirrors[name]
	e.mu.Unlock()
	parts, err := e.machine.LoadMirror(ctx, name)
	if err != nil && len(parts) == 0 {
		return nil, nil, fmt.Errorf("%w: mirror %s: loading partition states: %v", admin.ErrUnavailable, name, err)
	}
	if m == nil && len(parts) == 0 {
		_, recorded, err := runtimemirror.Get(ctx, e.opts.Store, name)
		if err != nil && !errors.Is(err, statestore.ErrNotFound) {
			return nil, nil, fmt.Errorf("%w: reading run-time mirror %s: %v", admin.ErrUnavailable, name, err)
		}
		if !recorded {
			return nil, nil, fmt.Errorf("%w %q in this daemon: it is neither running nor recorded, so there is nothing to delete", admin.ErrNoMirror, name)
		}
	}
	for _, p := range parts {
		if st := p.State(); st != partition.Stopped {
			return nil, nil, fmt.Errorf("%w: mirror %s: %s/%d is %s; stop its topics first (kmirror mirrors stop --mirror %s --topics '.*', or kmirror failover --mirror %s)",
				admin.ErrConflict, name, p.Record().Topic, p.Record().Partition, st, name, name)
		}
	}
	return m, parts, nil
}
