package writer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceOp is one partition's append handed to a sink. A Partition keeps a
// few and reuses them (it has at most MaxInflightPerPartition in flight);
// when it abandons one still in flight, it leaves it to the sink.
type produceOp struct {
	topic     string
	partition int32
	records   []byte
	// txnID is the transactional id of a transactional batch, "" for an
	// idempotent one. A ProduceRequest carries one transactional id, which
	// the broker checks every transactional batch of the request against.
	txnID string

	done chan struct{} // capacity 1; the sink signals once per enqueue

	// Set by the sink before it signals done.
	err            error // the request failed as a whole (transport, timeout)
	errCode        int16
	errMsg         string
	baseOffset     int64
	logAppendTime  int64
	currentLeader  int32 // from a NOT_LEADER_OR_FOLLOWER answer; -1 when unknown
	requestVersion int16
}

func newProduceOp(topic string, partition int32) *produceOp {
	return &produceOp{topic: topic, partition: partition, done: make(chan struct{}, 1)}
}

func (op *produceOp) finish() {
	op.records = nil
	select {
	case op.done <- struct{}{}:
	default: // abandoned op already signalled; nobody waits
	}
}

// errMissingPartition: a ProduceResponse did not answer a partition the
// request carried. The append is retried.
var errMissingPartition = errors.New("produce response has no answer for the partition")

// sink gathers the appends bound for one destination broker. Its workers
// (MaxInflightPerBroker of them, owned by the Writer) each take every queued
// append of distinct partitions, send them as one ProduceRequest and wait
// for the answer, so up to MaxInflightPerBroker requests are in flight and
// appends queue up into bigger requests while they are.
type sink struct {
	w    *Writer
	node int32

	mu     sync.Mutex
	queue  []*produceOp
	closed bool          // the workers stopped: nothing is sent any more
	wake   chan struct{} // capacity 1: "the queue may be non-empty"
	// Tickets order the workers' requests as their takes: take hands out
	// ticket n, and the worker holding it waits for turn n before sending.
	// So a partition's appends, taken one per request in queue order, are
	// sent to the broker in that order, which handles one connection's
	// requests in order (the broker's sequence check still refuses an
	// append that overtakes another: OUT_OF_ORDER_SEQUENCE_NUMBER).
	turns  *sync.Cond // on mu
	ticket uint64
	turn   uint64
}

func newSink(w *Writer, node int32) *sink {
	s := &sink{w: w, node: node, wake: make(chan struct{}, 1)}
	s.turns = sync.NewCond(&s.mu)
	return s
}

// waitTurn waits until the requests of every earlier ticket went out, then
// lets the next ticket go.
func (s *sink) waitTurn(t uint64) {
	s.mu.Lock()
	for s.turn != t && !s.closed {
		s.turns.Wait()
	}
	s.turn++
	s.turns.Broadcast()
	s.mu.Unlock()
}

func (s *sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// enqueue queues op for the next request to the broker. It fails once the
// Writer is closing.
func (s *sink) enqueue(op *produceOp) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, op)
	s.mu.Unlock()
	s.signal()
	return nil
}

// remove takes op out of the queue if no worker took it yet, and reports
// whether it did.
func (s *sink) remove(op *produceOp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.queue {
		if q == op {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return true
		}
	}
	return false
}

// take moves queued ops of distinct partitions, up to MaxRequestBytes and of
// at most one transactional id, into dst, and hands out the ticket to send
// them with (see waitTurn) when it took any. Ops left behind (a second op of
// a partition, another transactional id, or over the byte limit) wake
// another worker.
func (s *sink) take(dst []*produceOp, seen map[tpKey]struct{}) ([]*produceOp, uint64) {
	clear(seen)
	s.mu.Lock()
	defer s.mu.Unlock()
	var size int
	var txnID string
	kept := s.queue[:0]
	for _, op := range s.queue {
		k := tpKey{op.topic, op.partition}
		_, dup := seen[k]
		otherTxn := op.txnID != "" && txnID != "" && op.txnID != txnID
		if dup || otherTxn || (len(dst) > 0 && size+len(op.records) > s.w.cfg.maxRequestBytes) {
			kept = append(kept, op)
			continue
		}
		seen[k] = struct{}{}
		size += len(op.records)
		if op.txnID != "" {
			txnID = op.txnID
		}
		dst = append(dst, op)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	if len(s.queue) > 0 {
		s.signal()
	}
	var ticket uint64
	if len(dst) > 0 {
		ticket = s.ticket
		s.ticket++
	}
	return dst, ticket
}

// failQueued finishes every queued op with err and refuses new ones (the
// Writer is closing).
func (s *sink) failQueued(err error) {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.closed = true
	s.turns.Broadcast()
	s.mu.Unlock()
	for _, op := range q {
		op.err = err
		op.finish()
	}
}

// sinkWorker sends one ProduceRequest at a time for its sink. Its request
// and index structures are reused from request to request.
type sinkWorker struct {
	s        *sink
	ops      []*produceOp
	seen     map[tpKey]struct{}
	byTP     map[tpKey]int
	topicIdx map[string]int
	req      kmsg.ProduceRequest
}

func newSinkWorker(s *sink) *sinkWorker {
	return &sinkWorker{
		s:        s,
		seen:     make(map[tpKey]struct{}),
		byTP:     make(map[tpKey]int),
		topicIdx: make(map[string]int),
	}
}

func (wk *sinkWorker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			wk.s.failQueued(ErrClosed)
			return
		case <-wk.s.wake:
		}
		for {
			var ticket uint64
			wk.ops, ticket = wk.s.take(wk.ops[:0], wk.seen)
			if len(wk.ops) == 0 {
				break
			}
			wk.send(ctx, ticket)
		}
	}
}

// send issues one ProduceRequest for wk.ops, in ticket's turn, and finishes
// each op with its partition's answer.
func (wk *sinkWorker) send(ctx context.Context, ticket uint64) {
	w := wk.s.w
	req := &wk.req
	req.TransactionID = nil
	req.Acks = -1
	req.TimeoutMillis = int32(w.cfg.requestTimeout.Milliseconds())
	req.Topics = req.Topics[:0]
	clear(wk.topicIdx)
	clear(wk.byTP)
	bytes := 0
	for i, op := range wk.ops {
		if op.txnID != "" {
			req.TransactionID = &op.txnID
		}
		bytes += len(op.records)
		wk.byTP[tpKey{op.topic, op.partition}] = i
		ti, ok := wk.topicIdx[op.topic]
		if !ok {
			ti = len(req.Topics)
			wk.topicIdx[op.topic] = ti
			if ti < cap(req.Topics) {
				req.Topics = req.Topics[:ti+1]
				req.Topics[ti].Partitions = req.Topics[ti].Partitions[:0]
			} else {
				req.Topics = append(req.Topics, kmsg.ProduceRequestTopic{})
			}
			req.Topics[ti].Topic = op.topic
		}
		rp := kmsg.ProduceRequestTopicPartition{Partition: op.partition, Records: op.records}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
	}

	obs := w.cfg.observer
	var info ProduceRequestInfo
	var sent time.Time
	if obs != nil {
		info = ProduceRequestInfo{Broker: wk.s.node, Partitions: len(wk.ops), Bytes: bytes, Transactional: req.TransactionID != nil}
		obs.ProduceSent(info)
		sent = time.Now()
	}

	// No per-request context: franz-go bounds the wait with the
	// connection's read deadline (RequestTimeoutOverhead plus the request's
	// TimeoutMillis), and a context per request would allocate on every
	// append.
	wk.s.waitTurn(ticket)
	resp, err := w.cl.Broker(int(wk.s.node)).Request(ctx, pinnedProduce{req})
	var latency time.Duration
	if obs != nil {
		latency = time.Since(sent)
	}
	version := req.Version
	// Drop the references to the batches: they belong to the callers.
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			req.Topics[i].Partitions[j].Records = nil
		}
	}

	answered := wk.seen // reuse: take is done with it until the next round
	clear(answered)
	if err == nil {
		for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
			for _, rp := range rt.Partitions {
				k := tpKey{rt.Topic, rp.Partition}
				i, ok := wk.byTP[k]
				if !ok {
					continue
				}
				if _, dup := answered[k]; dup {
					continue
				}
				answered[k] = struct{}{}
				op := wk.ops[i]
				op.err = nil
				op.errCode = rp.ErrorCode
				op.errMsg = ""
				if rp.ErrorMessage != nil {
					op.errMsg = *rp.ErrorMessage
				}
				op.baseOffset = rp.BaseOffset
				op.logAppendTime = rp.LogAppendTime
				op.currentLeader = rp.CurrentLeader.LeaderID
				op.requestVersion = version
			}
		}
	}
	failed := 0
	for _, op := range wk.ops {
		if _, ok := answered[tpKey{op.topic, op.partition}]; !ok {
			op.err = err
			if err == nil {
				op.err = errMissingPartition
			}
			op.currentLeader = -1
		}
		if op.err != nil || op.errCode != 0 {
			failed++
		}
	}
	// Observed before the appends return, so that what an append's caller
	// reads from the observer includes its request.
	if obs != nil {
		obs.ProduceDone(info, ProduceResult{Latency: latency, Err: err, FailedPartitions: failed})
	}
	for _, op := range wk.ops {
		op.finish()
	}
	clear(wk.ops)
}
