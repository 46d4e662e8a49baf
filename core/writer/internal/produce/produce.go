// Package produce gathers the appends of a Writer's partitions bound for one
// destination broker into ProduceRequests: a [Sink] per broker queues the
// partitions' [Op]s, and its workers each take the queued appends of
// distinct partitions, send them as one request (acks=-1) and hand every
// partition its answer. Tickets keep the workers' requests in the order of
// their takes, so a partition's appends reach the broker in order.
package produce

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Version is the ProduceRequest version the sinks send at most: transaction
// protocol v1 (v12 would add partitions to transactions implicitly).
const Version int16 = 11

// Op is one partition's append handed to a sink. A partition keeps a few
// and reuses them (it has at most MaxInflightPerPartition in flight); when
// it abandons one still in flight, it leaves it to the sink.
type Op struct {
	Topic     string
	Partition int32
	Records   []byte
	// TxnID is the transactional id of a transactional batch, "" for an
	// idempotent one. A ProduceRequest carries one transactional id, which
	// the broker checks every transactional batch of the request against.
	TxnID string

	Done chan struct{} // capacity 1; the sink signals once per enqueue

	// Set by the sink before it signals Done.
	Err            error // the request failed as a whole (transport, timeout)
	ErrCode        int16
	ErrMsg         string
	BaseOffset     int64
	LogAppendTime  int64
	CurrentLeader  int32 // from a NOT_LEADER_OR_FOLLOWER answer; -1 when unknown
	RequestVersion int16
}

// NewOp returns an Op for appends to topic/partition.
func NewOp(topic string, partition int32) *Op {
	return &Op{Topic: topic, Partition: partition, Done: make(chan struct{}, 1)}
}

func (op *Op) finish() {
	op.Records = nil
	select {
	case op.Done <- struct{}{}:
	default: // abandoned op already signalled; nobody waits
	}
}

// errMissingPartition: a ProduceResponse did not answer a partition the
// request carried. The append is retried.
var errMissingPartition = errors.New("produce response has no answer for the partition")

// Observer is told of every ProduceRequest a sink sends, for metrics
// (request latency, requests in flight, bytes produced). Its methods are
// called from the sink workers, up to MaxInflightPerBroker at once per
// destination broker: they must be safe for concurrent use, return
// promptly and not call the Writer.
type Observer interface {
	// ProduceSent is called just before a request is sent.
	ProduceSent(RequestInfo)
	// ProduceDone is called once its answer is in (or it failed as a
	// whole), before the appends it carried return.
	ProduceDone(RequestInfo, Result)
}

// RequestInfo describes one ProduceRequest.
type RequestInfo struct {
	Broker        int32 // the destination broker's node id
	Partitions    int   // partitions (one batch each) in the request
	Bytes         int   // record batch bytes in the request
	Transactional bool  // the request carries a transactional id
}

// Result is how a ProduceRequest ended.
type Result struct {
	Latency time.Duration // from send to answer
	// Err is set when the request failed as a whole (transport, timeout,
	// the Writer closing); every partition of it is then failed.
	Err error
	// FailedPartitions counts the partitions answered with an error code,
	// or not answered (each is retried or returned by its append).
	FailedPartitions int
}

// Config is what a Sink sends with.
type Config struct {
	Client *kgo.Client
	Node   int32 // the destination broker
	// MaxRequestBytes bounds the record bytes of one request; a single
	// larger batch still goes, alone.
	MaxRequestBytes int
	RequestTimeout  time.Duration // the requests' TimeoutMillis
	Observer        Observer      // nil: none
	// Closed is the error of Enqueue, and of the ops still queued, once the
	// workers stopped (the Writer's ErrClosed).
	Closed error
}

// tpKey is a destination partition.
type tpKey struct {
	topic     string
	partition int32
}

// Sink gathers the appends bound for one destination broker. Its workers
// (MaxInflightPerBroker of them, run by the Writer with Work) each take
// every queued append of distinct partitions, send them as one
// ProduceRequest and wait for the answer, so up to MaxInflightPerBroker
// requests are in flight and appends queue up into bigger requests while
// they are.
type Sink struct {
	cfg Config

	mu     sync.Mutex
	queue  []*Op
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

// NewSink returns the sink of the broker cfg names. It sends nothing until
// its workers run (Work).
func NewSink(cfg Config) *Sink {
	s := &Sink{cfg: cfg, wake: make(chan struct{}, 1)}
	s.turns = sync.NewCond(&s.mu)
	return s
}

// waitTurn waits until the requests of every earlier ticket went out, then
// lets the next ticket go.
func (s *Sink) waitTurn(t uint64) {
	s.mu.Lock()
	for s.turn != t && !s.closed {
		s.turns.Wait()
	}
	s.turn++
	s.turns.Broadcast()
	s.mu.Unlock()
}

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Enqueue queues op for the next request to the broker. It fails once the
// Writer is closing.
func (s *Sink) Enqueue(op *Op) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.cfg.Closed
	}
	s.queue = append(s.queue, op)
	s.mu.Unlock()
	s.signal()
	return nil
}

// Remove takes op out of the queue if no worker took it yet, and reports
// whether it did.
func (s *Sink) Remove(op *Op) bool {
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
func (s *Sink) take(dst []*Op, seen map[tpKey]struct{}) ([]*Op, uint64) {
	clear(seen)
	s.mu.Lock()
	defer s.mu.Unlock()
	var size int
	var txnID string
	kept := s.queue[:0]
	for _, op := range s.queue {
		k := tpKey{op.Topic, op.Partition}
		_, dup := seen[k]
		otherTxn := op.TxnID != "" && txnID != "" && op.TxnID != txnID
		if dup || otherTxn || (len(dst) > 0 && size+len(op.Records) > s.cfg.MaxRequestBytes) {
			kept = append(kept, op)
			continue
		}
		seen[k] = struct{}{}
		size += len(op.Records)
		if op.TxnID != "" {
			txnID = op.TxnID
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
func (s *Sink) failQueued(err error) {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.closed = true
	s.turns.Broadcast()
	s.mu.Unlock()
	for _, op := range q {
		op.Err = err
		op.finish()
	}
}

// worker sends one ProduceRequest at a time for its sink. Its request
// and index structures are reused from request to request.
type worker struct {
	s        *Sink
	ops      []*Op
	seen     map[tpKey]struct{}
	byTP     map[tpKey]int
	topicIdx map[string]int
	req      kmsg.ProduceRequest
}

// Work runs one of the sink's workers until ctx ends; then the appends
// still queued fail with Config.Closed.
func (s *Sink) Work(ctx context.Context) {
	wk := &worker{
		s:        s,
		seen:     make(map[tpKey]struct{}),
		byTP:     make(map[tpKey]int),
		topicIdx: make(map[string]int),
	}
	wk.run(ctx)
}

func (wk *worker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			wk.s.failQueued(wk.s.cfg.Closed)
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
func (wk *worker) send(ctx context.Context, ticket uint64) {
	cfg := &wk.s.cfg
	req := &wk.req
	req.TransactionID = nil
	req.Acks = -1
	req.TimeoutMillis = int32(cfg.RequestTimeout.Milliseconds())
	req.Topics = req.Topics[:0]
	clear(wk.topicIdx)
	clear(wk.byTP)
	bytes := 0
	for i, op := range wk.ops {
		if op.TxnID != "" {
			req.TransactionID = &op.TxnID
		}
		bytes += len(op.Records)
		wk.byTP[tpKey{op.Topic, op.Partition}] = i
		ti, ok := wk.topicIdx[op.Topic]
		if !ok {
			ti = len(req.Topics)
			wk.topicIdx[op.Topic] = ti
			if ti < cap(req.Topics) {
				req.Topics = req.Topics[:ti+1]
				req.Topics[ti].Partitions = req.Topics[ti].Partitions[:0]
			} else {
				req.Topics = append(req.Topics, kmsg.ProduceRequestTopic{})
			}
			req.Topics[ti].Topic = op.Topic
		}
		rp := kmsg.ProduceRequestTopicPartition{Partition: op.Partition, Records: op.Records}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
	}

	obs := cfg.Observer
	var info RequestInfo
	var sent time.Time
	if obs != nil {
		info = RequestInfo{Broker: cfg.Node, Partitions: len(wk.ops), Bytes: bytes, Transactional: req.TransactionID != nil}
		obs.ProduceSent(info)
		sent = time.Now()
	}

	// No per-request context: franz-go bounds the wait with the
	// connection's read deadline (RequestTimeoutOverhead plus the request's
	// TimeoutMillis), and a context per request would allocate on every
	// append.
	wk.s.waitTurn(ticket)
	resp, err := cfg.Client.Broker(int(cfg.Node)).Request(ctx, pinned{req})
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
				op.Err = nil
				op.ErrCode = rp.ErrorCode
				op.ErrMsg = ""
				if rp.ErrorMessage != nil {
					op.ErrMsg = *rp.ErrorMessage
				}
				op.BaseOffset = rp.BaseOffset
				op.LogAppendTime = rp.LogAppendTime
				op.CurrentLeader = rp.CurrentLeader.LeaderID
				op.RequestVersion = version
			}
		}
	}
	failed := 0
	for _, op := range wk.ops {
		if _, ok := answered[tpKey{op.Topic, op.Partition}]; !ok {
			op.Err = err
			if err == nil {
				op.Err = errMissingPartition
			}
			op.CurrentLeader = -1
		}
		if op.Err != nil || op.ErrCode != 0 {
			failed++
		}
	}
	// Observed before the appends return, so that what an append's caller
	// reads from the observer includes its request.
	if obs != nil {
		obs.ProduceDone(info, Result{Latency: latency, Err: err, FailedPartitions: failed})
	}
	for _, op := range wk.ops {
		op.finish()
	}
	clear(wk.ops)
}

// pinned pins a ProduceRequest to Version. It keeps ProduceRequest's
// Timeout methods, so franz-go extends the read deadline by the request's
// timeout; and, not being a *kmsg.ProduceRequest, its acks are not
// rewritten to the client's.
type pinned struct{ *kmsg.ProduceRequest }

func (pinned) MaxVersion() int16 { return Version }
