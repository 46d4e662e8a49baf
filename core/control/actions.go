package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
)

// The operators' actions on a running mirror: pause and resume, stop and
// start topics. Each records its rule before it takes effect (so that a
// daemon killed in the middle completes it when it starts again), wakes
// the mirror's runners of the matching topics and waits until they are
// where the action takes them. core/mirror's Engine finds the mirror and
// gives it here as a Mirror.

// Result is the outcome of an operator action: what it did, and the
// affected partitions' status afterwards.
type Result struct {
	Mirror     string          `json:"mirror"`
	Message    string          `json:"message"`
	Partitions []runner.Status `json:"partitions"`
}

// Mirror is the running mirror an action acts on.
type Mirror struct {
	Name  string
	Log   hclog.Logger
	Rules *Holder
	// Runners returns the mirror's runners whose topic match selects,
	// sorted by topic and partition.
	Runners func(match func(string) bool) []*runner.Runner
	// LaunchRecorded starts runners for the recorded partitions of
	// matching topics that have none yet (after a restart, before the
	// topics loop ran), so that an action reaches them.
	LaunchRecorded func(ctx context.Context, match func(string) bool) error
	// TriggerSync asks the mirror's sync loops for a round now.
	TriggerSync func()
	// InScope reports whether a topic is within the mirror's configured
	// scope; only those can start.
	InScope func(topic string) bool
	// NoReverse refuses to start runners whose topics the mirror in the
	// other direction still mirrors (a failback mirror and the mirror it
	// reverses would copy into each other).
	NoReverse func(rs []*runner.Runner) error
	// Forget ends r's runner, deletes the partition's offset map and
	// record (runner.Runner.Forget) and drops the runner: the mirror's
	// next topics round starts the partition again as a new one. On an
	// error the runner keeps running with its record.
	Forget func(ctx context.Context, r *runner.Runner) error
	// StatusOf is a runner's status as the mirror shows it (its lag
	// corrected with what the mirror knows of the source); nil: the
	// runner's own. Wait uses it, so that a wait for catch-up never takes a
	// stale end offset for "caught up".
	StatusOf func(*runner.Runner) runner.Status
	// Topics returns the topics the mirror knows, sorted: those with a
	// runner or a recorded partition. A request's patterns must each
	// match one of them (CheckMatches).
	Topics func(ctx context.Context) ([]string, error)
}

// CheckMatches refuses (ErrNoMatch) topic patterns of which one matches
// no topic the mirror knows, naming every such pattern, before anything
// is recorded: a misspelt pattern would otherwise leave a rule behind that
// silently applies to topics created later. No patterns (every topic) is
// always accepted.
func CheckMatches(ctx context.Context, m Mirror, patterns []string) error {
	if len(patterns) == 0 || m.Topics == nil {
		return nil
	}
	res, err := Compile(patterns)
	if err != nil {
		return err
	}
	known, err := m.Topics(ctx)
	if err != nil {
		return err
	}
	var none []string
	for i, re := range res {
		if !slices.ContainsFunc(known, re.MatchString) {
			none = append(none, fmt.Sprintf("%q", patterns[i]))
		}
	}
	if len(none) == 0 {
		return nil
	}
	shown := known
	const maxShown = 10
	more := ""
	if len(shown) > maxShown {
		shown, more = shown[:maxShown], fmt.Sprintf(" and %d more", len(known)-maxShown)
	}
	what := "it has no topic yet"
	if len(known) > 0 {
		what = "its topics: " + strings.Join(shown, ", ") + more
	}
	return fmt.Errorf("%w: mirror %s: topic pattern %s matches no topic of the mirror (%s); patterns are regexes matched against whole topic names; nothing was recorded",
		ErrNoMatch, m.Name, strings.Join(none, ", "), what)
}

// Wait polls the runners selected by match until done holds for every one
// of them, or ctx ends; it returns their status.
func Wait(ctx context.Context, m Mirror, what string, match func(string) bool, done func(*runner.Runner, runner.Status) bool) ([]runner.Status, error) {
	for {
		var (
			out     []runner.Status
			pending []string
		)
		for _, r := range m.Runners(match) {
			st := m.statusOf(r)
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
			return out, fmt.Errorf("mirror %s: %s: still waiting for %s: %w", m.Name, what, strings.Join(pending, ", "), context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// statusOf is r's status through StatusOf, or r's own.
func (m Mirror) statusOf(r *runner.Runner) runner.Status {
	if m.StatusOf != nil {
		return m.StatusOf(r)
	}
	return r.Status()
}

// SetPaused records a pause (or resume) rule for the topics matching the
// patterns (all topics when none), wakes the matching runners and waits
// until none of them is in the state it leaves.
func SetPaused(ctx context.Context, m Mirror, topics []string, pause bool) (Result, error) {
	pats, res, err := Patterns(topics)
	if err != nil {
		return Result{}, err
	}
	if err := CheckMatches(ctx, m, topics); err != nil {
		return Result{}, err
	}
	if err := m.Rules.Pause(ctx, pats, pause); err != nil {
		return Result{}, err
	}
	match := func(t string) bool { return MatchAny(res, t) }
	for _, r := range m.Runners(match) {
		r.Poke()
	}
	verb, doing, leaving := "resumed", "resuming", partition.Paused.String()
	if pause {
		verb, doing, leaving = "paused", "pausing", partition.Mirroring.String()
	}
	m.Log.Info("operator "+verb+" topics", "topics", pats)
	parts, err := Wait(ctx, m, doing, match, func(_ *runner.Runner, st runner.Status) bool { return st.State != leaving })
	return Result{Mirror: m.Name, Message: fmt.Sprintf("%s topics matching %s", verb, strings.Join(pats, ", ")), Partitions: parts}, err
}

// Stop stops mirroring the topics matching the patterns (at least one is
// required; ".*" for all) with StopTopics.
func Stop(ctx context.Context, m Mirror, topics []string) (Result, error) {
	if len(topics) == 0 {
		return Result{}, fmt.Errorf("%w: name the topics to stop (regexes; \".*\" for all)", ErrInvalidRequest)
	}
	if err := CheckMatches(ctx, m, topics); err != nil {
		return Result{}, err
	}
	parts, err := StopTopics(ctx, m, topics)
	return Result{Mirror: m.Name, Message: fmt.Sprintf("stopped topics matching %s", strings.Join(topics, ", ")), Partitions: parts}, err
}

// StopTopics records a stop rule for the topics matching the patterns
// (all topics when none), asks their runners to stop, and returns once
// every matching partition is STOPPED (or still PREPARING).
func StopTopics(ctx context.Context, m Mirror, topics []string) ([]runner.Status, error) {
	pats, res, err := Patterns(topics)
	if err != nil {
		return nil, err
	}
	if err := m.Rules.Stop(ctx, pats); err != nil {
		return nil, err
	}
	match := func(t string) bool { return MatchAny(res, t) }
	m.Log.Info("operator stopped topics", "topics", pats)
	if err := m.LaunchRecorded(ctx, match); err != nil {
		return nil, err
	}
	for _, r := range m.Runners(match) {
		r.RequestStop(runner.ReasonStopped)
	}
	m.TriggerSync()
	return Wait(ctx, m, "stopping", match, func(r *runner.Runner, st runner.Status) bool {
		// A partition still PREPARING has nothing mirrored and nothing to
		// stop: it stays PREPARING until it is started again.
		return st.State == partition.Stopped.String() || st.State == partition.Preparing.String()
	})
}

// Start starts the stopped topics matching the patterns again (at least
// one is required), except those matching exclude, records a start rule,
// and returns once no matching partition is STOPPED.
func Start(ctx context.Context, m Mirror, topics, exclude []string) (Result, error) {
	if len(topics) == 0 {
		return Result{}, fmt.Errorf("%w: name the topics to start (regexes; \".*\" for all)", ErrInvalidRequest)
	}
	_, res, err := Patterns(topics)
	if err != nil {
		return Result{}, err
	}
	exc, err := Compile(exclude)
	if err != nil {
		return Result{}, err
	}
	if err := CheckMatches(ctx, m, topics); err != nil {
		return Result{}, err
	}
	match := func(t string) bool { return MatchAny(res, t) && !MatchAny(exc, t) }
	if err := m.LaunchRecorded(ctx, match); err != nil {
		return Result{}, err
	}
	rs := m.Runners(match)
	if err := m.NoReverse(rs); err != nil {
		return Result{}, err
	}
	for _, r := range rs {
		if !m.InScope(r.Topic()) {
			return Result{}, fmt.Errorf("%w: topic %s is outside mirror %s's mirror.topics.include/exclude; change the configuration to mirror it", ErrConflict, r.Topic(), m.Name)
		}
	}
	if err := m.Rules.Start(ctx, topics, exclude); err != nil {
		return Result{}, err
	}
	for _, r := range rs {
		r.RequestStart()
	}
	m.Log.Info("operator started topics", "topics", topics, "exclude", exclude)
	m.TriggerSync()
	parts, err := Wait(ctx, m, "starting", match, func(_ *runner.Runner, st runner.Status) bool { return st.State != partition.Stopped.String() })
	return Result{Mirror: m.Name, Message: fmt.Sprintf("started topics matching %s", strings.Join(topics, ", ")), Partitions: parts}, err
}

// resetWait bounds how long Reset waits for the partitions it reset to be
// started again by a topics round.
const resetWait = 30 * time.Second

// Reset forgets the FAILED partitions of the topics matching the patterns
// (at least one is required; ".*" for all): each runner is ended, the
// partition's offset map and record are deleted (Mirror.Forget), and a
// topics round is asked for, which starts the partition again as a new
// one: from the source's log start, into an empty destination partition
// (creating the destination topic if it is missing). A destination
// partition that still holds records fails it again ("already holds
// offsets"): kmirror never merges into them. Partitions in any other state
// are left alone and named in the message; if no matching partition is
// FAILED, the request is refused (ErrConflict) with nothing changed.
//
// It returns once every reset partition runs again, or after resetWait
// (the topics round may be another daemon's, or slow): the reset is done
// either way, and the message says which.
func Reset(ctx context.Context, m Mirror, topics []string) (Result, error) {
	if len(topics) == 0 {
		return Result{}, fmt.Errorf("%w: name the topics to reset (regexes; \".*\" for all)", ErrInvalidRequest)
	}
	pats, res, err := Patterns(topics)
	if err != nil {
		return Result{}, err
	}
	if err := CheckMatches(ctx, m, topics); err != nil {
		return Result{}, err
	}
	match := func(t string) bool { return MatchAny(res, t) }
	if err := m.LaunchRecorded(ctx, match); err != nil {
		return Result{}, err
	}
	var (
		failed []*runner.Runner
		left   []string
	)
	for _, r := range m.Runners(match) {
		if st := r.Status(); st.State == partition.Failed.String() {
			failed = append(failed, r)
		} else {
			left = append(left, fmt.Sprintf("%s/%d (%s)", st.Topic, st.Partition, st.State))
		}
	}
	if len(failed) == 0 {
		return Result{}, fmt.Errorf("%w: mirror %s: no partition of the topics matching %s is FAILED (%s); reset forgets only FAILED partitions, nothing was changed",
			ErrConflict, m.Name, strings.Join(pats, ", "), strings.Join(left, ", "))
	}
	resetAt := time.Now()
	reset := map[string]bool{}
	var names []string
	for _, r := range failed {
		name := fmt.Sprintf("%s/%d", r.Topic(), r.Partition())
		if err := m.Forget(ctx, r); err != nil {
			msg := "reset nothing"
			if len(names) > 0 {
				msg = "reset " + strings.Join(names, ", ") + " before the failure"
			}
			m.TriggerSync()
			return Result{Mirror: m.Name, Message: msg}, err
		}
		reset[name] = true
		names = append(names, name)
	}
	m.Log.Info("operator reset partitions: their records and offset maps are deleted; they start again from the source's log start", "partitions", names)
	m.TriggerSync()
	msg := fmt.Sprintf("reset %d partition(s) of topics matching %s: %s; each starts again from the source's log start into an empty destination partition",
		len(names), strings.Join(pats, ", "), strings.Join(names, ", "))
	if len(left) > 0 {
		msg += "; left alone (not FAILED): " + strings.Join(left, ", ")
	}
	wctx, cancel := context.WithTimeout(ctx, resetWait)
	defer cancel()
	var out []runner.Status
	for {
		out = out[:0]
		back := 0
		for _, r := range m.Runners(match) {
			st := r.Status()
			if !reset[fmt.Sprintf("%s/%d", st.Topic, st.Partition)] {
				continue
			}
			out = append(out, st)
			if !st.UpdatedAt.Before(resetAt) {
				back++
			}
		}
		if back == len(names) {
			return Result{Mirror: m.Name, Message: msg, Partitions: out}, nil
		}
		select {
		case <-wctx.Done():
			return Result{Mirror: m.Name, Message: msg + fmt.Sprintf("; %d of them not started again yet: the next topics round starts them", len(names)-back), Partitions: out}, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}
