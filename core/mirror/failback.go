package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/core/runtimemirror"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Failback starts (or completes) the reverse mirror of a failed-over
// mirror; core/failback's package comment has the rules. It is idempotent: a
// repeated request keeps what was decided and done, and a request with
// AllowRecreate realigns the partitions a previous one left FAILED.
func (e *Engine) Failback(ctx context.Context, req admin.FailbackOrder) (admin.FailbackResult, error) {
	m, err := e.runningMirror(req.Mirror)
	if err != nil {
		return admin.FailbackResult{}, err
	}
	if m.runtime {
		return admin.FailbackResult{}, fmt.Errorf("%w: %s is itself a failback mirror; to make the old source primary again, fail it over, then start mirror %s's topics",
			admin.ErrInvalidRequest, m.name, strings.TrimSuffix(m.name, "-failback"))
	}
	suffix := req.SideTopicSuffix
	if suffix == "" {
		suffix = failback.DefaultSideSuffix
	}
	name := failback.Name(m.name)
	out := admin.FailbackResult{Mirror: name, Of: m.name}
	topics, byTopic, err := failback.FailedOver(ctx, e.machine, e.controlOf(m.name).Stopped, m.name)
	if err != nil {
		return out, err
	}

	// The reverse mirror must not run while its partitions are decided.
	e.mu.Lock()
	if rm := e.mirrors[name]; rm != nil {
		delete(e.mirrors, name)
		e.mu.Unlock()
		rm.stop(ctx)
	} else {
		e.mu.Unlock()
	}

	// A client of the old source (the reverse mirror's destination).
	opts, err := clientOpts(m.dcfg, &m.cfg.Source, "destination")
	if err != nil {
		return out, err
	}
	old, err := kgo.NewClient(append(opts, kgo.ClientID(clientID(m.cfg.Source.ClientID, "failback-"+m.name)))...)
	if err != nil {
		return out, fmt.Errorf("mirror %s: old source cluster: %w", m.name, err)
	}
	defer old.Close()

	out.Topics, err = failback.Decide(ctx, failback.Params{
		Machine: e.machine, Mirror: m.name, Reverse: name, NewPrimary: m.dst,
		Old: old, OldAdmin: kadm.NewClient(old), SideSuffix: suffix, AllowRecreate: req.AllowRecreate,
	}, topics, byTopic)
	if err != nil {
		return out, err
	}

	// Record and start the reverse mirror.
	spec := runtimemirror.Spec{FailbackOf: m.name, Topics: topics}
	if err := runtimemirror.Put(ctx, e.opts.Store, name, spec, statestore.AnyVersion); err != nil {
		return out, fmt.Errorf("recording failback mirror %s: %w", name, err)
	}
	e.mu.Lock()
	err = e.startRuntime(name, spec)
	e.mu.Unlock()
	if err != nil {
		return out, err
	}
	m.log.Info("failback mirror started", "failback_mirror", name, "topics", topics)
	return out, nil
}
