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
	"github.com/kmirror/kmirror/core/supervisor"
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
func (e *Engine) runningMirror(name string) (*supervisor.Mirror, error) {
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
	if !m.Connected() {
		return nil, fmt.Errorf("%w: mirror %s has not connected to its clusters yet (describe says why); retry when it has", admin.ErrUnavailable, name)
	}
	return m, nil
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
	return control.SetPaused(ctx, m.Operated(), topics, pause)
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
	return control.Stop(ctx, m.Operated(), topics)
}

// ResetTopics forgets the FAILED partitions of the topics matching the
// patterns (control.Reset): their records and offset maps are deleted and
// the next topics round starts them again from the source's log start.
func (e *Engine) ResetTopics(ctx context.Context, mirrorName string, topics []string) (admin.OpResult, error) {
	m, err := e.runningMirror(mirrorName)
	if err != nil {
		return admin.OpResult{}, err
	}
	return control.Reset(ctx, m.Operated(), topics)
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
	return control.Start(ctx, m.Operated(), topics, exclude)
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
	cm := m.Operated()
	if err := control.CheckMatches(ctx, cm, req.Topics); err != nil {
		return admin.FailoverResult{}, err
	}
	gs, as := m.Syncers()
	fm := failover.Mirror{Name: m.Name(), Log: m.Logger(), Groups: gs, ACLs: as, SyncReadOnly: m.SyncReadOnly,
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
func (e *Engine) checkNoReverse(m *supervisor.Mirror, rs []*runner.Runner) error {
	other := failback.Name(m.Name())
	if of := m.ReverseOf(); of != "" {
		other = of
	}
	e.mu.Lock()
	om := e.mirrors[other]
	e.mu.Unlock()
	if om == nil {
		return nil
	}
	for _, r := range rs {
		for _, or := range om.RunnersOf(func(t string) bool { return t == r.Topic() }) {
			if st := or.Record().State; st != partition.Stopped {
				return fmt.Errorf("%w: mirror %s still mirrors %s/%d the other way (%s); fail it over first (kmirror failover --mirror %s)",
					admin.ErrConflict, other, r.Topic(), or.Partition(), st, other)
			}
		}
	}
	return nil
}
