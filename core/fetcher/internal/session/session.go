package session

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher/delivery"
	"github.com/kmirror/kmirror/core/fetcher/internal/budget"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
)

// MaxCorruptRefetches is how many times a partition refetches a batch that
// fails its CRC check before the partition fails: damage in transit goes
// away on a refetch, damage on the source's disk does not.
const MaxCorruptRefetches = 3

// Key names a session: the source broker and the fetcher id.
type Key struct {
	Broker  int32
	Fetcher int
}

// Broker is one fetch session: it fetches the partitions that one source
// broker leads and that hash to one fetcher id, one FetchRequest at a time,
// from one goroutine.
type Broker struct {
	m    *Shared
	key  Key
	cl   *kgo.Client
	wake chan struct{}
	// waiter is the session's place in the budget's queue.
	waiter budget.Waiter

	// Guarded by m.Mu: the partitions placed here, and whether Run runs.
	Parts   map[TP]*Cursor
	Running bool

	// The broker's fetch session (KIP-227) as this side knows it. Guarded
	// by m.Mu; only the session goroutine reads or writes it.
	id         int32
	epoch      int32 // 0: the next request is a full fetch
	useIDs     bool  // the broker session was created with topic ids
	sent       map[TP]sentEntry
	sessionErr int // consecutive top-level session errors
	failures   int // consecutive failed requests, for quieter logs

	// The requests in flight (see run). Guarded by m.Mu; only the
	// session goroutine writes them.
	main    *inflight
	release *inflight
}

// sentEntry is one partition as the broker's fetch session holds it.
type sentEntry struct {
	p            *Cursor
	topicID      [16]byte
	offset       int64
	currentEpoch int32
	lastEpoch    int32
	maxBytes     int32
}

// inflight is a request and the session state that its success makes true.
type inflight struct {
	req      *wire.FetchRequest
	full     bool
	release  bool                // a release fetch (see run), outside the broker's session
	next     map[TP]sentEntry    // the broker's session after the request; a release fetch's partitions
	names    map[[16]byte]string // topic id -> name, for v13+ responses
	reserved int64               // budget bytes reserved for the response
}

// oorItem is a partition whose fetch offset the source rejected as out of
// range, with the bounds the response carried (-1 when none).
type oorItem struct {
	p      *Cursor
	hw, ls int64
}

// New returns the session of key, fetching through cl. It runs once Run
// is started (Running tells, guarded by m.Mu).
func New(m *Shared, key Key, cl *kgo.Client) *Broker {
	return &Broker{
		m:     m,
		key:   key,
		cl:    cl,
		wake:  make(chan struct{}, 1),
		Parts: make(map[TP]*Cursor),
	}
}

// Signal wakes the session goroutine.
func (s *Broker) Signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// reset makes the next request a full fetch that replaces the broker's
// session (id kept so the broker drops the old one).
func (s *Broker) reset() {
	s.epoch = 0
	s.sent = nil
}

// fetchResult is what a request goroutine brings back to its session.
type fetchResult struct {
	in   *inflight
	resp *kmsg.FetchResponse
	err  error
	took time.Duration
}

// Run is the session goroutine. It exits when ctx is done or when the
// session has no partition left and nothing in flight (placement starts it
// again).
//
// At most two requests are in flight, each sent by a goroutine this one
// waits for: the long poll (the main fetch, in the broker's fetch session)
// and a release fetch. A partition that becomes fetchable while the long
// poll is out (added, placed, resumed after Done) is not in it; instead of
// waiting for it to return (up to replica.fetch.wait.max.ms), it gets a
// release fetch at once: sessionless, no wait, on connections of its own.
// The two requests never share a partition; a partition whose release
// fetch finds nothing new is parked until the next long poll takes it.
// Whatever the timing, a delivery is accepted only from the fetch offset
// the partition has when it arrives (handle), so no offset is delivered
// twice or out of order.
func (s *Broker) Run(ctx context.Context) {
	m := s.m
	m.Budget.AddSessions(1)
	defer m.Budget.AddSessions(-1)
	defer m.Budget.Leave(&s.waiter)
	results := make(chan fetchResult, 2)
	for {
		m.Mu.Lock()
		if ctx.Err() != nil || len(s.Parts) == 0 && s.main == nil && s.release == nil {
			s.Running = false
			pending := 0
			for _, in := range []*inflight{s.main, s.release} {
				if in != nil {
					pending++
				}
			}
			id, epoch := s.id, s.epoch
			s.id = 0
			s.reset()
			m.Mu.Unlock()
			for range pending { // ctx is done: they end at once
				r := <-results
				m.Mu.Lock()
				s.settle(r, 0)
				m.Mu.Unlock()
			}
			if id != 0 && epoch > 0 {
				s.closeBrokerSession(ctx, id)
			}
			return
		}
		var budgetWait <-chan struct{}
		if s.main == nil {
			if in := s.build(); in != nil {
				budgetWait = s.send(ctx, in, s.cl, results)
			}
		}
		if s.main != nil && s.release == nil && m.Release != nil && budgetWait == nil {
			if in := s.buildRelease(); in != nil {
				budgetWait = s.send(ctx, in, m.Release, results)
			}
		}
		m.Mu.Unlock()
		if budgetWait == nil {
			// Nothing to ask the budget for now (or granted): do
			// not hold the sessions queued behind.
			m.Budget.Leave(&s.waiter)
		}

		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-budgetWait:
		case r := <-results:
			// Handling may block (throttle, backoff, out of range
			// reports): let the sessions queued behind go first.
			m.Budget.Leave(&s.waiter)
			s.received(ctx, r)
		}
	}
}

// send reserves the request's possible response size in the budget and
// sends it from a new goroutine, or returns a channel that tells when the
// budget has room again. Called with m.Mu held.
func (s *Broker) send(ctx context.Context, in *inflight, cl *kgo.Client, results chan<- fetchResult) <-chan struct{} {
	m := s.m
	// A partition that has caught up with its high watermark asks for
	// its full size (the broker's session keeps it unchanged) but is
	// not counted in the response's size: a long poll of idle
	// partitions reserves only one partition's worth, and data that
	// arrives during it comes in that much; the next fetch, no longer
	// caught up, asks for all of it.
	floor := int64(m.PartitionMax())
	var want int64
	for _, e := range in.next {
		if p := e.p; p.HW < 0 || p.Offset < p.HW {
			want += int64(e.maxBytes)
		}
	}
	want = min(max(want, floor), int64(m.Config.ResponseMaxBytes))
	grant, wait := m.Budget.Reserve(&s.waiter, want, floor)
	if grant == 0 {
		return wait
	}
	in.reserved = grant
	in.req.MaxBytes = int32(grant)
	if in.release {
		s.release = in
	} else {
		s.main = in
		for k := range in.next {
			s.Parts[k].Parked = false // the long poll has it
		}
	}
	m.InFlight.Add(1)
	broker := cl.Broker(int(s.key.Broker))
	go func() {
		start := time.Now()
		kresp, err := broker.Request(ctx, in.req)
		r := fetchResult{in: in, err: err, took: time.Since(start)}
		if err == nil {
			r.resp = kresp.(*kmsg.FetchResponse)
		}
		results <- r // buffered for both requests: never blocks
	}()
	return nil
}

// settle ends a request: it is no longer in flight, its reservation gives
// way to the bytes it delivered. Called with m.Mu held, except when the
// session exits.
func (s *Broker) settle(r fetchResult, delivered int64) {
	m := s.m
	m.InFlight.Add(-1)
	if r.in == s.main {
		s.main = nil
	} else if r.in == s.release {
		s.release = nil
	}
	m.Budget.Settle(r.in.reserved, delivered)
}

// received handles a request's result in the session goroutine.
func (s *Broker) received(ctx context.Context, r fetchResult) {
	m := s.m
	in := r.in
	if hook := m.Config.FetchHook; hook != nil && ctx.Err() == nil {
		info := FetchInfo{Broker: s.key.Broker, Latency: r.took, Release: in.release, Err: r.err}
		if r.resp != nil {
			info.Bytes = wire.RecordBytes(r.resp)
		}
		hook(info)
	}
	abandon := func(f func()) {
		m.Mu.Lock()
		s.settle(r, 0)
		if f != nil {
			f()
		}
		m.Mu.Unlock()
	}
	if ctx.Err() != nil {
		abandon(nil)
		return
	}
	if r.err != nil {
		if in.release {
			// The long poll, on its own connections, finds out
			// whether the broker is gone; these partitions wait for
			// it.
			m.Log.Debug("release fetch failed; its partitions wait for the next long poll", "broker", s.key.Broker, "error", r.err)
			abandon(func() { s.park(in) })
			return
		}
		abandon(nil)
		s.requestFailed(r.err)
		return
	}
	resp := r.resp
	if n := wire.RecordBytes(resp); n > 0 && m.Config.Throttle != nil {
		if err := m.Config.Throttle(ctx, n); err != nil {
			// Nothing delivered; the broker's session moved on
			// without us, so start a new one.
			abandon(func() {
				if in.release {
					s.park(in)
				} else {
					s.reset()
				}
			})
			if ctx.Err() == nil {
				m.Log.Warn("fetch throttle failed; refetching", "broker", s.key.Broker, "error", err)
				_ = backoff.Sleep(ctx, m.Config.Backoff) // an ended ctx ends the loop
			}
			return
		}
	}

	// Cutting and CRC-checking batches is the costly part: do it
	// before taking the Manager's lock.
	scans := wire.Scan(resp)
	m.Mu.Lock()
	var oor []oorItem
	var wait bool
	var delivered int64
	if in.release {
		oor, delivered = s.handleRelease(in, resp, scans)
	} else {
		oor, wait, delivered = s.handle(in, resp, scans)
	}
	s.settle(r, delivered)
	m.Mu.Unlock()
	if len(oor) > 0 {
		s.reportOutOfRange(ctx, oor)
	}
	if wait {
		_ = backoff.Sleep(ctx, m.Config.Backoff) // an ended ctx ends the loop
	}
}

// park leaves the partitions of a release fetch to the next long poll.
// Called with m.Mu held.
func (s *Broker) park(in *inflight) {
	for k, e := range in.next {
		if p := s.Parts[k]; p == e.p {
			p.Parked = true
		}
	}
}

// fetchable is the session's partitions that may be fetched, without
// those that skip says to leave out, each with what to send for it.
// Called with m.Mu held.
func (s *Broker) fetchable(skip func(TP, *Cursor) bool) (want map[TP]sentEntry, allIDs bool) {
	partMax := s.m.PartitionMax()
	want = make(map[TP]sentEntry, len(s.Parts))
	allIDs = true
	for k, p := range s.Parts {
		if p.Paused || skip(k, p) {
			continue
		}
		want[k] = sentEntry{
			p:            p,
			topicID:      p.TopicID,
			offset:       p.Offset,
			currentEpoch: p.CurrentEpoch,
			lastEpoch:    p.LastEpoch,
			maxBytes:     max(partMax, p.MaxBytes),
		}
		allIDs = allIDs && p.TopicID != [16]byte{}
	}
	return want, allIDs
}

// build makes the next long poll from the session's fetchable partitions
// (but those in a release fetch), nil when there is none. Called with m.Mu
// held.
func (s *Broker) build() *inflight {
	want, allIDs := s.fetchable(func(k TP, _ *Cursor) bool {
		if s.release == nil {
			return false
		}
		_, ok := s.release.next[k]
		return ok
	})
	if len(want) == 0 {
		return nil
	}
	if s.epoch != 0 && s.useIDs && !allIDs {
		// A topic without an id cannot join a session addressed by id.
		s.reset()
	}
	in := &inflight{full: s.epoch == 0, next: want}
	if in.full {
		s.useIDs = allIDs
	}
	req := s.request(in, s.useIDs)
	req.MaxWaitMillis = int32(s.m.Config.MaxWait.Milliseconds())
	req.MinBytes = s.m.Config.MinBytes
	req.SessionID = s.id
	req.SessionEpoch = s.epoch
	return in
}

// buildRelease makes a release fetch for the session's fetchable
// partitions that are neither in the long poll in flight nor parked, nil
// when there is none. Called with m.Mu held, while the long poll is out.
func (s *Broker) buildRelease() *inflight {
	want, allIDs := s.fetchable(func(k TP, p *Cursor) bool {
		_, inMain := s.main.next[k]
		return inMain || p.Parked
	})
	if len(want) == 0 {
		return nil
	}
	in := &inflight{full: true, release: true, next: want}
	req := s.request(in, allIDs)
	// Sessionless and without waiting: what is there now.
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.SessionID = 0
	req.SessionEpoch = -1
	return in
}

// request fills in.req with in.next's partitions: all of them for a full
// fetch, else those the broker's session does not hold as they are, and
// the ones it holds that are no longer wanted as forgotten. MaxBytes is set
// by send. Called with m.Mu held.
func (s *Broker) request(in *inflight, useIDs bool) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1     // a consumer; v15+ carries it in ReplicaState, -1 by default
	req.IsolationLevel = 0 // read_uncommitted: markers and open transactions are mirrored as they are
	in.names = make(map[[16]byte]string)

	topicIdx := make(map[string]int)
	add := func(k TP, e sentEntry) {
		i, ok := topicIdx[k.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = k.Topic, e.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topicIdx[k.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = k.Partition
		rp.FetchOffset = e.offset
		rp.CurrentLeaderEpoch = e.currentEpoch
		rp.LastFetchedEpoch = e.lastEpoch
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = e.maxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	for k, e := range in.next {
		in.names[e.topicID] = k.Topic // responses may carry any partition of the session
		if old, ok := s.sent[k]; !in.full && ok && old == e {
			continue // the broker has it as it is
		}
		add(k, e)
	}
	if !in.full {
		forgotten := make(map[string]int)
		for k, old := range s.sent {
			if _, ok := in.next[k]; ok {
				continue
			}
			i, ok := forgotten[k.Topic]
			if !ok {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID = k.Topic, old.topicID
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
				i = len(req.ForgottenTopics) - 1
				forgotten[k.Topic] = i
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, k.Partition)
		}
	}
	in.req = &wire.FetchRequest{FetchRequest: req, Highest: 12}
	if useIDs {
		in.req.Highest = req.MaxVersion()
	}
	return req
}

// requestFailed handles a fetch that got no response: the broker is
// unreachable, gone, or refused the connection's credentials.
func (s *Broker) requestFailed(err error) {
	m := s.m
	m.Mu.Lock()
	defer m.Mu.Unlock()
	s.reset()
	if wire.IsAuthenticationErr(err) {
		aerr := AuthenticationError(s.key.Broker, err)
		m.Log.Error("source broker rejected the mirror's credentials; failing its partitions", "broker", s.key.Broker, "partitions", len(s.Parts), "error", err)
		for _, p := range s.Parts {
			m.Fail(p, aerr)
		}
		return
	}
	// A broker that stays unreachable fails every backoff: say so once,
	// then now and then.
	s.failures++
	logf := m.Log.Debug
	if s.failures == 1 || s.failures%30 == 0 {
		logf = m.Log.Info
	}
	logf("fetch from source broker failed; partitions wait for fresh metadata", "broker", s.key.Broker, "fetcher", s.key.Fetcher, "partitions", len(s.Parts), "consecutive_failures", s.failures, "retry_in", m.Config.Backoff, "error", err)
	for _, p := range s.Parts {
		m.Relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", p.Key, s.key.Broker, err))
	}
}

// handle applies a long poll's response: session bookkeeping, then each
// partition. Called with m.Mu held. It returns the partitions found out of
// range (to report once their log bounds are read, without the lock),
// whether the session should back off, and the bytes delivered.
func (s *Broker) handle(in *inflight, resp *kmsg.FetchResponse, scans *wire.ScannedResponse) (oor []oorItem, wait bool, delivered int64) {
	m := s.m
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		s.sessionErr++
		wait = s.sessionErr > 1
		switch {
		case errors.Is(err, kerr.FetchSessionIDNotFound):
			// Evicted from the broker's session cache (or it never
			// had room): start over with a new session.
			s.id = 0
			s.reset()
			m.Log.Info("fetch session not found on the broker; starting a new one", "broker", s.key.Broker, "fetcher", s.key.Fetcher)
		case errors.Is(err, kerr.InvalidFetchSessionEpoch):
			s.reset()
			m.Log.Info("fetch session epoch rejected; starting a new session", "broker", s.key.Broker, "fetcher", s.key.Fetcher)
		case errors.Is(err, kerr.FetchSessionTopicIDError), errors.Is(err, kerr.InconsistentTopicID):
			s.id = 0
			s.reset()
			m.Log.Info("fetch session topic id error; re-reading metadata", "broker", s.key.Broker, "error", err)
			for _, p := range s.Parts {
				m.Relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", p.Key, s.key.Broker, err))
			}
		default:
			s.reset()
			wait = true
			m.Log.Warn("unexpected fetch error from source broker; starting a new session after a backoff", "broker", s.key.Broker, "error", err)
		}
		return nil, wait, 0
	}
	s.sessionErr = 0
	s.failures = 0
	switch {
	case resp.Version < 7 || resp.SessionID == 0:
		// No session granted (old broker, or its cache is full) or
		// the broker closed it: full fetches until it grants one.
		s.id = 0
		s.reset()
	case in.full:
		s.id, s.epoch, s.sent = resp.SessionID, 1, in.next
	default:
		s.epoch, s.sent = wire.NextEpoch(s.epoch), in.next
	}

	oor, resetSession, delivered := s.handlePartitions(in, resp, scans)
	if resetSession {
		s.reset()
	}
	return oor, false, delivered
}

// handleRelease applies a release fetch's response. Its partitions that got
// nothing new are parked until the next long poll. Called with m.Mu held.
func (s *Broker) handleRelease(in *inflight, resp *kmsg.FetchResponse, scans *wire.ScannedResponse) (oor []oorItem, delivered int64) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		s.m.Log.Debug("release fetch failed; its partitions wait for the next long poll", "broker", s.key.Broker, "error", err)
		s.park(in)
		return nil, 0
	}
	oor, _, delivered = s.handlePartitions(in, resp, scans)
	for k, e := range in.next {
		if p := s.Parts[k]; p == e.p && p.Offset == e.offset {
			p.Parked = true
		}
	}
	return oor, delivered
}

// handlePartitions applies each partition of an error-free response.
// Called with m.Mu held.
func (s *Broker) handlePartitions(in *inflight, resp *kmsg.FetchResponse, scans *wire.ScannedResponse) (oor []oorItem, resetSession bool, delivered int64) {
	m := s.m
	var pinned []share
	defer func() { delivered += m.pin(pinned, int64(scans.Bytes)-delivered) }()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		name := rt.Topic
		if resp.Version >= 13 {
			name = in.names[rt.TopicID]
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			key := TP{name, rp.Partition}
			ent, ok := in.next[key]
			if !ok {
				continue
			}
			p := s.Parts[key]
			if p == nil || p != ent.p || p.Phase != Active || p.Offset != ent.offset {
				continue // removed, re-added or moved meanwhile: stale
			}
			err := kerr.ErrorForCode(rp.ErrorCode)
			switch {
			case err == nil:
				if n := s.apply(p, rp, &scans.Parts[i][j], ent.maxBytes); n > 0 {
					delivered += n
					pinned = append(pinned, share{p: p, n: n})
				}
			case errors.Is(err, kerr.OffsetOutOfRange):
				m.Detach(p)
				p.Phase = Reporting
				oor = append(oor, oorItem{p: p, hw: rp.HighWatermark, ls: rp.LogStartOffset})
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				m.Fail(p, AuthorizationError(key.Topic, key.Partition, err))
			case wire.Retriable(err):
				if errors.Is(err, kerr.InconsistentTopicID) || errors.Is(err, kerr.UnknownTopicID) {
					resetSession = true // the broker resolved the name once, at insertion
				}
				m.Relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", key, s.key.Broker, err))
			default:
				m.Fail(p, fmt.Errorf("%s: fetching from source broker %d: %w (not retriable)", key, s.key.Broker, err))
			}
		}
	}
	return oor, resetSession, delivered
}

// apply delivers one partition's error-free response, in which it was
// asked for at most maxBytes, and returns the bytes delivered. Called with
// m.Mu held.
func (s *Broker) apply(p *Cursor, rp *kmsg.FetchResponseTopicPartition, sc *wire.Scanned, maxBytes int32) int64 {
	m := s.m
	if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
		m.Fail(p, &delivery.DivergedError{
			Topic:              p.Key.Topic,
			Partition:          p.Key.Partition,
			FetchOffset:        p.Offset,
			LastFetchedEpoch:   p.LastEpoch,
			DivergingEpoch:     rp.DivergingEpoch.Epoch,
			DivergingEndOffset: rp.DivergingEpoch.EndOffset,
		})
		return 0
	}
	changed := false
	update := func(dst *int64, v int64) {
		if v >= 0 && *dst != v {
			*dst, changed = v, true
		}
	}
	update(&p.HW, rp.HighWatermark)
	update(&p.LSO, rp.LastStableOffset)
	update(&p.LogStart, rp.LogStartOffset)

	batches := sc.Batches
	for len(batches) > 0 && batches[0].NextOffset() <= p.Offset {
		batches = batches[1:] // ends before the fetch offset
	}
	n := 0
	var largest int32
	for _, b := range batches {
		n += len(b)
		largest = max(largest, int32(min(len(b), math.MaxInt32)))
	}
	p.Err = nil
	// Read what the fetcher needs from the batches before delivering them:
	// the receiver owns them from then on and re-stamps them in place (the
	// writer zeroes their base offset).
	var nextOffset int64
	var nextEpoch int32
	if len(batches) > 0 {
		last := batches[len(batches)-1]
		nextOffset, nextEpoch = last.NextOffset(), last.PartitionLeaderEpoch()
	}
	if len(batches) > 0 || changed {
		p.Sink.Deliver(delivery.Fetched{
			Topic:            p.Key.Topic,
			Partition:        p.Key.Partition,
			FetchOffset:      p.Offset,
			Batches:          batches,
			HighWatermark:    p.HW,
			LastStableOffset: p.LSO,
			LogStartOffset:   p.LogStart,
		})
	}
	if len(batches) > 0 {
		p.Offset = nextOffset
		p.LastEpoch = nextEpoch
		// A partition whose batches are larger than its fetch size
		// (which shrinks as partitions are added) asks next for the
		// largest it just got, so that a broker does not cut its next
		// batch (a partial batch costs a second round trip).
		p.MaxBytes = 0
		if largest > m.PartitionMax() {
			p.MaxBytes = largest
		}
		p.Corrupt = 0
		p.Ledger.Add(int64(n))
		m.Buffered += int64(n)
		if p.Ledger.Outstanding() >= m.PauseAt() {
			p.Paused = true // forgotten in the next request until Done
		}
	}
	if err := sc.Err; err != nil {
		err = fmt.Errorf("%s: source batch at or after offset %d: %w", p.Key, p.Offset, err)
		if errors.Is(err, batch.ErrUnsupportedMagic) || p.Corrupt >= MaxCorruptRefetches {
			m.Fail(p, err)
			return int64(n)
		}
		p.Corrupt++
		m.Relocate(p, err)
		return int64(n)
	}
	if rest := sc.Rest; len(batches) == 0 && len(rest) >= batch.LogOverhead {
		// Only a partial batch: it is larger than the partition limit
		// (a broker that does not return an oversized first batch
		// whole). Ask for it whole, once.
		size := int64(binary.BigEndian.Uint32(rest[8:12])) + batch.LogOverhead
		if size > int64(maxBytes) && size <= math.MaxInt32 {
			p.MaxBytes = int32(size)
		}
	}
	return int64(n)
}

// reportOutOfRange reads the log bounds of partitions found out of range
// and fails them with an *OffsetOutOfRangeError.
func (s *Broker) reportOutOfRange(ctx context.Context, items []oorItem) {
	m := s.m
	parts := make([]wire.Partition, len(items))
	for i, it := range items {
		parts[i] = wire.Partition{Topic: it.p.Key.Topic, Partition: it.p.Key.Partition}
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	starts := m.listOffsets(lctx, parts, -2)
	ends := m.listOffsets(lctx, parts, -1)
	cancel()

	m.Mu.Lock()
	defer m.Mu.Unlock()
	for _, it := range items {
		p := it.p
		if m.Parts[p.Key] != p || p.Phase != Reporting {
			continue
		}
		at := wire.Partition{Topic: p.Key.Topic, Partition: p.Key.Partition}
		ls, ok := starts[at]
		if !ok {
			ls = it.ls
		}
		le, ok := ends[at]
		if !ok {
			le = it.hw
		}
		if ls >= 0 {
			p.LogStart = ls
		}
		if le >= 0 {
			p.HW = le
		}
		m.Fail(p, &delivery.OffsetOutOfRangeError{
			Topic:          p.Key.Topic,
			Partition:      p.Key.Partition,
			FetchOffset:    p.Offset,
			LogStartOffset: ls,
			LogEndOffset:   le,
		})
	}
}

// closeBrokerSession tells the broker to drop the session, so stopped
// mirrors do not hold slots of its session cache. Best effort, bounded by
// closeTimeout even when ctx is already done.
func (s *Broker) closeBrokerSession(ctx context.Context, id int32) {
	if err := wire.CloseSession(ctx, s.cl, s.key.Broker, id, s.m.Config.CloseTimeout); err != nil {
		s.m.Log.Debug("closing the fetch session failed; the broker will evict it", "broker", s.key.Broker, "session", id, "error", err)
	}
}
