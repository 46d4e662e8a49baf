package mirror

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/core/runtimemirror"
	"github.com/kmirror/kmirror/core/supervisor"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Failback starts (or completes) the reverse mirror of a failed-over
// mirror; core/failback's package comment has the rules. It is idempotent: a
// repeated request keeps what was decided and done, and a request with
// AllowRecreate realigns the partitions a previous one left FAILED.
func (e *Engine) Failback(ctx context.Context, req admin.FailbackOrder) (admin.FailbackResult, error) {
	m, err := e.failbackable(req.Mirror)
	if err != nil {
		return admin.FailbackResult{}, err
	}
	suffix := req.SideTopicSuffix
	if suffix == "" {
		suffix = failback.DefaultSideSuffix
	}
	name := failback.Name(m.Name())
	out := admin.FailbackResult{Mirror: name, Of: m.Name()}
	topics, byTopic, err := failback.FailedOver(ctx, e.machine, e.controlOf(m.Name()).Stopped, m.Name())
	if err != nil {
		return out, err
	}

	// The reverse mirror must not run while its partitions are decided.
	e.mu.Lock()
	if rm := e.mirrors[name]; rm != nil {
		delete(e.mirrors, name)
		e.mu.Unlock()
		rm.Stop(ctx)
	} else {
		e.mu.Unlock()
	}

	// A client of the old source (the reverse mirror's destination).
	old, err := e.oldSourceClient(ctx, m.Name())
	if err != nil {
		return out, err
	}
	defer old.Close()

	out.Topics, err = failback.Decide(ctx, failback.Params{
		Machine: e.machine, Mirror: m.Name(), Reverse: name, NewPrimary: m.Dest(),
		Old: old, OldAdmin: kadm.NewClient(old), SideSuffix: suffix, AllowRecreate: req.AllowRecreate,
	}, topics, byTopic)
	if err != nil {
		return out, err
	}

	// Record and start the reverse mirror.
	spec := runtimemirror.Spec{FailbackOf: m.Name(), Topics: topics}
	if err := runtimemirror.Put(ctx, e.opts.Store, name, spec, statestore.AnyVersion); err != nil {
		return out, fmt.Errorf("recording failback mirror %s: %w", name, err)
	}
	e.mu.Lock()
	err = e.startRuntime(name, spec)
	e.mu.Unlock()
	if err != nil {
		return out, err
	}
	m.Logger().Info("failback mirror started", "failback_mirror", name, "topics", topics)
	return out, nil
}

// failbackable returns mirror name if it can be failed back: a mirror of
// the configuration, or one created through the admin API, but not a
// failback mirror itself.
func (e *Engine) failbackable(name string) (*supervisor.Mirror, error) {
	m, err := e.runningMirror(name)
	if err != nil {
		return nil, err
	}
	if of := m.ReverseOf(); of != "" {
		return nil, fmt.Errorf("%w: %s is itself a failback mirror (of %s); to make the old source primary again, fail it over, then start mirror %s's topics",
			admin.ErrInvalidRequest, m.Name(), of, of)
	}
	return m, nil
}
