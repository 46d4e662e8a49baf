package fetcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/fetcher/internal/session"
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
	cfg config
	sh  session.Shared // shared with the sessions; its Mu guards the fields below

	sessions map[session.Key]*session.Broker
	clients  []*kgo.Client // per fetcher id; [0] is the source client; set by Run
	runState int           // 0 new, 1 running, 2 stopped
	metaFail int           // consecutive failed metadata reads, for quieter logs
	wg       sync.WaitGroup
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
	m := &Manager{cfg: cfg, sessions: make(map[session.Key]*session.Broker)}
	m.sh.Cl, m.sh.Log, m.sh.Budget = client, cfg.log, cfg.budget.b
	m.sh.Wake = make(chan struct{}, 1)
	m.sh.Parts = make(map[session.TP]*session.Cursor)
	m.sh.Pending = make(map[session.TP]*session.Cursor)
	m.sh.Config = session.Config{
		PartitionMaxBytes: cfg.partitionMaxBytes,
		ResponseMaxBytes:  cfg.responseMaxBytes,
		MinBytes:          cfg.minBytes,
		MaxWait:           cfg.maxWait,
		Backoff:           cfg.backoff,
		MaxBuffered:       cfg.maxBuffered,
		MaxBufferedSet:    cfg.maxBufferedSet,
		CloseTimeout:      cfg.closeTimeout,
		Throttle:          cfg.throttle,
	}
	if h := cfg.fetchHook; h != nil {
		m.sh.Config.FetchHook = func(i session.FetchInfo) { h(FetchInfo(i)) }
	}
	return m, nil
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
	key := session.TP{Topic: p.Topic, Partition: p.Partition}
	m.sh.Mu.Lock()
	defer m.sh.Mu.Unlock()
	if m.runState == 2 {
		return fmt.Errorf("fetcher: add %s: %w", key, ErrStopped)
	}
	if _, ok := m.sh.Parts[key]; ok {
		return fmt.Errorf("fetcher: add %s: %w", key, ErrAlreadyAdded)
	}
	part := &session.Cursor{
		Key:          key,
		TopicID:      p.TopicID,
		Sink:         sink,
		Phase:        session.Pending,
		Leader:       -1,
		Offset:       p.FetchOffset,
		CurrentEpoch: -1,
		LastEpoch:    p.LeaderEpoch,
		HW:           -1,
		LSO:          -1,
		LogStart:     -1,
	}
	m.sh.Parts[key] = part
	m.sh.Pending[key] = part
	m.sh.Budget.AddPartitions(1)
	m.sh.Signal()
	return nil
}

// Remove stops fetching a partition and reports whether it was added. Once
// Remove returns, its sink receives nothing more; acknowledgements (Done) for
// what it received are then ignored, and must not be made after the
// partition is added again.
func (m *Manager) Remove(topic string, partition int32) bool {
	key := session.TP{Topic: topic, Partition: partition}
	m.sh.Mu.Lock()
	defer m.sh.Mu.Unlock()
	p, ok := m.sh.Parts[key]
	if !ok {
		return false
	}
	m.sh.Detach(p)
	delete(m.sh.Parts, key)
	delete(m.sh.Pending, key)
	p.Phase = session.Removed
	m.sh.Budget.AddPartitions(-1)
	// What it delivered is dropped with it: no Done comes for it.
	m.sh.Unbuffer(p, p.Ledger.Outstanding())
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
	m.sh.Mu.Lock()
	defer m.sh.Mu.Unlock()
	p, ok := m.sh.Parts[session.TP{Topic: topic, Partition: partition}]
	if !ok {
		return
	}
	m.sh.Unbuffer(p, int64(bytes))
	if p.Paused && p.Ledger.Outstanding() < m.sh.PauseAt() {
		p.Paused = false
		if p.Session != nil {
			p.Session.Signal()
		}
	}
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
	m.sh.Mu.Lock()
	buffered := m.sh.Buffered
	m.sh.Mu.Unlock()
	bmax, bbuf, bres := m.sh.Budget.Figures()
	return Stats{
		FetchesInFlight:     int(m.sh.InFlight.Load()),
		BufferedBytes:       buffered,
		PartitionMaxBytes:   m.sh.PartitionMax(),
		BudgetMaxBytes:      bmax,
		BudgetBufferedBytes: bbuf,
		BudgetReservedBytes: bres,
	}
}

// Status returns one partition's snapshot.
func (m *Manager) Status(topic string, partition int32) (PartitionStatus, bool) {
	m.sh.Mu.Lock()
	defer m.sh.Mu.Unlock()
	p, ok := m.sh.Parts[session.TP{Topic: topic, Partition: partition}]
	if !ok {
		return PartitionStatus{}, false
	}
	return statusOf(p), true
}

// Snapshot returns every partition's status, sorted by topic and partition.
func (m *Manager) Snapshot() []PartitionStatus {
	m.sh.Mu.Lock()
	out := make([]PartitionStatus, 0, len(m.sh.Parts))
	for _, p := range m.sh.Parts {
		out = append(out, statusOf(p))
	}
	m.sh.Mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionStatus) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}

// statusOf is p's snapshot. Called with m.sh.Mu held.
func statusOf(p *session.Cursor) PartitionStatus {
	s := PartitionStatus{
		Topic:            p.Key.Topic,
		Partition:        p.Key.Partition,
		Leader:           -1,
		FetchOffset:      p.Offset,
		HighWatermark:    p.HW,
		LastStableOffset: p.LSO,
		LogStartOffset:   p.LogStart,
		BufferedBytes:    p.Ledger.Outstanding(),
		Err:              p.Err,
	}
	switch p.Phase {
	case session.Pending:
		s.State = StateWaitingForLeader
	case session.Active:
		s.State, s.Leader = StateFetching, p.Leader
		if p.Paused {
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
	m.sh.Mu.Lock()
	if m.runState != 0 {
		m.sh.Mu.Unlock()
		return fmt.Errorf("fetcher: run: %w", ErrRunning)
	}
	m.runState = 1
	m.sh.Mu.Unlock()

	// Extra clients for fetcher ids above 0: a broker answers one request
	// per connection at a time, and a kgo client has one fetch connection
	// per broker, so sessions sharing a client would queue behind each
	// other's long polls.
	clients := []*kgo.Client{m.sh.Cl}
	for id := 1; id < m.cfg.fetchers; id++ {
		c, err := kgo.NewClient(m.sh.Cl.Opts()...)
		if err != nil {
			m.sh.Log.Warn("cannot open a client for a fetcher; it shares the mirror's source client", "fetcher", id, "error", err)
			c = m.sh.Cl
		}
		clients = append(clients, c)
	}
	// Release fetches (see session.run) need connections of their own:
	// on the sessions' connections they would queue behind the long
	// polls they are meant to overtake.
	var release *kgo.Client
	if m.cfg.releaseFetch {
		c, err := kgo.NewClient(m.sh.Cl.Opts()...)
		if err != nil {
			m.sh.Log.Warn("cannot open a client for release fetches; released partitions wait for the next long poll", "error", err)
		} else {
			release = c
		}
	}
	m.sh.Mu.Lock()
	m.clients = clients
	m.sh.Release = release
	m.sh.Mu.Unlock()

	m.place(ctx)

	m.sh.Mu.Lock()
	for _, s := range m.sessions {
		s.Signal()
	}
	m.sh.Mu.Unlock()
	m.wg.Wait()
	for _, c := range clients[1:] {
		if c != m.sh.Cl {
			c.Close()
		}
	}
	if release != nil {
		release.Close()
	}
	m.sh.Mu.Lock()
	m.runState = 2
	m.sh.Mu.Unlock()
	return nil
}

// place is the placement loop: it gives partitions waiting for a leader to
// the session of the leader that fresh metadata names, until ctx is done.
func (m *Manager) place(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var due []*session.Cursor
		var next time.Time
		m.sh.Mu.Lock()
		for _, p := range m.sh.Pending {
			if !p.NotBefore.After(now) {
				due = append(due, p)
			} else if next.IsZero() || p.NotBefore.Before(next) {
				next = p.NotBefore
			}
		}
		m.sh.Mu.Unlock()
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
		case <-m.sh.Wake:
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
func (m *Manager) resolve(ctx context.Context, due []*session.Cursor) {
	topics := make(map[string]struct{})
	for _, p := range due {
		topics[p.Key.Topic] = struct{}{}
	}
	resp, err := wire.Metadata(ctx, m.sh.Cl, topics)
	if ctx.Err() != nil {
		return
	}

	m.sh.Mu.Lock()
	defer m.sh.Mu.Unlock()
	now := time.Now()
	live := due[:0]
	for _, p := range due {
		if m.sh.Parts[p.Key] == p && p.Phase == session.Pending {
			live = append(live, p)
		}
	}
	if err != nil {
		auth := wire.IsAuthenticationErr(err)
		m.metaFail++
		logf := m.sh.Log.Debug
		if m.metaFail == 1 || m.metaFail%30 == 0 || auth {
			logf = m.sh.Log.Warn
		}
		logf("cannot read source metadata to place partitions", "partitions", len(live), "consecutive_failures", m.metaFail, "retry_in", m.cfg.backoff, "error", err)
		for _, p := range live {
			if auth {
				m.sh.Fail(p, session.AuthenticationError(-1, err))
				continue
			}
			m.sh.RetryLater(p, now, fmt.Errorf("reading source metadata: %w", err))
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
		t := byName[p.Key.Topic]
		if t == nil {
			m.sh.RetryLater(p, now, fmt.Errorf("%s: source metadata does not list the topic", p.Key))
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.TopicAuthorizationFailed) {
				m.sh.Fail(p, session.AuthorizationError(p.Key.Topic, p.Key.Partition, err))
			} else {
				m.sh.RetryLater(p, now, fmt.Errorf("%s: source metadata: %w", p.Key, err))
			}
			continue
		}
		if t.TopicID != ([16]byte{}) {
			if p.TopicID == ([16]byte{}) {
				p.TopicID = t.TopicID
			} else if p.TopicID != t.TopicID {
				m.sh.Fail(p, fmt.Errorf("%w: %s had id %s and now has %s: the partition is a different log; stop mirroring it or re-seed it", ErrTopicIDChanged, p.Key, wire.UUIDString(p.TopicID), wire.UUIDString(t.TopicID)))
				continue
			}
		}
		var mp *kmsg.MetadataResponseTopicPartition
		for i := range t.Partitions {
			if t.Partitions[i].Partition == p.Key.Partition {
				mp = &t.Partitions[i]
				break
			}
		}
		if mp == nil {
			m.sh.RetryLater(p, now, fmt.Errorf("%s: source metadata does not list the partition", p.Key))
			continue
		}
		if err := kerr.ErrorForCode(mp.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
			m.sh.RetryLater(p, now, fmt.Errorf("%s: source metadata: %w", p.Key, err))
			continue
		}
		if mp.Leader < 0 {
			m.sh.RetryLater(p, now, fmt.Errorf("%s: the source partition has no leader", p.Key))
			continue
		}
		m.assign(ctx, p, mp.Leader, mp.LeaderEpoch)
	}
}

// assign puts p on the session of (leader, fetcher id), starting the
// session's goroutine if it is not running. Called with m.sh.Mu held, from
// Run's goroutine only.
func (m *Manager) assign(ctx context.Context, p *session.Cursor, leader, epoch int32) {
	key := session.Key{Broker: leader, Fetcher: wire.FetcherID(p.Key.Topic, p.Key.Partition, m.cfg.fetchers)}
	s := m.sessions[key]
	if s == nil {
		s = session.New(&m.sh, key, m.clients[key.Fetcher])
		m.sessions[key] = s
	}
	delete(m.sh.Pending, p.Key)
	p.Phase = session.Active
	p.Session = s
	p.Leader = leader
	p.CurrentEpoch = epoch
	s.Parts[p.Key] = p
	if !s.Running {
		s.Running = true
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.Run(ctx)
		}()
	} else {
		s.Signal()
	}
	if m.sh.Log.IsDebug() {
		p.Logger(m.sh.Log).Debug("partition placed", "leader", leader, "leader_epoch", epoch, "fetcher", key.Fetcher, "offset", p.Offset)
	}
}
