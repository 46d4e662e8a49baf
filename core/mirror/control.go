package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/core/failover"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
)

// Operator actions on a running mirror (the admin API and CLI call them):
// pause and resume, stop and start topics, failover. Each is idempotent and
// recorded in the state store before it takes effect, so that a daemon
// killed in the middle completes it when it starts again.

// controlOf returns the control record holder of mirror name.
func (e *Engine) controlOf(name string) *control.Holder {
	e.ctlMu.Lock()
	defer e.ctlMu.Unlock()
	c := e.controls[name]
	if c == nil {
		c = control.New(e.opts.Store, name)
		e.controls[name] = c
	}
	return c
}

// runningMirror returns the mirror called name.
func (e *Engine) runningMirror(name string) (*mirrorRun, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.mirrors[name]
	if m == nil {
		names := make([]string, 0, len(e.mirrors))
		for n := range e.mirrors {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w %q in this daemon (mirrors: %s)", admin.ErrNoMirror, name, strings.Join(names, ", "))
	}
	m.mu.Lock()
	connected := m.dp != nil
	m.mu.Unlock()
	if !connected {
		return nil, fmt.Errorf("%w: mirror %s has not connected to its clusters yet (see describe for why); retry when it has", admin.ErrConflict, name)
	}
	return m, nil
}

// runnersOf returns the mirror's runners whose topic match selects.
func (m *mirrorRun) runnersOf(match func(string) bool) []*runner.Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*runner.Runner
	for _, r := range m.runners {
		if match(r.Topic()) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *runner.Runner) int {
		if c := strings.Compare(a.Topic(), b.Topic()); c != 0 {
			return c
		}
		return int(a.Partition() - b.Partition())
	})
	return out
}

// operated returns the mirror as the operators' actions see it
// (core/control).
func (m *mirrorRun) operated() control.Mirror {
	return control.Mirror{Name: m.name, Log: m.log, Rules: m.e.controlOf(m.name), Runners: m.runnersOf,
		LaunchRecorded: m.launchRecorded, TriggerSync: m.triggerSync,
		InScope:   func(t string) bool { return inScope(&m.cfg, t) },
		NoReverse: func(rs []*runner.Runner) error { return m.e.checkNoReverse(m, rs) }}
}

// Pause stops fetching the topics matching the patterns (all topics when
// none) and keeps their resume points and open destination transactions;
// the topics stay read-only. Partitions that are not MIRRORING now pause
// when they get there. It returns once no matching partition is MIRRORING.
func (e *Engine) Pause(ctx context.Context, mirrorName string, topics []string) (admin.OpResult, error) {
	return e.setPaused(ctx, mirrorName, topics, true)
}

// Resume continues the paused topics matching the patterns (with none,
// every paused topic) from where they stopped, with no gap. The latest
// request wins: resuming "orders" after pausing ".*" resumes orders only.
func (e *Engine) Resume(ctx context.Context, mirrorName string, topics []string) (admin.OpResult, error) {
	return e.setPaused(ctx, mirrorName, topics, false)
}

// setPaused records a pause (or resume) rule, wakes the matching runners and
// waits until none of them is in the state it leaves.
func (e *Engine) setPaused(ctx context.Context, mirrorName string, topics []string, pause bool) (admin.OpResult, error) {
	m, err := e.runningMirror(mirrorName)
	if err != nil {
		return admin.OpResult{}, err
	}
	return control.SetPaused(ctx, m.operated(), topics, pause)
}

// StopTopics stops mirroring the topics matching the patterns: their
// partitions go through STOPPING (fetchers removed, open destination
// transactions aborted, last mirrored offset recorded) to STOPPED, and the
// destination topics become writable. The request is recorded first, so a
// restart completes it; topics matching later are not mirrored either. It
// returns once every matching partition is STOPPED.
func (e *Engine) StopTopics(ctx context.Context, mirrorName string, topics []string) (admin.OpResult, error) {
	m, err := e.runningMirror(mirrorName)
	if err != nil {
		return admin.OpResult{}, err
	}
	return control.Stop(ctx, m.operated(), topics)
}

// launchRecorded starts runners for recorded partitions of matching topics
// that have none yet (after a restart, before the topics loop ran), so that
// an operator's request reaches them.
func (m *mirrorRun) launchRecorded(ctx context.Context, match func(string) bool) error {
	parts, err := m.e.machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	for _, p := range parts {
		rec := p.Record()
		if !match(rec.Topic) {
			continue
		}
		tp := topicPartition{rec.Topic, rec.Partition}
		m.mu.Lock()
		_, running := m.runners[tp]
		m.mu.Unlock()
		if !running {
			var id [16]byte
			if rec.SourceTopicID != "" {
				id, _ = parseTopicID(rec.SourceTopicID)
			}
			m.launch(tp, runnerFor(m, sourceTopic{Name: rec.Topic, ID: id}, p))
		}
	}
	return nil
}

// StartTopics starts the stopped topics matching the patterns again,
// except those matching exclude (left as they are): each STOPPED partition
// goes through PREPARING, resuming from the destination. The latest request
// wins: starting "orders" after a failover of every topic starts orders
// only. Only topics within the mirror's configured scope can start.
func (e *Engine) StartTopics(ctx context.Context, mirrorName string, topics, exclude []string) (admin.OpResult, error) {
	m, err := e.runningMirror(mirrorName)
	if err != nil {
		return admin.OpResult{}, err
	}
	return control.Start(ctx, m.operated(), topics, exclude)
}

// withoutStopped drops the topics an operator stopped from a topics round,
// and makes sure their recorded partitions have runners (which keep them
// STOPPED and show them in describe).
func (m *mirrorRun) withoutStopped(ctx context.Context, topics []sourceTopic) ([]sourceTopic, error) {
	c := m.e.controlOf(m.name)
	var kept []sourceTopic
	stopped := map[string]bool{}
	for _, t := range topics {
		s, err := c.Stopped(ctx, t.Name)
		if err != nil {
			return nil, err
		}
		if s {
			stopped[t.Name] = true
		} else {
			kept = append(kept, t)
		}
	}
	if len(stopped) > 0 {
		if err := m.launchRecorded(ctx, func(t string) bool { return stopped[t] }); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// Failover fails the mirror's topics matching req.Topics (all when none)
// over to the destination (core/failover): optionally it waits until they
// have no lag (planned failover), runs a last group offset sync and ACL
// sync, then stops them (StopTopics): fetchers removed, open destination
// transactions aborted, last mirrored offsets recorded, read-only ACLs
// removed. It returns once every matching partition is STOPPED, with where
// each stopped and the groups whose offsets were synced.
//
// It is idempotent: the stop is recorded before it takes effect, so a
// daemon killed in the middle completes it when it starts, and the same
// request repeated returns the same result. In a planned failover a failed
// last sync stops the failover (nothing changed); otherwise (the source may
// be gone) it is reported in Warnings and the failover goes on.
func (e *Engine) Failover(ctx context.Context, req admin.FailoverOrder) (admin.FailoverResult, error) {
	m, err := e.runningMirror(req.Mirror)
	if err != nil {
		return admin.FailoverResult{}, err
	}
	pats, res, err := control.Patterns(req.Topics)
	if err != nil {
		return admin.FailoverResult{}, err
	}
	m.mu.Lock()
	gs, as := m.groups, m.acls
	m.mu.Unlock()
	cm := m.operated()
	fm := failover.Mirror{Name: m.name, Log: m.log, Groups: gs, ACLs: as, SyncReadOnly: m.syncReadOnly,
		Stop: func(ctx context.Context, topics []string) ([]runner.Status, error) {
			return control.StopTopics(ctx, cm, topics)
		},
		Wait: func(ctx context.Context, what string, match func(string) bool, done func(runner.Status) bool) ([]runner.Status, error) {
			return control.Wait(ctx, cm, what, match, func(_ *runner.Runner, st runner.Status) bool { return done(st) })
		}}
	return failover.Run(ctx, fm, pats, func(t string) bool { return control.MatchAny(res, t) }, req.WaitForCatchUp)
}

// checkNoReverse refuses to start topics that the mirror in the other
// direction still mirrors (a failback mirror and the mirror it reverses):
// the two would copy into each other.
func (e *Engine) checkNoReverse(m *mirrorRun, rs []*runner.Runner) error {
	other := failback.Name(m.name)
	if m.runtime {
		other = strings.TrimSuffix(m.name, "-failback")
	}
	e.mu.Lock()
	om := e.mirrors[other]
	e.mu.Unlock()
	if om == nil {
		return nil
	}
	for _, r := range rs {
		for _, or := range om.runnersOf(func(t string) bool { return t == r.Topic() }) {
			if st := or.Record().State; st != partition.Stopped {
				return fmt.Errorf("%w: mirror %s still mirrors %s/%d the other way (%s); fail it over first (kmirror failover --mirror %s)",
					admin.ErrConflict, other, r.Topic(), or.Partition(), st, other)
			}
		}
	}
	return nil
}
