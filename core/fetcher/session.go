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
	req   *fetchRequest
	full  bool
	next  map[tp]sentEntry    // the broker's session after the request
	names map[[16]byte]string // topic id -> name, for v13+ responses
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

// run is the session goroutine. It exits when ctx is done or when the
// session has no partition left (placement starts it again).
func (s *session) run(ctx context.Context) {
	defer s.m.wg.Done()
	m := s.m
	for {
		m.mu.Lock()
		if ctx.Err() != nil || len(s.parts) == 0 {
			s.running = false
			id, epoch := s.id, s.epoch
			s.id = 0
			s.reset()
			m.mu.Unlock()
			if id != 0 && epoch > 0 {
				s.closeBrokerSession(ctx, id)
			}
			return
		}
		in := s.build()
		m.mu.Unlock()

		if in == nil { // every partition paused
			select {
			case <-ctx.Done():
			case <-s.wake:
			}
			continue
		}

		kresp, err := s.cl.Broker(int(s.key.broker)).Request(ctx, in.req)
		if ctx.Err() != nil {
			continue
		}
		if err != nil {
			s.requestFailed(err)
			continue
		}
		resp := kresp.(*kmsg.FetchResponse)
		if n := recordBytes(resp); n > 0 && m.cfg.throttle != nil {
			if err := m.cfg.throttle(ctx, n); err != nil {
				// Nothing delivered; the broker's session moved on
				// without us, so start a new one.
				m.mu.Lock()
				s.reset()
				m.mu.Unlock()
				if ctx.Err() == nil {
					m.log.Warn("fetch throttle failed; refetching", "broker", s.key.broker, "error", err)
					_ = backoff.Sleep(ctx, m.cfg.backoff) // an ended ctx ends the loop
				}
				continue
			}
		}

		// Cutting and CRC-checking batches is the costly part: do it
		// before taking the Manager's lock.
		scans := scanResponse(resp)
		m.mu.Lock()
		oor, wait := s.handle(in, resp, scans)
		m.mu.Unlock()
		if len(oor) > 0 {
			s.reportOutOfRange(ctx, oor)
		}
		if wait {
			_ = backoff.Sleep(ctx, m.cfg.backoff) // an ended ctx ends the loop
		}
	}
}

// build makes the next request from the session's fetchable partitions, nil
// when there is none. Called with m.mu held.
func (s *session) build() *inflight {
	cfg := &s.m.cfg
	want := make(map[tp]sentEntry, len(s.parts))
	allIDs := true
	for k, p := range s.parts {
		if p.paused {
			continue
		}
		e := sentEntry{
			p:            p,
			topicID:      p.topicID,
			offset:       p.offset,
			currentEpoch: p.currentEpoch,
			lastEpoch:    p.lastEpoch,
			maxBytes:     max(cfg.partitionMaxBytes, p.maxBytes),
		}
		want[k] = e
		allIDs = allIDs && p.topicID != [16]byte{}
	}
	if len(want) == 0 {
		return nil
	}
	if s.epoch != 0 && s.useIDs && !allIDs {
		// A topic without an id cannot join a session addressed by id.
		s.reset()
	}
	in := &inflight{full: s.epoch == 0, next: want, names: make(map[[16]byte]string)}
	if in.full {
		s.useIDs = allIDs
	}

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1 // a consumer; v15+ carries it in ReplicaState, -1 by default
	req.MaxWaitMillis = int32(cfg.maxWait.Milliseconds())
	req.MinBytes = cfg.minBytes
	req.MaxBytes = cfg.responseMaxBytes
	req.IsolationLevel = 0 // read_uncommitted: markers and open transactions are mirrored as they are
	req.SessionID = s.id
	req.SessionEpoch = s.epoch

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
	for k, e := range want {
		in.names[e.topicID] = k.topic // responses may carry any partition of the session
		if old, ok := s.sent[k]; !in.full && ok && old == e {
			continue // the broker has it as it is
		}
		add(k, e)
	}
	if !in.full {
		forgotten := make(map[string]int)
		for k, old := range s.sent {
			if _, ok := want[k]; ok {
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
	in.req = &fetchRequest{FetchRequest: req, maxVersion: 12}
	if s.useIDs {
		in.req.maxVersion = req.MaxVersion()
	}
	return in
}

// requestFailed handles a fetch that got no response: the broker is
// unreachable, gone, or refused the connection's credentials.
func (s *session) requestFailed(err error) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	s.reset()
	if isAuthenticationErr(err) {
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

// handle applies a response: session bookkeeping, then each partition.
// Called with m.mu held. It returns the partitions found out of range (to
// report once their log bounds are read, without the lock) and whether the
// session should back off.
func (s *session) handle(in *inflight, resp *kmsg.FetchResponse, scans [][]scanned) (oor []oorItem, wait bool) {
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
		return nil, wait
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
		s.epoch, s.sent = nextEpoch(s.epoch), in.next
	}

	resetSession := false
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
				s.apply(p, rp, &scans[i][j])
			case errors.Is(err, kerr.OffsetOutOfRange):
				m.detach(p)
				p.state = psReporting
				oor = append(oor, oorItem{p: p, hw: rp.HighWatermark, ls: rp.LogStartOffset})
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				m.fail(p, authorizationError(key.topic, key.partition, err))
			case retriable(err):
				if errors.Is(err, kerr.InconsistentTopicID) || errors.Is(err, kerr.UnknownTopicID) {
					resetSession = true // the broker resolved the name once, at insertion
				}
				m.relocate(p, fmt.Errorf("%s: fetching from source broker %d: %w", key, s.key.broker, err))
			default:
				m.fail(p, fmt.Errorf("%s: fetching from source broker %d: %w (not retriable)", key, s.key.broker, err))
			}
		}
	}
	if resetSession {
		s.reset()
	}
	return oor, false
}

// scanned is one partition's Records cut into whole, CRC-checked batches.
type scanned struct {
	batches []batch.Batch
	err     error  // the batch at rest is invalid
	rest    []byte // trailing partial batch, or the invalid batch onwards
}

// scanResponse cuts every partition's Records, indexed like resp.Topics and
// their Partitions.
func scanResponse(resp *kmsg.FetchResponse) [][]scanned {
	out := make([][]scanned, len(resp.Topics))
	for i := range resp.Topics {
		parts := resp.Topics[i].Partitions
		out[i] = make([]scanned, len(parts))
		for j := range parts {
			if len(parts[j].RecordBatches) == 0 {
				continue
			}
			sc := batch.NewScanner(parts[j].RecordBatches)
			var bs []batch.Batch
			for sc.Next() {
				bs = append(bs, sc.Batch())
			}
			out[i][j] = scanned{batches: bs, err: sc.Err(), rest: sc.Rest()}
		}
	}
	return out
}

// apply delivers one partition's error-free response. Called with m.mu held.
func (s *session) apply(p *fetchPartition, rp *kmsg.FetchResponseTopicPartition, sc *scanned) {
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
		return
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

	batches := sc.batches
	for len(batches) > 0 && batches[0].NextOffset() <= p.offset {
		batches = batches[1:] // ends before the fetch offset
	}
	n := 0
	for _, b := range batches {
		n += len(b)
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
		p.maxBytes = 0
		p.corrupt = 0
		p.outstanding += int64(n)
		if p.outstanding >= m.cfg.maxBuffered {
			p.paused = true // forgotten in the next request until Done
		}
	}
	if err := sc.err; err != nil {
		err = fmt.Errorf("%s: source batch at or after offset %d: %w", p.key, p.offset, err)
		if errors.Is(err, batch.ErrUnsupportedMagic) || p.corrupt >= maxCorruptRefetches {
			m.fail(p, err)
			return
		}
		p.corrupt++
		m.relocate(p, err)
		return
	}
	if rest := sc.rest; len(batches) == 0 && len(rest) >= batch.LogOverhead {
		// Only a partial batch: it is larger than the partition limit
		// (a broker that does not return an oversized first batch
		// whole). Ask for it whole, once.
		size := int64(binary.BigEndian.Uint32(rest[8:12])) + batch.LogOverhead
		if size > int64(m.cfg.partitionMaxBytes) && size <= math.MaxInt32 {
			p.maxBytes = int32(size)
		}
	}
}

// reportOutOfRange reads the log bounds of partitions found out of range
// and fails them with an *OffsetOutOfRangeError.
func (s *session) reportOutOfRange(ctx context.Context, items []oorItem) {
	m := s.m
	parts := make([]tp, len(items))
	for i, it := range items {
		parts[i] = it.p.key
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
		ls, ok := starts[p.key]
		if !ok {
			ls = it.ls
		}
		le, ok := ends[p.key]
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

// listOffsets returns the offsets for timestamp ts (-2 log start, -1 end)
// of parts, leaving out any it cannot read. Best effort.
func (m *Manager) listOffsets(ctx context.Context, parts []tp, ts int64) map[tp]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	idx := make(map[string]int)
	for _, k := range parts {
		i, ok := idx[k.topic]
		if !ok {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = k.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			idx[k.topic] = i
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = k.partition
		p.Timestamp = ts
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	out := make(map[tp]int64)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.log.Debug("cannot list source offsets for an out of range report", "error", err)
		return out
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[tp{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return out
}

// closeBrokerSession tells the broker to drop the session (epoch -1), so
// stopped mirrors do not hold slots of its session cache. Best effort,
// bounded by closeTimeout even when ctx is already done.
func (s *session) closeBrokerSession(ctx context.Context, id int32) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.SessionID = id
	req.SessionEpoch = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.m.cfg.closeTimeout)
	defer cancel()
	if _, err := s.cl.Broker(int(s.key.broker)).Request(cctx, &fetchRequest{FetchRequest: req, maxVersion: req.MaxVersion()}); err != nil {
		s.m.log.Debug("closing the fetch session failed; the broker will evict it", "broker", s.key.broker, "session", id, "error", err)
	}
}

// fetchRequest is a FetchRequest whose highest version the session decides:
// sessions without topic ids stay at v12 (names), since kgo picks the
// version only at send time. Timeout lets kgo extend the read deadline by
// the long-poll wait, as it does for its own fetches.
type fetchRequest struct {
	*kmsg.FetchRequest
	maxVersion int16
}

func (r *fetchRequest) MaxVersion() int16 { return r.maxVersion }
func (r *fetchRequest) Timeout() int32    { return r.MaxWaitMillis }

func recordBytes(resp *kmsg.FetchResponse) int {
	n := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			n += len(resp.Topics[i].Partitions[j].RecordBatches)
		}
	}
	return n
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
