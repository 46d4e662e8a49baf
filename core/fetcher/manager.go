package fetcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/fetcher/internal/budget"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
)

// PartitionSpec names a source partition and where to fetch it from.
type PartitionSpec struct {
	Topic string
	// TopicID is the source topic's id; zero to take it from the first
	// metadata. A later different id fails the partition with
	// ErrTopicIDChanged.
	TopicID   [16]byte
	Partition int32
	// FetchOffset is the first offset wanted.
	FetchOffset int64
	// LeaderEpoch is the source leader epoch of the batch that ends right
	// before FetchOffset (that batch's PartitionLeaderEpoch). It is sent as
	// LastFetchedEpoch so the source reports divergence (ErrDiverged). Pass
	// -1 when it is not known: 0 is a real epoch, and a wrong one makes the
	// source report a divergence that is not there.
	LeaderEpoch int32
}

// State is where a partition is in the fetcher (see the package doc).
type State uint8

// Partition states.
const (
	StateWaitingForLeader State = iota // placed from the next metadata after a backoff
	StateFetching                      // in a session
	StatePaused                        // in a session, left out of fetches until Done
	StateFailed                        // fatal error delivered; waits for Remove
)

func (s State) String() string {
	switch s {
	case StateWaitingForLeader:
		return "waiting-for-leader"
	case StateFetching:
		return "fetching"
	case StatePaused:
		return "paused"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// PartitionStatus is a snapshot of one partition, for metrics and describe.
type PartitionStatus struct {
	Topic     string
	Partition int32
	State     State
	// Leader is the source broker fetched from, -1 while waiting.
	Leader      int32
	FetchOffset int64
	// The source's watermarks from the latest fetch, -1 when unknown. They
	// are updated by every response, including ones with no data.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// BufferedBytes is delivered and not yet acknowledged with Done.
	BufferedBytes int64
	// Err is the fatal error (StateFailed) or the last retriable one, nil
	// once the partition fetches again.
	Err error
}

// Lag is how far the fetcher is behind the source's high watermark, -1 when
// the high watermark is unknown.
func (s PartitionStatus) Lag() int64 {
	if s.HighWatermark < 0 {
		return -1
	}
	return max(0, s.HighWatermark-s.FetchOffset)
}

// Manager fetches the partitions of one mirror from its source cluster. See
// the package doc. All methods are safe for concurrent use.
type Manager struct {
	cl  *kgo.Client
	cfg config
	log hclog.Logger

	wake   chan struct{} // the placement loop in Run
	budget *budget.Budget

	inFlight atomic.Int64 // fetch requests sent and not yet answered

	mu       sync.Mutex
	buffered int64 // the partitions' outstanding bytes, summed
	parts    map[tp]*fetchPartition
	pending  map[tp]*fetchPartition // StateWaitingForLeader
	sessions map[sessionKey]*session
	clients  []*kgo.Client // per fetcher id; [0] is cl; set by Run
	release  *kgo.Client   // release fetches' own connections; nil if off; set by Run
	runState int           // 0 new, 1 running, 2 stopped
	metaFail int           // consecutive failed metadata reads, for quieter logs
	wg       sync.WaitGroup
}

type tp struct {
	topic     string
	partition int32
}

func (k tp) String() string { return fmt.Sprintf("%s-%d", k.topic, k.partition) }

type pstate uint8

const (
	psPending   pstate = iota // in m.pending
	psActive                  // in a session
	psReporting               // out of range: reading the log bounds before failing
	psFailed
	psRemoved
)

// fetchPartition is one partition's fetch state, guarded by Manager.mu.
type fetchPartition struct {
	key     tp
	topicID [16]byte
	sink    Sink

	state     pstate
	notBefore time.Time // psPending: not placed before
	sess      *session  // psActive
	leader    int32
	paused    bool
	// parked: a release fetch found nothing new; the partition waits
	// for its session's next long poll.
	parked bool

	// ledger is what the partition was delivered and has not
	// acknowledged, with the response buffers it keeps alive.
	ledger budget.Ledger

	offset       int64 // next offset to fetch
	currentEpoch int32 // leader epoch from metadata (CurrentLeaderEpoch)
	lastEpoch    int32 // PartitionLeaderEpoch of the last batch (LastFetchedEpoch)
	maxBytes     int32 // > 0: one-off PartitionMaxBytes for a batch larger than the limit
	corrupt      int   // consecutive refetches after a corrupt batch

	hw, lso, logStart int64
	err               error
}

// New returns a Manager fetching through client (the mirror's source
// client). The client must not consume or produce by itself: its options are
// copied for fetcher ids above 0. Fetching starts with Run.
func New(client *kgo.Client, opts ...Option) (*Manager, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: the source client is nil", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Manager{
		cl:       client,
		cfg:      cfg,
		log:      cfg.log,
		wake:     make(chan struct{}, 1),
		budget:   cfg.budget.b,
		parts:    make(map[tp]*fetchPartition),
		pending:  make(map[tp]*fetchPartition),
		sessions: make(map[sessionKey]*session),
	}, nil
}

// Add starts fetching a partition into sink. It may be called before or
// while Run runs. The partition is placed on its leader's session by Run.
func (m *Manager) Add(p PartitionSpec, sink Sink) error {
	switch {
	case p.Topic == "":
		return fmt.Errorf("fetcher: add partition %d: empty topic name", p.Partition)
	case p.Partition < 0:
		return fmt.Errorf("fetcher: add %s: negative partition %d", p.Topic, p.Partition)
	case p.FetchOffset < 0:
		return fmt.Errorf("fetcher: add %s-%d: negative fetch offset %d", p.Topic, p.Partition, p.FetchOffset)
	case p.LeaderEpoch < -1:
		return fmt.Errorf("fetcher: add %s-%d: leader epoch %d (use -1 when unknown)", p.Topic, p.Partition, p.LeaderEpoch)
	case sink == nil:
		return fmt.Errorf("fetcher: add %s-%d: nil sink", p.Topic, p.Partition)
	}
	key := tp{p.Topic, p.Partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runState == 2 {
		return fmt.Errorf("fetcher: add %s: %w", key, ErrStopped)
	}
	if _, ok := m.parts[key]; ok {
		return fmt.Errorf("fetcher: add %s: %w", key, ErrAlreadyAdded)
	}
	part := &fetchPartition{
		key:          key,
		topicID:      p.TopicID,
		sink:         sink,
		state:        psPending,
		leader:       -1,
		offset:       p.FetchOffset,
		currentEpoch: -1,
		lastEpoch:    p.LeaderEpoch,
		hw:           -1,
		lso:          -1,
		logStart:     -1,
	}
	m.parts[key] = part
	m.pending[key] = part
	m.budget.AddPartitions(1)
	m.signal()
	return nil
}

// Remove stops fetching a partition and reports whether it was added. Once
// Remove returns, its sink receives nothing more; acknowledgements (Done) for
// what it received are then ignored, and must not be made after the
// partition is added again.
func (m *Manager) Remove(topic string, partition int32) bool {
	key := tp{topic, partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.parts[key]
	if !ok {
		return false
	}
	m.detach(p)
	delete(m.parts, key)
	delete(m.pending, key)
	p.state = psRemoved
	m.budget.AddPartitions(-1)
	// What it delivered is dropped with it: no Done comes for it.
	m.unbuffer(p, p.ledger.Outstanding())
	return true
}

// Done acknowledges that bytes of a partition's deliveries (Fetched.Bytes)
// are written, oldest delivery first: they leave the Budget, and a paused
// partition is fetched again (at once, by a release fetch, when its
// session's long poll is out).
func (m *Manager) Done(topic string, partition int32, bytes int) {
	if bytes <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.parts[tp{topic, partition}]
	if !ok {
		return
	}
	m.unbuffer(p, int64(bytes))
	if p.paused && p.ledger.Outstanding() < m.pauseAt() {
		p.paused = false
		if p.sess != nil {
			p.sess.signal()
		}
	}
}

// share is one partition's delivery from a response, recorded in its
// Ledger once the response's slack is known.
type share struct {
	p *fetchPartition
	n int64
}

// pin records the deliveries of one response, and returns the slack bytes
// to count in the budget with them (see budget.Pinned). Called with m.mu
// held.
func (m *Manager) pin(deliveries []share, slack int64) int64 {
	if len(deliveries) == 0 {
		return 0
	}
	buf := budget.Pin(slack, len(deliveries))
	if buf != nil {
		m.buffered += slack
	} else {
		slack = 0
	}
	for _, d := range deliveries {
		d.p.ledger.Hold(d.n, buf)
	}
	return slack
}

// unbuffer takes n acknowledged bytes off p and the budget, oldest
// delivery first, with the responses no delivery holds any more. Called
// with m.mu held.
func (m *Manager) unbuffer(p *fetchPartition, n int64) {
	freed := p.ledger.Ack(n)
	if freed <= 0 {
		return
	}
	m.buffered -= freed
	m.budget.Release(freed)
}

// partitionMax is the PartitionMaxBytes of a fetch: replica.fetch.max.bytes,
// or less when the budget is shared by many partitions.
func (m *Manager) partitionMax() int32 {
	return m.budget.PartitionMax(m.cfg.partitionMaxBytes)
}

// pauseAt is how many outstanding bytes pause a partition.
func (m *Manager) pauseAt() int64 {
	if m.cfg.maxBufferedSet {
		return m.cfg.maxBuffered
	}
	return 2 * int64(m.partitionMax())
}

// Stats are a Manager's figures for metrics.
type Stats struct {
	// FetchesInFlight is how many fetch requests are sent and not yet
	// answered (long polls and release fetches).
	FetchesInFlight int
	// BufferedBytes is how many bytes this Manager delivered that are not
	// yet acknowledged with Done, plus the rest of the response buffers
	// those deliveries keep alive.
	BufferedBytes int64
	// PartitionMaxBytes is the per-partition fetch size now in use.
	PartitionMaxBytes int32
	// The shared Budget: its size, what every Manager sharing it has
	// buffered, and what fetches in flight have reserved.
	BudgetMaxBytes      int64
	BudgetBufferedBytes int64
	BudgetReservedBytes int64
}

// Stats returns the Manager's figures now.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	buffered := m.buffered
	m.mu.Unlock()
	bmax, bbuf, bres := m.budget.Figures()
	return Stats{
		FetchesInFlight:     int(m.inFlight.Load()),
		BufferedBytes:       buffered,
		PartitionMaxBytes:   m.partitionMax(),
		BudgetMaxBytes:      bmax,
		BudgetBufferedBytes: bbuf,
		BudgetReservedBytes: bres,
	}
}

// Status returns one partition's snapshot.
func (m *Manager) Status(topic string, partition int32) (PartitionStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.parts[tp{topic, partition}]
	if !ok {
		return PartitionStatus{}, false
	}
	return p.status(), true
}

// Snapshot returns every partition's status, sorted by topic and partition.
func (m *Manager) Snapshot() []PartitionStatus {
	m.mu.Lock()
	out := make([]PartitionStatus, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p.status())
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionStatus) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}

func (p *fetchPartition) status() PartitionStatus {
	s := PartitionStatus{
		Topic:            p.key.topic,
		Partition:        p.key.partition,
		Leader:           -1,
		FetchOffset:      p.offset,
		HighWatermark:    p.hw,
		LastStableOffset: p.lso,
		LogStartOffset:   p.logStart,
		BufferedBytes:    p.ledger.Outstanding(),
		Err:              p.err,
	}
	switch p.state {
	case psPending:
		s.State = StateWaitingForLeader
	case psActive:
		s.State, s.Leader = StateFetching, p.leader
		if p.paused {
			s.State = StatePaused
		}
	default:
		s.State = StateFailed
	}
	return s
}

// Run fetches until ctx is done, then stops every session, waits for them
// and returns nil. It returns ErrRunning if called twice.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runState != 0 {
		m.mu.Unlock()
		return fmt.Errorf("fetcher: run: %w", ErrRunning)
	}
	m.runState = 1
	m.mu.Unlock()

	// Extra clients for fetcher ids above 0: a broker answers one request
	// per connection at a time, and a kgo client has one fetch connection
	// per broker, so sessions sharing a client would queue behind each
	// other's long polls.
	clients := []*kgo.Client{m.cl}
	for id := 1; id < m.cfg.fetchers; id++ {
		c, err := kgo.NewClient(m.cl.Opts()...)
		if err != nil {
			m.log.Warn("cannot open a client for a fetcher; it shares the mirror's source client", "fetcher", id, "error", err)
			c = m.cl
		}
		clients = append(clients, c)
	}
	// Release fetches (see session.run) need connections of their own:
	// on the sessions' connections they would queue behind the long
	// polls they are meant to overtake.
	var release *kgo.Client
	if m.cfg.releaseFetch {
		c, err := kgo.NewClient(m.cl.Opts()...)
		if err != nil {
			m.log.Warn("cannot open a client for release fetches; released partitions wait for the next long poll", "error", err)
		} else {
			release = c
		}
	}
	m.mu.Lock()
	m.clients = clients
	m.release = release
	m.mu.Unlock()

	m.place(ctx)

	m.mu.Lock()
	for _, s := range m.sessions {
		s.signal()
	}
	m.mu.Unlock()
	m.wg.Wait()
	for _, c := range clients[1:] {
		if c != m.cl {
			c.Close()
		}
	}
	if release != nil {
		release.Close()
	}
	m.mu.Lock()
	m.runState = 2
	m.mu.Unlock()
	return nil
}

// place is the placement loop: it gives partitions waiting for a leader to
// the session of the leader that fresh metadata names, until ctx is done.
func (m *Manager) place(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var due []*fetchPartition
		var next time.Time
		m.mu.Lock()
		for _, p := range m.pending {
			if !p.notBefore.After(now) {
				due = append(due, p)
			} else if next.IsZero() || p.notBefore.Before(next) {
				next = p.notBefore
			}
		}
		m.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if len(due) > 0 {
			m.resolve(ctx, due)
			continue
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// resolve reads metadata for the due partitions' topics and places each on
// its leader's session; partitions without a usable leader wait a backoff.
func (m *Manager) resolve(ctx context.Context, due []*fetchPartition) {
	topics := make(map[string]struct{})
	for _, p := range due {
		topics[p.key.topic] = struct{}{}
	}
	resp, err := wire.Metadata(ctx, m.cl, topics)
	if ctx.Err() != nil {
		return
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	live := due[:0]
	for _, p := range due {
		if m.parts[p.key] == p && p.state == psPending {
			live = append(live, p)
		}
	}
	if err != nil {
		auth := wire.IsAuthenticationErr(err)
		m.metaFail++
		logf := m.log.Debug
		if m.metaFail == 1 || m.metaFail%30 == 0 || auth {
			logf = m.log.Warn
		}
		logf("cannot read source metadata to place partitions", "partitions", len(live), "consecutive_failures", m.metaFail, "retry_in", m.cfg.backoff, "error", err)
		for _, p := range live {
			if auth {
				m.fail(p, authenticationError(-1, err))
				continue
			}
			m.retryLater(p, now, fmt.Errorf("reading source metadata: %w", err))
		}
		return
	}
	m.metaFail = 0
	byName := make(map[string]*kmsg.MetadataResponseTopic, len(resp.Topics))
	for i := range resp.Topics {
		if t := resp.Topics[i].Topic; t != nil {
			byName[*t] = &resp.Topics[i]
		}
	}
	for _, p := range live {
		t := byName[p.key.topic]
		if t == nil {
			m.retryLater(p, now, fmt.Errorf("%s: source metadata does not list the topic", p.key))
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.TopicAuthorizationFailed) {
				m.fail(p, authorizationError(p.key.topic, p.key.partition, err))
			} else {
				m.retryLater(p, now, fmt.Errorf("%s: source metadata: %w", p.key, err))
			}
			continue
		}
		if t.TopicID != ([16]byte{}) {
			if p.topicID == ([16]byte{}) {
				p.topicID = t.TopicID
			} else if p.topicID != t.TopicID {
				m.fail(p, fmt.Errorf("%w: %s had id %s and now has %s: the partition is a different log; stop mirroring it or re-seed it", ErrTopicIDChanged, p.key, wire.UUIDString(p.topicID), wire.UUIDString(t.TopicID)))
				continue
			}
		}
		var mp *kmsg.MetadataResponseTopicPartition
		for i := range t.Partitions {
			if t.Partitions[i].Partition == p.key.partition {
				mp = &t.Partitions[i]
				break
			}
		}
		if mp == nil {
			m.retryLater(p, now, fmt.Errorf("%s: source metadata does not list the partition", p.key))
			continue
		}
		if err := kerr.ErrorForCode(mp.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
			m.retryLater(p, now, fmt.Errorf("%s: source metadata: %w", p.key, err))
			continue
		}
		if mp.Leader < 0 {
			m.retryLater(p, now, fmt.Errorf("%s: the source partition has no leader", p.key))
			continue
		}
		m.assign(ctx, p, mp.Leader, mp.LeaderEpoch)
	}
}

// assign puts p on the session of (leader, fetcher id), starting the
// session's goroutine if it is not running. Called with m.mu held, from
// Run's goroutine only.
func (m *Manager) assign(ctx context.Context, p *fetchPartition, leader, epoch int32) {
	key := sessionKey{broker: leader, fetcher: wire.FetcherID(p.key.topic, p.key.partition, m.cfg.fetchers)}
	s := m.sessions[key]
	if s == nil {
		s = newSession(m, key, m.clients[key.fetcher])
		m.sessions[key] = s
	}
	delete(m.pending, p.key)
	p.state = psActive
	p.sess = s
	p.leader = leader
	p.currentEpoch = epoch
	s.parts[p.key] = p
	if !s.running {
		s.running = true
		m.wg.Add(1)
		go s.run(ctx)
	} else {
		s.signal()
	}
	m.log.Debug("partition placed", "partition", p.key.String(), "leader", leader, "leader_epoch", epoch, "fetcher", key.fetcher, "offset", p.offset)
}

// detach takes p out of its session (which forgets it in its next
// request). Called with m.mu held.
func (m *Manager) detach(p *fetchPartition) {
	if p.sess != nil {
		delete(p.sess.parts, p.key)
		p.sess.signal()
		p.sess = nil
	}
	p.paused = false
	p.parked = false
	p.leader = -1
}

// relocate sends p back to placement after a backoff because of a retriable
// error. Called with m.mu held.
func (m *Manager) relocate(p *fetchPartition, err error) {
	m.detach(p)
	m.retryLater(p, time.Now(), err)
	m.signal()
}

// minRetry keeps a zero backoff from turning placement into a busy loop of
// metadata requests.
const minRetry = 10 * time.Millisecond

func (m *Manager) retryLater(p *fetchPartition, now time.Time, err error) {
	p.state = psPending
	p.notBefore = now.Add(max(m.cfg.backoff, minRetry))
	p.err = err
	m.pending[p.key] = p
	m.log.Debug("partition waits for a leader", "partition", p.key.String(), "retry_in", m.cfg.backoff, "reason", err)
}

// fail stops fetching p and delivers err. Called with m.mu held.
func (m *Manager) fail(p *fetchPartition, err error) {
	m.detach(p)
	delete(m.pending, p.key)
	p.state = psFailed
	p.err = err
	m.log.Warn("partition fetch failed", "partition", p.key.String(), "offset", p.offset, "error", err)
	p.sink.Deliver(Fetched{
		Topic:            p.key.topic,
		Partition:        p.key.partition,
		FetchOffset:      p.offset,
		HighWatermark:    p.hw,
		LastStableOffset: p.lso,
		LogStartOffset:   p.logStart,
		Err:              err,
	})
}

func (m *Manager) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}
