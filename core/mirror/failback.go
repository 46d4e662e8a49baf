package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Failback: after a failover of mirror M (source A → destination B), B is
// the primary and takes writes. Failback starts the reverse mirror
// "<M>-failback" from B to A for M's failed-over topics, so that A catches
// up with what was written to B, offsets preserved, and can become the
// primary again (fail the reverse mirror over, then start M's topics).
//
// Per partition, with L the last source offset M mirrored:
//   - A ends at L+1: the reverse mirror continues from there (preserve
//     mode), copying only what B got after the failover;
//   - A holds records beyond L+1 (written to A but never mirrored, as in an
//     unplanned failover): the committed ones are first copied to a side
//     topic on A (<topic>.kmirror-diverged by default) so nothing is lost;
//     then, with AllowRecreate, the topic is deleted on A and mirrored back
//     from B from scratch (offsets preserved); without it, the partition is
//     FAILED with a reason that says so;
//   - A ends before L+1 (it lost records), or M ran the partition in map
//     mode (offsets differ between the clusters): like divergence, only
//     AllowRecreate realigns it.
//
// The reverse mirror is a run-time mirror: it is recorded in the state
// store (no secret: its clusters are the daemon's destination and M's
// source, read from the configuration at start) and survives restarts.

// runtimeSpec is a mirror created at run time, kept in the state store:
// either a failback mirror (FailbackOf, Topics) or one an operator created
// (Config). It never holds a secret.
type runtimeSpec struct {
	// FailbackOf names the mirror this one reverses.
	FailbackOf string `json:"failback_of,omitempty"`
	// Topics are the topics it mirrors back (exact names).
	Topics []string `json:"topics,omitempty"`
	// Config holds an operator-created mirror's settings (YAML, the keys
	// of one entry of mirrors:, secrets only as file references).
	Config string `json:"config,omitempty"`
}

func specKey(mirror string) string { return statestore.MirrorPrefix(mirror) + "spec" }

// startRuntime starts a recorded run-time mirror; e.mu must be held.
func (e *Engine) startRuntime(name string, spec runtimeSpec) error {
	if spec.FailbackOf == "" {
		mc, err := config.ParseMirror([]byte(spec.Config), name)
		if err != nil {
			return err
		}
		if _, clash := e.cfg.Mirror(name); clash {
			return fmt.Errorf("the configuration now declares a mirror named %s, like the run-time mirror of that name; delete one of them", name)
		}
		m := newMirrorRun(e, e.cfg, mc)
		m.runtime = true
		e.mirrors[name] = m
		m.start()
		return nil
	}
	of, ok := e.cfg.Mirror(spec.FailbackOf)
	if !ok {
		return fmt.Errorf("failback mirror %s reverses mirror %s, which is no longer in the configuration; restore it, or delete %s", name, spec.FailbackOf, name)
	}
	if _, clash := e.cfg.Mirror(name); clash {
		return fmt.Errorf("the configuration has a mirror named %s, the name of mirror %s's failback mirror; rename it", name, spec.FailbackOf)
	}
	mc, err := failback.ReverseConfig(e.cfg, *of, name, spec.Topics)
	if err != nil {
		return err
	}
	m := newMirrorRun(e, e.cfg, mc)
	dst := of.Source
	m.dst, m.dstAdm, m.dstCfg, m.dstID, m.runtime, m.reverseOf = nil, nil, &dst, "mirror-source:"+of.Name, true, of.Name
	e.mirrors[name] = m
	m.start()
	return nil
}

// startRecordedRuntime starts every run-time mirror recorded in the state
// store; e.mu must be held. A mirror that cannot start is logged and left
// recorded.
func (e *Engine) startRecordedRuntime(ctx context.Context) {
	root := strings.TrimSuffix(statestore.MirrorPrefix(""), "/") // "mirrors/"
	entries, err := e.opts.Store.List(ctx, root)
	if err != nil {
		e.log.Error("cannot list run-time mirrors in the state store; they start at the next reload", "error", err)
		return
	}
	for _, ent := range entries {
		name, ok := strings.CutSuffix(strings.TrimPrefix(ent.Key, root), "/spec")
		if !ok || strings.Contains(name, "/") || e.mirrors[name] != nil {
			continue
		}
		var spec runtimeSpec
		if err := json.Unmarshal(ent.Value, &spec); err != nil {
			e.log.Error("unreadable run-time mirror record; not started", "mirror", name, "error", err)
			continue
		}
		if err := e.startRuntime(name, spec); err != nil {
			e.log.Error("run-time mirror not started", "mirror", name, "error", err)
		}
	}
}

// Failback starts (or completes) the reverse mirror of a failed-over
// mirror; see the comment at the top of this file. It is idempotent: a
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
	b, err := json.Marshal(runtimeSpec{FailbackOf: m.name, Topics: topics})
	if err != nil {
		return out, err
	}
	if _, err := e.opts.Store.Put(ctx, specKey(name), b, statestore.AnyVersion); err != nil {
		return out, fmt.Errorf("recording failback mirror %s: %w", name, err)
	}
	e.mu.Lock()
	err = e.startRuntime(name, runtimeSpec{FailbackOf: m.name, Topics: topics})
	e.mu.Unlock()
	if err != nil {
		return out, err
	}
	m.log.Info("failback mirror started", "failback_mirror", name, "topics", topics)
	return out, nil
}
