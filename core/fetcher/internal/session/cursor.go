// Package session runs the fetcher's sessions: one goroutine per (source
// leader, fetcher id) with one long poll in flight, an incremental fetch
// session (KIP-227) with the broker, release fetches, and the application
// of each response to the partitions' Cursors, which it delivers to their
// Sinks. It also holds what the fetcher's Manager shares with its sessions
// (Shared): the lock, the partitions, the budget, and the bookkeeping that
// sends a partition back to placement or fails it. Placement itself (which
// leader, which session) is the Manager's, in core/fetcher, whose doc states
// the life cycle and invariants.
package session

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/fetcher/delivery"
	"github.com/kmirror/kmirror/core/fetcher/internal/budget"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
)

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

func (k TP) String() string { return fmt.Sprintf("%s-%d", k.Topic, k.Partition) }

// Phase is where a Cursor is in the fetcher.
type Phase uint8

// Cursor phases.
const (
	Pending   Phase = iota // in Shared.Pending
	Active                 // in a session
	Reporting              // out of range: reading the log bounds before failing
	Failed
	Removed
)

// Cursor is one partition's fetch state: where it is fetched from, the
// source's watermarks, and what it delivered and has not had acknowledged.
// Guarded by Shared.Mu.
type Cursor struct {
	Key     TP
	TopicID [16]byte
	Sink    delivery.Sink

	Phase     Phase
	NotBefore time.Time // Pending: not placed before
	Session   *Broker   // Active
	Leader    int32
	Paused    bool
	// Parked: a release fetch found nothing new; the partition waits
	// for its session's next long poll.
	Parked bool

	// Ledger is what the partition was delivered and has not
	// acknowledged, with the response buffers it keeps alive.
	Ledger budget.Ledger

	Offset       int64 // next offset to fetch
	CurrentEpoch int32 // leader epoch from metadata (CurrentLeaderEpoch)
	LastEpoch    int32 // PartitionLeaderEpoch of the last batch (LastFetchedEpoch)
	MaxBytes     int32 // > 0: one-off PartitionMaxBytes for a batch larger than the limit
	Corrupt      int   // consecutive refetches after a corrupt batch

	HW, LSO, LogStart int64
	Err               error
}

// Logger returns base (the Manager's logger) with the partition's topic and
// partition fields: every line about the partition carries them. It is
// derived anew for each line, not kept: the lines are rare (placement,
// failures), and a kept hclog child costs about 350 bytes per partition
// (3.5 MB at 10,000 partitions). Guard a Debug line with base.IsDebug.
func (p *Cursor) Logger(base hclog.Logger) hclog.Logger {
	return base.With("topic", p.Key.Topic, "partition", p.Key.Partition)
}

// Config is what the sessions need of the Manager's options.
type Config struct {
	PartitionMaxBytes int32
	ResponseMaxBytes  int32
	MinBytes          int32
	MaxWait           time.Duration
	Backoff           time.Duration
	MaxBuffered       int64
	MaxBufferedSet    bool
	CloseTimeout      time.Duration
	Throttle          func(ctx context.Context, n int) error // nil: none
	FetchHook         func(FetchInfo)                        // nil: none
}

// FetchInfo describes one fetch request once its response (or error) has
// arrived (fetcher.FetchInfo).
type FetchInfo struct {
	Broker  int32
	Latency time.Duration
	Bytes   int
	Release bool
	Err     error
}

// Shared is what a Manager shares with its sessions.
type Shared struct {
	Cl     *kgo.Client // the mirror's source client
	Config Config
	Log    hclog.Logger
	Budget *budget.Budget
	Wake   chan struct{} // the placement loop

	InFlight atomic.Int64 // fetch requests sent and not yet answered

	Mu       sync.Mutex
	Buffered int64 // the partitions' outstanding bytes, summed
	Parts    map[TP]*Cursor
	Pending  map[TP]*Cursor // Pending
	// Release is the release fetches' own client, nil if off; set
	// before any session starts.
	Release *kgo.Client
}

// share is one partition's delivery from a response, recorded in its
// Ledger once the response's slack is known.
type share struct {
	p *Cursor
	n int64
}

// pin records the deliveries of one response, and returns the slack bytes
// to count in the budget with them (see budget.Pinned). Called with m.Mu
// held.
func (m *Shared) pin(deliveries []share, slack int64) int64 {
	if len(deliveries) == 0 {
		return 0
	}
	buf := budget.Pin(slack, len(deliveries))
	if buf != nil {
		m.Buffered += slack
	} else {
		slack = 0
	}
	for _, d := range deliveries {
		d.p.Ledger.Hold(d.n, buf)
	}
	return slack
}

// Unbuffer takes n acknowledged bytes off p and the budget, oldest
// delivery first, with the responses no delivery holds any more. Called
// with m.Mu held.
func (m *Shared) Unbuffer(p *Cursor, n int64) {
	freed := p.Ledger.Ack(n)
	if freed <= 0 {
		return
	}
	m.Buffered -= freed
	m.Budget.Release(freed)
}

// PartitionMax is the PartitionMaxBytes of a fetch: replica.fetch.max.bytes,
// or less when the budget is shared by many partitions.
func (m *Shared) PartitionMax() int32 {
	return m.Budget.PartitionMax(m.Config.PartitionMaxBytes)
}

// PauseAt is how many outstanding bytes pause a partition.
func (m *Shared) PauseAt() int64 {
	if m.Config.MaxBufferedSet {
		return m.Config.MaxBuffered
	}
	return 2 * int64(m.PartitionMax())
}

// Detach takes p out of its session (which forgets it in its next
// request). Called with m.Mu held.
func (m *Shared) Detach(p *Cursor) {
	if p.Session != nil {
		delete(p.Session.Parts, p.Key)
		p.Session.Signal()
		p.Session = nil
	}
	p.Paused = false
	p.Parked = false
	p.Leader = -1
}

// Relocate sends p back to placement after a backoff because of a retriable
// error. Called with m.Mu held.
func (m *Shared) Relocate(p *Cursor, err error) {
	m.Detach(p)
	m.RetryLater(p, time.Now(), err)
	m.Signal()
}

// minRetry keeps a zero backoff from turning placement into a busy loop of
// metadata requests.
const minRetry = 10 * time.Millisecond

// RetryLater leaves p to placement after a backoff. Called with m.Mu held.
func (m *Shared) RetryLater(p *Cursor, now time.Time, err error) {
	p.Phase = Pending
	p.NotBefore = now.Add(max(m.Config.Backoff, minRetry))
	p.Err = err
	m.Pending[p.Key] = p
	if m.Log.IsDebug() {
		p.Logger(m.Log).Debug("partition waits for a leader", "retry_in", m.Config.Backoff, "reason", err)
	}
}

// Fail stops fetching p and delivers err. Called with m.Mu held.
func (m *Shared) Fail(p *Cursor, err error) {
	m.Detach(p)
	delete(m.Pending, p.Key)
	p.Phase = Failed
	p.Err = err
	p.Logger(m.Log).Warn("partition fetch failed", "offset", p.Offset, "error", err)
	p.Sink.Deliver(delivery.Fetched{
		Topic:            p.Key.Topic,
		Partition:        p.Key.Partition,
		FetchOffset:      p.Offset,
		HighWatermark:    p.HW,
		LastStableOffset: p.LSO,
		LogStartOffset:   p.LogStart,
		Err:              err,
	})
}

// Signal wakes the placement loop.
func (m *Shared) Signal() {
	select {
	case m.Wake <- struct{}{}:
	default:
	}
}

// listOffsets is wire.ListOffsets, best effort: what it cannot read is
// left out.
func (m *Shared) listOffsets(ctx context.Context, parts []wire.Partition, ts int64) map[wire.Partition]int64 {
	out, err := wire.ListOffsets(ctx, m.Cl, parts, ts)
	if err != nil {
		m.Log.Debug("cannot list source offsets for an out of range report", "error", err)
	}
	return out
}

// AuthenticationError is the error delivered when broker rejected the
// mirror's credentials.
func AuthenticationError(broker int32, err error) error {
	return fmt.Errorf("%w: broker %d: %w (check the source SASL credentials and mechanism of this mirror)", delivery.ErrAuthentication, broker, err)
}

// AuthorizationError is the error delivered when the source denies the
// mirror's principal a topic.
func AuthorizationError(topic string, partition int32, err error) error {
	return fmt.Errorf("%w: %s-%d: %w (grant READ and DESCRIBE on the topic to the mirror's source principal)", delivery.ErrAuthorization, topic, partition, err)
}
