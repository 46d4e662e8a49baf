package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Sentinel errors; they are returned wrapped with the partition and the
// states involved.
var (
	// ErrInvalidTransition: the table does not allow the move.
	ErrInvalidTransition = errors.New("invalid partition state transition")
	// ErrNeedsOperator: the partition is FAILED with no automatic retry
	// (non-retryable failure, or attempts exhausted); an operator must
	// reset or stop it.
	ErrNeedsOperator = errors.New("partition needs an operator")
	// ErrRetryNotDue: Retry was called before the partition's retry time.
	ErrRetryNotDue = errors.New("partition retry is not due yet")
)

// Event reports one transition that took effect.
type Event struct {
	From, To State
	Reason   string
	// Record is the partition's record after the transition (a copy).
	Record Record
}

// Observer is told about every transition after it was persisted and took
// effect, exactly once, in order per partition, before the method that made
// the transition returns. It runs on a goroutine making a transition of that
// partition and delays the partition's next transitions, so it must be quick
// (count, log, hand off). It may call the Partition's reading methods
// (State, Record, Version) but not methods that write (that deadlocks).
type Observer func(Event)

// Machine creates and loads the partitions of one state store and holds
// what they share: the store, the retry policy, the clock and the
// observers. A daemon has one Machine; it is safe for concurrent use.
type Machine struct {
	store     statestore.Store
	backoff   Backoff
	now       func() time.Time
	jitter    func(max time.Duration) time.Duration
	observers []Observer
}

// Option configures a Machine.
type Option func(*Machine)

// WithBackoff sets the retry policy of FAILED partitions. Default:
// DefaultBackoff. NewMachine validates it.
func WithBackoff(b Backoff) Option { return func(m *Machine) { m.backoff = b } }

// WithClock sets the source of the current time, for tests. Default:
// time.Now.
func WithClock(now func() time.Time) Option { return func(m *Machine) { m.now = now } }

// WithJitter sets how a retry delay is drawn from [0, max], for tests. The
// result is clamped to that range. Default: uniformly at random (full
// jitter).
func WithJitter(f func(max time.Duration) time.Duration) Option {
	return func(m *Machine) { m.jitter = f }
}

// WithObserver adds an observer of transitions; repeat it to add several,
// called in the order given. Default: none.
func WithObserver(o Observer) Option {
	return func(m *Machine) { m.observers = append(m.observers, o) }
}

// NewMachine returns a Machine persisting to store.
func NewMachine(store statestore.Store, opts ...Option) (*Machine, error) {
	if store == nil {
		return nil, errors.New("partition state machine: nil state store")
	}
	m := &Machine{store: store, backoff: DefaultBackoff, now: time.Now, jitter: backoff.FullJitter}
	for _, o := range opts {
		o(m)
	}
	if err := m.backoff.Validate(); err != nil {
		return nil, fmt.Errorf("partition state machine: %w", err)
	}
	if m.now == nil || m.jitter == nil {
		return nil, errors.New("partition state machine: nil clock or jitter function")
	}
	for i, o := range m.observers {
		if o == nil {
			return nil, fmt.Errorf("partition state machine: observer %d is nil", i)
		}
	}
	return m, nil
}

// Backoff returns the Machine's retry policy.
func (m *Machine) Backoff() Backoff { return m.backoff }

func (m *Machine) clock() time.Time { return m.now().UTC() }

// Create persists a new partition in PREPARING (with LastMirroredOffset -1
// and the mode undecided) and reports it to the observers as a transition
// from Unknown. If the partition already has a record, the error wraps
// statestore.ErrVersionMismatch; use Load or LoadOrCreate.
func (m *Machine) Create(ctx context.Context, mirror, topic string, partition int32, reason string) (*Partition, error) {
	return m.CreateWith(ctx, mirror, topic, partition, reason, nil)
}

// CreateWith is Create with init applied to the new record's Data (nil:
// none) in the same write: a partition created with what it must record
// at once (its source topic id) costs one state-store write, not two.
func (m *Machine) CreateWith(ctx context.Context, mirror, topic string, partition int32, reason string, init func(*Data) error) (*Partition, error) {
	key, err := partitionKey(mirror, topic, partition)
	if err != nil {
		return nil, err
	}
	p := newPartition(m, key, Record{
		Schema: schemaVersion, Mirror: mirror, Topic: topic, Partition: partition,
		State: Unknown, Data: Data{LastMirroredOffset: -1},
	}, 0)
	err = p.apply(ctx, "create", func(r *Record) error {
		r.State = Preparing
		r.Reason = reason
		if init != nil {
			return init(&r.Data)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Load restores a partition from its persisted record, in the state it was
// in (after a crash: the state it had when the daemon died). A partition
// without a record yields an error wrapping statestore.ErrNotFound; a
// record that cannot be used, ErrInvalidRecord.
func (m *Machine) Load(ctx context.Context, mirror, topic string, partition int32) (*Partition, error) {
	key, err := partitionKey(mirror, topic, partition)
	if err != nil {
		return nil, err
	}
	e, err := m.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("load state of mirror %s, topic %s, partition %d: %w", mirror, topic, partition, err)
	}
	return m.fromEntry(e)
}

// LoadOrCreate loads the partition, or creates it in PREPARING if it has no
// record. created reports which happened. A concurrent creator makes it
// load the winner's record.
func (m *Machine) LoadOrCreate(ctx context.Context, mirror, topic string, partition int32, reason string) (p *Partition, created bool, err error) {
	return m.LoadOrCreateWith(ctx, mirror, topic, partition, reason, nil)
}

// LoadOrCreateWith is LoadOrCreate that creates with CreateWith(init).
func (m *Machine) LoadOrCreateWith(ctx context.Context, mirror, topic string, partition int32, reason string, init func(*Data) error) (p *Partition, created bool, err error) {
	p, err = m.Load(ctx, mirror, topic, partition)
	if !errors.Is(err, statestore.ErrNotFound) {
		return p, false, err
	}
	p, err = m.CreateWith(ctx, mirror, topic, partition, reason, init)
	if errors.Is(err, statestore.ErrVersionMismatch) {
		p, err = m.Load(ctx, mirror, topic, partition)
		return p, false, err
	}
	return p, err == nil, err
}

// LoadMirror loads every partition of mirror that has a record, sorted by
// topic and then partition number. Records that cannot be used
// are skipped and reported together in the error (each naming its key and
// wrapping ErrInvalidRecord), alongside the partitions that loaded: the
// caller decides whether that stops the mirror.
func (m *Machine) LoadMirror(ctx context.Context, mirror string) ([]*Partition, error) {
	entries, err := m.store.List(ctx, statestore.PartitionsPrefix(mirror))
	if err != nil {
		return nil, fmt.Errorf("load partition states of mirror %s: %w", mirror, err)
	}
	var out []*Partition
	var errs []error
	for _, e := range entries {
		p, err := m.fromEntry(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Partition) int {
		return cmp.Or(cmp.Compare(a.rec.Topic, b.rec.Topic), cmp.Compare(a.rec.Partition, b.rec.Partition))
	})
	return out, errors.Join(errs...)
}

func (m *Machine) fromEntry(e statestore.Entry) (*Partition, error) {
	rec, err := decodeRecord(e.Key, e.Value)
	if err != nil {
		return nil, err
	}
	return newPartition(m, e.Key, rec, e.Version), nil
}

func partitionKey(mirror, topic string, partition int32) (string, error) {
	key := statestore.PartitionKey(mirror, topic, partition)
	if m, t, p, err := statestore.ParsePartitionKey(key); err != nil || m != mirror || t != topic || p != partition {
		return "", fmt.Errorf("partition state: mirror %q, topic %q, partition %d do not form a valid state key (names must be non-empty without '/', the partition non-negative)", mirror, topic, partition)
	}
	return key, nil
}

// Partition is the state machine of one mirrored partition. It is safe for
// concurrent use; its methods that change the record are serialized, and
// each persists before it takes effect.
type Partition struct {
	m   *Machine
	key string

	name string // "mirror m, topic t, partition n", for errors

	mu      sync.Mutex // guards rec, version, deleted, pending; held across the store write
	rec     Record
	version int64 // store version of rec; 0 before Create
	deleted bool
	pending []Event // transitions not yet delivered to observers

	notifyMu sync.Mutex // held while observers run; see deliver
}

func newPartition(m *Machine, key string, rec Record, version int64) *Partition {
	return &Partition{
		m: m, key: key, rec: rec, version: version,
		name: fmt.Sprintf("mirror %s, topic %s, partition %d", rec.Mirror, rec.Topic, rec.Partition),
	}
}

// String names the partition: "mirror m, topic t, partition n".
func (p *Partition) String() string { return p.name }

// Key returns the partition's state-store key.
func (p *Partition) Key() string { return p.key }

// State returns the current state.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec.State
}

// Record returns a copy of the current record.
func (p *Partition) Record() Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec.clone()
}

// Version returns the state-store version of the current record.
func (p *Partition) Version() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// Transition moves the partition to state to, for reason (logged once by
// the observers). It fails with ErrInvalidTransition if the table does not
// allow it, and with statestore.ErrVersionMismatch if someone else wrote
// the record since this Partition last read or wrote it (call Reload, then
// decide again). On any error the partition is unchanged.
//
// Transition applies no retry policy: leaving FAILED for the previous state
// is a retry that ignores RetryAt and the attempt limit (engine code uses
// Retry); leaving it for PREPARING is an operator's reset (see Reset).
func (p *Partition) Transition(ctx context.Context, to State, reason string) error {
	return p.TransitionWith(ctx, to, reason, nil)
}

// TransitionWith is Transition that also applies update to the record's
// Data in the same write (for example the last mirrored offset when
// STOPPING ends in STOPPED). update receives a copy; if it returns an error,
// nothing is written.
func (p *Partition) TransitionWith(ctx context.Context, to State, reason string, update func(*Data) error) error {
	return p.apply(ctx, "transition", func(r *Record) error {
		if err := p.move(r, to, reason); err != nil {
			return err
		}
		if update != nil {
			return update(&r.Data)
		}
		return nil
	})
}

// move applies the table and the bookkeeping of a transition to r.
func (p *Partition) move(r *Record, to State, reason string) error {
	from, prev := r.State, r.PreviousState
	if !CanTransition(from, prev, to) {
		return fmt.Errorf("%v: %v -> %v: %w (allowed from %v: %v)", p, from, to, ErrInvalidTransition, from, Successors(from, prev))
	}
	retry := from == Failed && to == prev
	r.PreviousState, r.State, r.Reason = from, to, reason
	r.Retryable, r.RetryAt = false, time.Time{}
	if !retry && to != Failed {
		r.Attempts = 0
	}
	return nil
}

// Fail moves the partition to FAILED with cause's text as the reason. The
// failure is retryable unless IsRetryable(cause) says otherwise; a
// retryable failure within Backoff.MaxAttempts consecutive failures gets a
// retry time (exponential backoff, full jitter), any other waits for an
// operator. Only PREPARING and MIRRORING can fail (ErrInvalidTransition
// otherwise; see the package doc).
func (p *Partition) Fail(ctx context.Context, cause error) error {
	if cause == nil {
		return fmt.Errorf("%v: Fail called with a nil error", p)
	}
	b := p.m.backoff
	return p.apply(ctx, "fail", func(r *Record) error {
		attempts := r.Attempts + 1
		if err := p.move(r, Failed, cause.Error()); err != nil {
			return err
		}
		r.Attempts = attempts
		r.Retryable = IsRetryable(cause)
		if r.Retryable && b.RetriesLeft(attempts) {
			limit := b.Cap(attempts)
			d := min(max(p.m.jitter(limit), 0), limit)
			r.RetryAt = p.m.clock().Add(d)
		}
		return nil
	})
}

// DueForRetry reports whether the partition is FAILED with an automatic
// retry due at or before now.
func (p *Partition) DueForRetry(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec.State == Failed && !p.rec.RetryAt.IsZero() && !now.Before(p.rec.RetryAt)
}

// Retry returns a FAILED partition whose retry is due to the state it failed
// in, keeping its attempt count. It fails with ErrNeedsOperator if no
// automatic retry is scheduled, ErrRetryNotDue before the retry time, and
// ErrInvalidTransition if the partition is not FAILED.
func (p *Partition) Retry(ctx context.Context) error {
	return p.apply(ctx, "retry", func(r *Record) error {
		if r.State != Failed {
			return fmt.Errorf("%v: retry in state %v: %w (only FAILED partitions are retried)", p, r.State, ErrInvalidTransition)
		}
		if r.RetryAt.IsZero() {
			why := "the failure is not retryable"
			if r.Retryable {
				why = fmt.Sprintf("%d automatic retries are used up", p.m.backoff.MaxAttempts)
			}
			return fmt.Errorf("%v: FAILED (%s) and %s; reset or stop it: %w", p, r.Reason, why, ErrNeedsOperator)
		}
		if now := p.m.clock(); now.Before(r.RetryAt) {
			return fmt.Errorf("%v: retry due at %v, in %v: %w", p, r.RetryAt, r.RetryAt.Sub(now), ErrRetryNotDue)
		}
		reason := fmt.Sprintf("automatic retry %d of %d after: %s", r.Attempts, p.m.backoff.MaxAttempts, r.Reason)
		return p.move(r, r.PreviousState, reason)
	})
}

// Reset is the operator's restart: it moves a FAILED or STOPPED partition to
// PREPARING and clears its attempt count. Other states yield
// ErrInvalidTransition.
func (p *Partition) Reset(ctx context.Context, reason string) error {
	return p.apply(ctx, "reset", func(r *Record) error {
		if r.State != Failed && r.State != Stopped {
			return fmt.Errorf("%v: reset in state %v: %w (only FAILED or STOPPED partitions are reset)", p, r.State, ErrInvalidTransition)
		}
		if err := p.move(r, Preparing, reason); err != nil {
			return err
		}
		r.Attempts = 0
		return nil
	})
}

// MarkHealthy clears the count of consecutive failures once the partition
// has shown it works again (for example after its first successful append
// following a retry), so a failure much later starts from the initial
// backoff. It writes only if there is a count to clear and is not a
// transition. A FAILED partition is not healthy: that is an error.
func (p *Partition) MarkHealthy(ctx context.Context) error {
	return p.apply(ctx, "mark healthy", func(r *Record) error {
		if r.State == Failed {
			return fmt.Errorf("%v: cannot mark a FAILED partition healthy; Retry or Reset it", p)
		}
		if r.Attempts == 0 {
			return errNoChange
		}
		r.Attempts = 0
		return nil
	})
}

// Update applies update to a copy of the record's Data and persists it. It
// is not a transition: the state stays and observers are not told. On
// error (from update, the store, or a concurrent writer) nothing changes.
func (p *Partition) Update(ctx context.Context, update func(*Data) error) error {
	if update == nil {
		return fmt.Errorf("%v: Update called with a nil function", p)
	}
	return p.apply(ctx, "update", func(r *Record) error { return update(&r.Data) })
}

// Reload replaces the in-memory record with the stored one, after a
// statestore.ErrVersionMismatch told that someone else wrote it. It is not a
// transition of this Partition and is not reported to observers.
func (p *Partition) Reload(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return fmt.Errorf("%v: reload: record was deleted: %w", p, statestore.ErrNotFound)
	}
	e, err := p.m.store.Get(ctx, p.key)
	if err != nil {
		return fmt.Errorf("%v: reload: %w", p, err)
	}
	rec, err := decodeRecord(e.Key, e.Value)
	if err != nil {
		return fmt.Errorf("%v: reload: %w", p, err)
	}
	p.rec, p.version = rec, e.Version
	return nil
}

// Delete removes the record of a STOPPED or FAILED partition from the
// store (the mirror no longer lists the topic, or an operator's reset:
// the partition starts again as a new one). Afterwards every method that
// writes fails with an error wrapping statestore.ErrNotFound.
func (p *Partition) Delete(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return fmt.Errorf("%v: delete: already deleted: %w", p, statestore.ErrNotFound)
	}
	if p.rec.State != Stopped && p.rec.State != Failed {
		return fmt.Errorf("%v: delete in state %v: only STOPPED or FAILED partitions can be deleted: %w", p, p.rec.State, ErrInvalidTransition)
	}
	if err := p.m.store.Delete(ctx, p.key, p.version); err != nil {
		return fmt.Errorf("%v: delete state record: %w", p, err)
	}
	p.deleted = true
	return nil
}

// errNoChange tells apply that change decided there is nothing to write.
var errNoChange = errors.New("no change")

// apply is the only place a record is written. It runs change on a copy of
// the record, persists the result with compare-and-set on the version last
// seen, and only then makes it current; a state change is then reported to
// the observers.
func (p *Partition) apply(ctx context.Context, op string, change func(*Record) error) error {
	p.mu.Lock()
	locked := true
	defer func() {
		if locked {
			p.mu.Unlock()
		}
	}()
	if p.deleted {
		return fmt.Errorf("%v: %s: record was deleted: %w", p, op, statestore.ErrNotFound)
	}
	next := p.rec.clone()
	if err := change(&next); errors.Is(err, errNoChange) {
		return nil
	} else if err != nil {
		return err
	}
	next.UpdatedAt = p.m.clock()
	value, err := next.encode()
	if err != nil {
		return fmt.Errorf("%v: %s: %w", p, op, err)
	}
	expect := p.version // 0 (statestore.Absent) for Create
	v, err := p.m.store.Put(ctx, p.key, value, expect)
	if err != nil {
		hint := ""
		if errors.Is(err, statestore.ErrVersionMismatch) {
			hint = " (the record was written by someone else, possibly another kmirror instance owning this partition; reload it before deciding again)"
		}
		what := op
		if p.rec.State != next.State {
			what = fmt.Sprintf("%s %v -> %v", op, p.rec.State, next.State)
		}
		return fmt.Errorf("%v: %s not persisted, state unchanged%s: %w", p, what, hint, err)
	}
	from := p.rec.State
	p.rec, p.version = next, v
	if from == next.State {
		return nil // data-only write: not a transition
	}
	p.pending = append(p.pending, Event{From: from, To: next.State, Reason: next.Reason, Record: next.clone()})
	p.mu.Unlock()
	locked = false
	p.deliver()
	return nil
}

// deliver hands queued events to the observers. Events are queued under mu
// in the order transitions took effect and drained under notifyMu, so
// observers see every event once, in order, without mu held (they may read
// the Partition). When deliver returns, the caller's event has been
// delivered: either by this call or by the one that held notifyMu before.
func (p *Partition) deliver() {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	p.mu.Lock()
	events := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, ev := range events {
		for _, o := range p.m.observers {
			o(ev)
		}
	}
}
