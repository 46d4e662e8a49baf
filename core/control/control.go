// Package control keeps what operators asked of a mirror at run time
// (pause, resume, stop, start, failover): one record per mirror in the
// state store, two ordered lists of rules where the last rule matching a
// topic decides, written before it takes effect. It runs the operators'
// actions too (pause, resume, stop, start: actions.go) on the runners of a
// mirror that core/mirror's operator API gives it; core/runner asks it
// whether a topic is paused or stopped.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// Errors of the operators' requests; callers branch with errors.Is (the
// admin API answers 400, 404 and 409).
var (
	// ErrInvalidRequest: a request is wrong (a bad regex, a missing field).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrNoMirror: no mirror of that name runs in this daemon.
	ErrNoMirror = errors.New("no such mirror")
	// ErrConflict: the request conflicts with the mirror's state (for
	// example starting a topic that another stop pattern still stops).
	ErrConflict = errors.New("conflicts with the mirror's state")
	// ErrNoMatch: a topic pattern of the request matches no topic of the
	// mirror; nothing was recorded.
	ErrNoMatch = errors.New("no topic matches")
	// ErrUnavailable: something the request needs (a cluster, the state
	// store, a mirror still connecting) cannot be reached now; nothing
	// was changed and the request can be repeated.
	ErrUnavailable = errors.New("unavailable now")
)

// New returns the holder of mirror name's record in store; it reads the
// record at its first use.
func New(store statestore.Store, name string) *Holder {
	return &Holder{store: store, name: name}
}

// Record is what operators asked of a mirror at run time, kept in
// the state store (statestore.ControlKey): two lists of rules, evaluated in
// order, the last rule that matches a topic deciding — like a firewall's. A
// later "start orders" thus starts orders after an earlier "stop .*", and a
// later "stop .*" stops everything again.
type Record struct {
	Paused  []Rule `json:"paused,omitempty"`
	Stopped []Rule `json:"stopped,omitempty"`
}

// Rule says that the topics matching Topics and none of Exclude
// (regexes matched against the whole name) are paused (or stopped): On, or
// not.
type Rule struct {
	Topics  []string `json:"topics"`
	Exclude []string `json:"exclude,omitempty"`
	On      bool     `json:"on"`
}

// compiledRule is a Rule with its patterns compiled.
type compiledRule struct {
	topics, exclude []*regexp.Regexp
	on              bool
}

func compileRules(rules []Rule) ([]compiledRule, error) {
	out := make([]compiledRule, 0, len(rules))
	for _, r := range rules {
		t, err := Compile(r.Topics)
		if err != nil {
			return nil, err
		}
		x, err := Compile(r.Exclude)
		if err != nil {
			return nil, err
		}
		out = append(out, compiledRule{topics: t, exclude: x, on: r.On})
	}
	return out, nil
}

// decide returns what the last matching rule says (false when none does).
func decide(rules []compiledRule, topic string) bool {
	for i := len(rules) - 1; i >= 0; i-- {
		if MatchAny(rules[i].topics, topic) && !MatchAny(rules[i].exclude, topic) {
			return rules[i].on
		}
	}
	return false
}

// AppendRule adds r after rules, dropping earlier rules with the same
// topics and exclusions (r overrides them), and every rule when r covers
// all topics.
func AppendRule(rules []Rule, r Rule) []Rule {
	if len(r.Exclude) == 0 && slices.Contains(r.Topics, ".*") {
		if !r.On {
			return nil // nothing is on
		}
		return []Rule{r}
	}
	out := rules[:0:0]
	for _, old := range rules {
		if !slices.Equal(old.Topics, r.Topics) || !slices.Equal(old.Exclude, r.Exclude) {
			out = append(out, old)
		}
	}
	if len(out) == 0 && !r.On {
		return nil // nothing was on
	}
	return append(out, r)
}

// Holder is the engine's copy of one mirror's control record; it
// answers the runners (core/runner.Control).
type Holder struct {
	store statestore.Store
	name  string

	mu      sync.Mutex
	loaded  bool
	version int64
	rec     Record
	paused  []compiledRule
	stopped []compiledRule
}

// Anchored compiles a topic pattern the way mirror.topics.include is
// matched: the whole name.
func Anchored(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + p + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: topic pattern %q: %v", ErrInvalidRequest, p, err)
	}
	return re, nil
}

// Compile compiles topic patterns with Anchored.
func Compile(ps []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(ps))
	for _, p := range ps {
		re, err := Anchored(p)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// MatchAny reports whether one of res matches topic.
func MatchAny(res []*regexp.Regexp, topic string) bool {
	for _, re := range res {
		if re.MatchString(topic) {
			return true
		}
	}
	return false
}

// load reads the record once; c.mu must be held.
func (c *Holder) load(ctx context.Context) error {
	if c.loaded {
		return nil
	}
	ent, err := c.store.Get(ctx, statestore.ControlKey(c.name))
	var rec Record
	switch {
	case errors.Is(err, statestore.ErrNotFound):
		ent.Version = statestore.Absent
	case err != nil:
		return fmt.Errorf("%w: mirror %s: reading the operator record from the state store: %w", ErrUnavailable, c.name, err)
	default:
		if err := json.Unmarshal(ent.Value, &rec); err != nil {
			return fmt.Errorf("mirror %s: the operator record in the state store is unreadable: %w", c.name, err)
		}
	}
	if err := c.set(rec, ent.Version); err != nil {
		// Not the request's fault (no ErrInvalidRequest): the stored
		// record was altered outside kmirror.
		return fmt.Errorf("mirror %s: the operator record in the state store (key %s) holds a pattern that does not compile: %v", c.name, statestore.ControlKey(c.name), err)
	}
	return nil
}

func (c *Holder) set(rec Record, version int64) error {
	paused, err := compileRules(rec.Paused)
	if err != nil {
		return err
	}
	stopped, err := compileRules(rec.Stopped)
	if err != nil {
		return err
	}
	c.rec, c.version, c.paused, c.stopped, c.loaded = rec, version, paused, stopped, true
	return nil
}

// Update changes the record and writes it before it takes effect.
func (c *Holder) Update(ctx context.Context, change func(*Record) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(ctx); err != nil {
		return err
	}
	rec := Record{Paused: slices.Clone(c.rec.Paused), Stopped: slices.Clone(c.rec.Stopped)}
	if err := change(&rec); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	v, err := c.store.Put(ctx, statestore.ControlKey(c.name), b, c.version)
	if err != nil {
		c.loaded = false // re-read at the next use
		if !errors.Is(err, statestore.ErrVersionMismatch) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err) // the state store failed, not the request
		}
		return fmt.Errorf("mirror %s: recording the operator's request (nothing was changed): %w", c.name, err)
	}
	return c.set(rec, v)
}

// Paused reports whether an operator paused topic.
func (c *Holder) Paused(ctx context.Context, topic string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(ctx); err != nil {
		return false, err
	}
	return decide(c.paused, topic), nil
}

// Stopped reports whether an operator stopped topic (stop or
// failover).
func (c *Holder) Stopped(ctx context.Context, topic string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(ctx); err != nil {
		return false, err
	}
	return decide(c.stopped, topic), nil
}

// Patterns compiles an operator's topic patterns with Anchored; none means
// every topic (".*"). It returns the patterns it compiled.
func Patterns(topics []string) ([]string, []*regexp.Regexp, error) {
	if len(topics) == 0 {
		topics = []string{".*"}
	}
	res, err := Compile(topics)
	return topics, res, err
}

// Pause records that the topics matching pats are paused (on) or resumed
// (not on), after the rules already recorded.
func (c *Holder) Pause(ctx context.Context, pats []string, on bool) error {
	return c.Update(ctx, func(rec *Record) error {
		rec.Paused = AppendRule(rec.Paused, Rule{Topics: pats, On: on})
		return nil
	})
}

// Stop records that the topics matching pats are stopped, after the rules
// already recorded.
func (c *Holder) Stop(ctx context.Context, pats []string) error {
	return c.Update(ctx, func(rec *Record) error {
		rec.Stopped = AppendRule(rec.Stopped, Rule{Topics: pats, On: true})
		return nil
	})
}

// Start records that the topics matching topics and none of exclude start
// again, after the rules already recorded.
func (c *Holder) Start(ctx context.Context, topics, exclude []string) error {
	return c.Update(ctx, func(rec *Record) error {
		rec.Stopped = AppendRule(rec.Stopped, Rule{Topics: topics, Exclude: exclude, On: false})
		return nil
	})
}
