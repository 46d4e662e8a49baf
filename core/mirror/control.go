package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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

// waitRunners polls the runners selected by match until done holds for
// every one of them, or ctx ends; it returns their status.
func (m *mirrorRun) waitRunners(ctx context.Context, what string, match func(string) bool, done func(*runner.Runner, admin.PartitionStatus) bool) ([]admin.PartitionStatus, error) {
	for {
		var (
			out     []admin.PartitionStatus
			pending []string
		)
		for _, r := range m.runnersOf(match) {
			st := r.Status()
			out = append(out, st)
			if !done(r, st) {
				pending = append(pending, fmt.Sprintf("%s/%d is %s", st.Topic, st.Partition, st.State))
			}
		}
		if len(pending) == 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("mirror %s: %s: still waiting for %s: %w", m.name, what, strings.Join(pending, ", "), context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
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
	pats, res, err := control.Patterns(topics)
	if err != nil {
		return admin.OpResult{}, err
	}
	if err := e.controlOf(m.name).Pause(ctx, pats, pause); err != nil {
		return admin.OpResult{}, err
	}
	match := func(t string) bool { return control.MatchAny(res, t) }
	for _, r := range m.runnersOf(match) {
		r.Poke()
	}
	verb, doing, leaving := "resumed", "resuming", partition.Paused.String()
	if pause {
		verb, doing, leaving = "paused", "pausing", partition.Mirroring.String()
	}
	m.log.Info("operator "+verb+" topics", "topics", pats)
	parts, err := m.waitRunners(ctx, doing, match, func(_ *runner.Runner, st admin.PartitionStatus) bool { return st.State != leaving })
	return admin.OpResult{Mirror: m.name, Message: fmt.Sprintf("%s topics matching %s", verb, strings.Join(pats, ", ")), Partitions: parts}, err
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
	if len(topics) == 0 {
		return admin.OpResult{}, fmt.Errorf("%w: name the topics to stop (regexes; \".*\" for all)", admin.ErrInvalidRequest)
	}
	parts, err := m.stopTopics(ctx, topics)
	return admin.OpResult{Mirror: m.name, Message: fmt.Sprintf("stopped topics matching %s", strings.Join(topics, ", ")), Partitions: parts}, err
}

func (m *mirrorRun) stopTopics(ctx context.Context, topics []string) ([]admin.PartitionStatus, error) {
	pats, res, err := control.Patterns(topics)
	if err != nil {
		return nil, err
	}
	if err := m.e.controlOf(m.name).Stop(ctx, pats); err != nil {
		return nil, err
	}
	match := func(t string) bool { return control.MatchAny(res, t) }
	m.log.Info("operator stopped topics", "topics", pats)
	if err := m.launchRecorded(ctx, match); err != nil {
		return nil, err
	}
	for _, r := range m.runnersOf(match) {
		r.RequestStop(runner.ReasonStopped)
	}
	m.triggerSync()
	return m.waitRunners(ctx, "stopping", match, func(r *runner.Runner, st admin.PartitionStatus) bool {
		// A partition still PREPARING has nothing mirrored and nothing to
		// stop: it stays PREPARING until it is started again.
		return st.State == partition.Stopped.String() || st.State == partition.Preparing.String()
	})
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
	if len(topics) == 0 {
		return admin.OpResult{}, fmt.Errorf("%w: name the topics to start (regexes; \".*\" for all)", admin.ErrInvalidRequest)
	}
	_, res, err := control.Patterns(topics)
	if err != nil {
		return admin.OpResult{}, err
	}
	exc, err := control.Compile(exclude)
	if err != nil {
		return admin.OpResult{}, err
	}
	match := func(t string) bool { return control.MatchAny(res, t) && !control.MatchAny(exc, t) }
	if err := m.launchRecorded(ctx, match); err != nil {
		return admin.OpResult{}, err
	}
	rs := m.runnersOf(match)
	if err := e.checkNoReverse(m, rs); err != nil {
		return admin.OpResult{}, err
	}
	for _, r := range rs {
		if !inScope(&m.cfg, r.Topic()) {
			return admin.OpResult{}, fmt.Errorf("%w: topic %s is outside mirror %s's mirror.topics.include/exclude; change the configuration to mirror it", admin.ErrConflict, r.Topic(), m.name)
		}
	}
	if err := e.controlOf(m.name).Start(ctx, topics, exclude); err != nil {
		return admin.OpResult{}, err
	}
	for _, r := range rs {
		r.RequestStart()
	}
	m.log.Info("operator started topics", "topics", topics, "exclude", exclude)
	m.triggerSync()
	parts, err := m.waitRunners(ctx, "starting", match, func(_ *runner.Runner, st admin.PartitionStatus) bool { return st.State != partition.Stopped.String() })
	return admin.OpResult{Mirror: m.name, Message: fmt.Sprintf("started topics matching %s", strings.Join(topics, ", ")), Partitions: parts}, err
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
	fm := failover.Mirror{Name: m.name, Log: m.log, Groups: gs, ACLs: as, Stop: m.stopTopics, SyncReadOnly: m.syncReadOnly,
		Wait: func(ctx context.Context, what string, match func(string) bool, done func(runner.Status) bool) ([]runner.Status, error) {
			return m.waitRunners(ctx, what, match, func(_ *runner.Runner, st admin.PartitionStatus) bool { return done(st) })
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
