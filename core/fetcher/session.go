package fetcher

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
	"github.com/kmirror/kmirror/core/fetcher/internal/budget"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
)

// maxCorruptRefetches is how many times a partition refetches a batch that
// fails its CRC check before the partition fails: damage in transit goes
// away on a refetch, damage on the source's disk does not.
const maxCorruptRefetches = 3

type sessionKey struct {
	broker  int32
	fetcher int
}

// session fetches the partitions that one source broker leads and that
// hash to one fetcher id, one FetchRequest at a time, from one goroutine.
type session struct {
	m    *Manager
	key  sessionKey
	cl   *kgo.Client
	wake chan struct{}
	// waiter is the session's place in the budget's queue.
	waiter budget.Waiter

	// Guarded by m.mu.
	parts   map[tp]*fetchPartition
	running bool

	// The broker's fetch session (KIP-227) as this side knows it. Guarded
	// by m.mu; only the session goroutine reads or writes it.
	id         int32
	epoch      int32 // 0: the next request is a full fetch
	useIDs     bool  // the broker session was created with topic ids
	sent       map[tp]sentEntry
	sessionErr int // consecutive top-level session errors
	failures   int // consecutive failed requests, for quieter logs

	// The requests in flight (see run). Guarded by m.mu; only the
	// session goroutine writes them.
	main    *inflight
	release *inflight
}

// sentEntry is one partition as the broker's fetch session holds it.
type sentEntry struct {
	p            *fetchPartition
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
	next     map[tp]sentEntry    // the broker's session after the request; a release fetch's partitions
	names    map[[16]byte]string // topic id -> name, for v13+ responses
	reserved int64               // budget bytes reserved for the response
}

// oorItem is a partition whose fetch offset the source rejected as out of
// range, with the bounds the response carried (-1 when none).
type oorItem struct {
	p      *fetchPartition
	hw, ls int64
}

func newSession(m *Manager, key sessionKey, cl *kgo.Client) *session {
	return &session{
		m:     m,
		key:   key,
		cl:    cl,
		wake:  make(chan struct{}, 1),
		parts: make(map[tp]*fetchPartition),
	}
}

func (s *session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// reset makes the next request a full fetch that replaces the broker's
// session (id kept so the broker drops the old one).
func (s *session) reset() {
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

// run is the session goroutine. It exits when ctx is done or when the
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
func (s *session) run(ctx context.Context) {
	defer s.m.wg.Done()
	m := s.m
	m.budget.AddSessions(1)
	defer m.budget.AddSessions(-1)
	defer m.budget.Leave(&s.waiter)
	results := make(chan fetchResult, 2)
	for {
		m.mu.Lock()
		if ctx.Err() != nil || len(s.parts) == 0 && s.main == nil && s.release == nil {
			s.running = false
			pending := 0
			for _, in := range []*inflight{s.main, s.release} {
				if in != nil {
					pending++
				}
			}
			id, epoch := s.id, s.epoch
			s.id = 0
			s.reset()
			m.mu.Unlock()
			for range pending { // ctx is done: they end at once
				r := <-results
				m.mu.Lock()
				s.settle(r, 0)
				m.mu.Unlock()
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
		if s.main != nil && s.release == nil && m.release != nil && budgetWait == nil {
			if in := s.buildRelease(); in != nil {
				budgetWait = s.send(ctx, in, m.release, results)
			}
		}
		m.mu.Unlock()
		if budgetWait == nil {
			// Nothing to ask the budget for now (or granted): do
			// not hold the sessions queued behind.
			m.budget.Leave(&s.waiter)
		}

		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-budgetWait:
		case r := <-results:
			// Handling may block (throttle, backoff, out of range
			// reports): let the sessions queued behind go first.
			m.budget.Leave(&s.waiter)
			s.received(ctx, r)
		}
	}
}

// send reserves the request's possible response size in the budget and
// sends it from a new goroutine, or returns a channel that tells when the
// budget has room again. Called with m.mu held.
func (s *session) send(ctx context.Context, in *inflight, cl *kgo.Client, results chan<- fetchResult) <-chan struct{} {
	m := s.m
	// A partition that has caught up with its high watermark asks for
	// its full size (the broker's session keeps it unchanged) but is
	// not counted in the response's size: a long poll of idle
	// partitions reserves only one partition's worth, and data that
	// arrives during it comes in that much; the next fetch, no longer
	// caught up, asks for all of it.
	floor := int64(m.partitionMax())
	var want int64
	for _, e := range in.next {
		if p := e.p; p.hw < 0 || p.offset < p.hw {
			want += int64(e.maxBytes)
		}
	}
	want = min(max(want, floor), int64(m.cfg.responseMaxBytes))
	grant, wait := m.budget.Reserve(&s.waiter, want, floor)
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
			s.parts[k].parked = false // the long poll has it
		}
	}
	m.inFlight.Add(1)
	broker := cl.Broker(int(s.key.broker))
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
// way to the bytes it delivered. Called with m.mu held, except when the
// session exits.
func (s *session) settle(r fetchResult, delivered int64) {
	m := s.m
	m.inFlight.Add(-1)
	if r.in == s.main {
		s.main = nil
	} else if r.in == s.release {
		s.release = nil
	}
	m.budget.Settle(r.in.reserved, delivered)
}

// received handles a request's result in the session goroutine.
func (s *session) received(ctx context.Context, r fetchResult) {
	m := s.m
	in := r.in
	if hook := m.cfg.fetchHook; hook != nil && ctx.Err() == nil {
		info := FetchInfo{Broker: s.key.broker, Latency: r.took, Release: in.release, Err: r.err}
		if r.resp != nil {
			info.Bytes = wire.RecordBytes(r.resp)
		}
		hook(info)
	}
	abandon := func(f func()) {
		m.mu.Lock()
		s.settle(r, 0)
		if f != nil {
			f()
		}
		m.mu.Unlock()
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
			m.log.Debug("release fetch failed; its partitions wait for the next long poll", "broker", s.key.broker, "error", r.err)
			abandon(func() { s.park(in) })
			return
		}
		abandon(nil)
		s.requestFailed(r.err)
		return
	}
	resp := r.resp
	if n := wire.RecordBytes(resp); n > 0 && m.cfg.throttle != nil {
		if err := m.cfg.throttle(ctx, n); err != nil {
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
				m.log.Warn("fetch throttle failed; refetching", "broker", s.key.broker, "error", err)
				_ = backoff.Sleep(ctx, m.cfg.backoff) // an ended ctx ends the loop
			}
			return
		}
	}

	// Cutting and CRC-checking batches is the costly part: do it
	// before taking the Manager's lock.
	scans := wire.Scan(resp)
	m.mu.Lock()
	var oor []oorItem
	var wait bool
	var delivered int64
	if in.release {
		oor, delivered = s.handleRelease(in, resp, scans)
	} else {
		oor, wait, delivered = s.handle(in, resp, scans)
	}
	s.settle(r, delivered)
	m.mu.Unlock()
	if len(oor) > 0 {
		s.reportOutOfRange(ctx, oor)
	}
	if wait {
		_ = backoff.Sleep(ctx, m.cfg.backoff) // an ended ctx ends the loop
	}
}

// park leaves the partitions of a release fetch to the next long poll.
// Called with m.mu held.
func (s *session) park(in *inflight) {
	for k, e := range in.next {
		if p := s.parts[k]; p == e.p {
			p.parked = true
		}
	}
}

// fetchable is the session's partitions that may be fetched, without
// those that skip says to leave out, each with what to send for it.
// Called with m.mu held.
func (s *session) fetchable(skip func(tp, *fetchPartition) bool) (want map[tp]sentEntry, allIDs bool) {
	partMax := s.m.partitionMax()
	want = make(map[tp]sentEntry, len(s.parts))
	allIDs = true
	for k, p := range s.parts {
		if p.paused || skip(k, p) {
			continue
		}
		want[k] = sentEntry{
			p:            p,
			topicID:      p.topicID,
			offset:       p.offset,
			currentEpoch: p.currentEpoch,
			lastEpoch:    p.lastEpoch,
			maxBytes:     max(partMax, p.maxBytes),
		}
		allIDs = allIDs && p.topicID != [16]byte{}
	}
	return want, allIDs
}

// build makes the next long poll from the session's fetchable partitions
// (but those in a release fetch), nil when there is none. Called with m.mu
// held.
func (s *session) build() *inflight {
	want, allIDs := s.fetchable(func(k tp, _ *fetchPartition) bool {
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
	req.MaxWaitMillis = int32(s.m.cfg.maxWait.Milliseconds())
	req.MinBytes = s.m.cfg.minBytes
	req.SessionID = s.id
	req.SessionEpoch = s.epoch
	return in
}

// buildRelease makes a release fetch for the session's fetchable
// partitions that are neither in the long poll in flight nor parked, nil
// when there is none. Called with m.mu held, while the long poll is out.
func (s *session) buildRelease() *inflight {
	want, allIDs := s.fetchable(func(k tp, p *fetchPartition) bool {
		_, inMain := s.main.next[k]
		return inMain || p.parked
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
// by send. Called with m.mu held.
func (s *session) request(in *inflight, useIDs bool) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1     // a consumer; v15+ carries it in ReplicaState, -1 by default
	req.IsolationLevel = 0 // read_uncommitted: markers and open transactions are mirrored as they are
	in.names = make(map[[16]byte]string)

	topicIdx := make(map[string]int)
	add := func(k tp, e sentEntry) {
		i, ok := topicIdx[k.topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = k.topic, e.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topicIdx[k.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = k.partition
		rp.FetchOffset = e.offset
		rp.CurrentLeaderEpoch = e.currentEpoch
		rp.LastFetchedEpoch = e.lastEpoch
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = e.maxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	for k, e := range in.next {
		in.names[e.topicID] = k.topic // responses may carry any partition of the session
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
			i, ok := forgotten[k.topic]
			if !ok {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID = k.topic, old.topicID
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
				i = len(req.ForgottenTopics) - 1
				forgotten[k.topic] = i
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, k.partition)
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
func (s *session) requestFailed(err error) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	s.reset()
	if wire.IsAuthenticationErr(err) {
		aerr := authenticationError(s.key.broker, err)
		m.log.Error("source broker rejected the mirror's credentials; failing its partitions", "broker", s.key.broker, "partitions", len(s.parts), "error", err)
		for _, p := range s.parts {
			m.fail(p, aerr)
		}
		return
	}
	// A broker that stays unreachable fails every backoff: say so once,
	// then now and then.
	s.failures++
	logf := m.log.Debug
	if s.failures == 1 || s.failures%30 == 0 {
		logf = m.log.Info
	}
	logf("fetch from source broker failed; partitions wait for fresh metadata", "broker", s.key.broker, "fetcher", s.key.fetcher, "partitions", len(s.parts), "consecutive_failures", s.failures, "retry_in", m.cfg.backoff, "error", err)
	for _, p := range s.parts {
		m.relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", p.key, s.key.broker, err))
	}
}

// handle applies a long poll's response: session bookkeeping, then each
// partition. Called with m.mu held. It returns the partitions found out of
// range (to report once their log bounds are read, without the lock),
// whether the session should back off, and the bytes delivered.
func (s *session) handle(in *inflight, resp *kmsg.FetchResponse, scans *wire.ScannedResponse) (oor []oorItem, wait bool, delivered int64) {
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
			m.log.Info("fetch session not found on the broker; starting a new one", "broker", s.key.broker, "fetcher", s.key.fetcher)
		case errors.Is(err, kerr.InvalidFetchSessionEpoch):
			s.reset()
			m.log.Info("fetch session epoch rejected; starting a new session", "broker", s.key.broker, "fetcher", s.key.fetcher)
		case errors.Is(err, kerr.FetchSessionTopicIDError), errors.Is(err, kerr.InconsistentTopicID):
			s.id = 0
			s.reset()
			m.log.Info("fetch session topic id error; re-reading metadata", "broker", s.key.broker, "error", err)
			for _, p := range s.parts {
				m.relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", p.key, s.key.broker, err))
			}
		default:
			s.reset()
			wait = true
			m.log.Warn("unexpected fetch error from source broker; starting a new session after a backoff", "broker", s.key.broker, "error", err)
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
// nothing new are parked until the next long poll. Called with m.mu held.
func (s *session) handleRelease(in *inflight, resp *kmsg.FetchResponse, scans *wire.ScannedResponse) (oor []oorItem, delivered int64) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		s.m.log.Debug("release fetch failed; its partitions wait for the next long poll", "broker", s.key.broker, "error", err)
		s.park(in)
		return nil, 0
	}
	oor, _, delivered = s.handlePartitions(in, resp, scans)
	for k, e := range in.next {
		if p := s.parts[k]; p == e.p && p.offset == e.offset {
			p.parked = true
		}
	}
	return oor, delivered
}

// handlePartitions applies each partition of an error-free response.
// Called with m.mu held.
func (s *session) handlePartitions(in *inflight, resp *kmsg.FetchResponse, scans *wire.ScannedResponse) (oor []oorItem, resetSession bool, delivered int64) {
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
			key := tp{name, rp.Partition}
			ent, ok := in.next[key]
			if !ok {
				continue
			}
			p := s.parts[key]
			if p == nil || p != ent.p || p.state != psActive || p.offset != ent.offset {
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
				m.detach(p)
				p.state = psReporting
				oor = append(oor, oorItem{p: p, hw: rp.HighWatermark, ls: rp.LogStartOffset})
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				m.fail(p, authorizationError(key.topic, key.partition, err))
			case wire.Retriable(err):
				if errors.Is(err, kerr.InconsistentTopicID) || errors.Is(err, kerr.UnknownTopicID) {
					resetSession = true // the broker resolved the name once, at insertion
				}
				m.relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", key, s.key.broker, err))
			default:
				m.fail(p, fmt.Errorf("%s: fetching from source broker %d: %w (not retriable)", key, s.key.broker, err))
			}
		}
	}
	return oor, resetSession, delivered
}

// apply delivers one partition's error-free response, in which it was
// asked for at most maxBytes, and returns the bytes delivered. Called with
// m.mu held.
func (s *session) apply(p *fetchPartition, rp *kmsg.FetchResponseTopicPartition, sc *wire.Scanned, maxBytes int32) int64 {
	m := s.m
	if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
		m.fail(p, &DivergedError{
			Topic:              p.key.topic,
			Partition:          p.key.partition,
			FetchOffset:        p.offset,
			LastFetchedEpoch:   p.lastEpoch,
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
	update(&p.hw, rp.HighWatermark)
	update(&p.lso, rp.LastStableOffset)
	update(&p.logStart, rp.LogStartOffset)

	batches := sc.Batches
	for len(batches) > 0 && batches[0].NextOffset() <= p.offset {
		batches = batches[1:] // ends before the fetch offset
	}
	n := 0
	var largest int32
	for _, b := range batches {
		n += len(b)
		largest = max(largest, int32(min(len(b), math.MaxInt32)))
	}
	p.err = nil
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
		p.sink.Deliver(Fetched{
			Topic:            p.key.topic,
			Partition:        p.key.partition,
			FetchOffset:      p.offset,
			Batches:          batches,
			HighWatermark:    p.hw,
			LastStableOffset: p.lso,
			LogStartOffset:   p.logStart,
		})
	}
	if len(batches) > 0 {
		p.offset = nextOffset
		p.lastEpoch = nextEpoch
		// A partition whose batches are larger than its fetch size
		// (which shrinks as partitions are added) asks next for the
		// largest it just got, so that a broker does not cut its next
		// batch (a partial batch costs a second round trip).
		p.maxBytes = 0
		if largest > m.partitionMax() {
			p.maxBytes = largest
		}
		p.corrupt = 0
		p.ledger.Add(int64(n))
		m.buffered += int64(n)
		if p.ledger.Outstanding() >= m.pauseAt() {
			p.paused = true // forgotten in the next request until Done
		}
	}
	if err := sc.Err; err != nil {
		err = fmt.Errorf("%s: source batch at or after offset %d: %w", p.key, p.offset, err)
		if errors.Is(err, batch.ErrUnsupportedMagic) || p.corrupt >= maxCorruptRefetches {
			m.fail(p, err)
			return int64(n)
		}
		p.corrupt++
		m.relocate(p, err)
		return int64(n)
	}
	if rest := sc.Rest; len(batches) == 0 && len(rest) >= batch.LogOverhead {
		// Only a partial batch: it is larger than the partition limit
		// (a broker that does not return an oversized first batch
		// whole). Ask for it whole, once.
		size := int64(binary.BigEndian.Uint32(rest[8:12])) + batch.LogOverhead
		if size > int64(maxBytes) && size <= math.MaxInt32 {
			p.maxBytes = int32(size)
		}
	}
	return int64(n)
}

// reportOutOfRange reads the log bounds of partitions found out of range
// and fails them with an *OffsetOutOfRangeError.
func (s *session) reportOutOfRange(ctx context.Context, items []oorItem) {
	m := s.m
	parts := make([]wire.Partition, len(items))
	for i, it := range items {
		parts[i] = wire.Partition{Topic: it.p.key.topic, Partition: it.p.key.partition}
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	starts := m.listOffsets(lctx, parts, -2)
	ends := m.listOffsets(lctx, parts, -1)
	cancel()

	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		p := it.p
		if m.parts[p.key] != p || p.state != psReporting {
			continue
		}
		at := wire.Partition{Topic: p.key.topic, Partition: p.key.partition}
		ls, ok := starts[at]
		if !ok {
			ls = it.ls
		}
		le, ok := ends[at]
		if !ok {
			le = it.hw
		}
		if ls >= 0 {
			p.logStart = ls
		}
		if le >= 0 {
			p.hw = le
		}
		m.fail(p, &OffsetOutOfRangeError{
			Topic:          p.key.topic,
			Partition:      p.key.partition,
			FetchOffset:    p.offset,
			LogStartOffset: ls,
			LogEndOffset:   le,
		})
	}
}

// listOffsets is wire.ListOffsets, best effort: what it cannot read is
// left out.
func (m *Manager) listOffsets(ctx context.Context, parts []wire.Partition, ts int64) map[wire.Partition]int64 {
	out, err := wire.ListOffsets(ctx, m.cl, parts, ts)
	if err != nil {
		m.log.Debug("cannot list source offsets for an out of range report", "error", err)
	}
	return out
}

// closeBrokerSession tells the broker to drop the session, so stopped
// mirrors do not hold slots of its session cache. Best effort, bounded by
// closeTimeout even when ctx is already done.
func (s *session) closeBrokerSession(ctx context.Context, id int32) {
	if err := wire.CloseSession(ctx, s.cl, s.key.broker, id, s.m.cfg.closeTimeout); err != nil {
		s.m.log.Debug("closing the fetch session failed; the broker will evict it", "broker", s.key.broker, "session", id, "error", err)
	}
}
