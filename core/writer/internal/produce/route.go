package produce

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/writer/internal/cluster"
)

// Sinks are a Writer's sinks, one per destination broker, each started on
// first use with its workers, which the Writer's wait group owns and its
// context stops.
type Sinks struct {
	cfg     Config // Node unset
	workers int
	ctx     context.Context
	wg      *sync.WaitGroup

	mu     sync.Mutex
	closed bool
	sinks  map[int32]*Sink
}

// NewSinks returns the sinks of cfg (any Node), each run by workers
// workers (MaxInflightPerBroker) under ctx, in wg.
func NewSinks(ctx context.Context, wg *sync.WaitGroup, cfg Config, workers int) *Sinks {
	return &Sinks{cfg: cfg, workers: workers, ctx: ctx, wg: wg, sinks: make(map[int32]*Sink)}
}

// Get returns the sink of destination broker node, starting it on first
// use.
func (ss *Sinks) Get(node int32) (*Sink, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, ss.cfg.Closed
	}
	s := ss.sinks[node]
	if s == nil {
		cfg := ss.cfg
		cfg.Node = node
		s = NewSink(cfg)
		ss.sinks[node] = s
		ss.start(s)
	}
	return s, nil
}

// start runs s's workers. Apart from Get, so that Get's s, which the
// workers' closures capture, is not moved to the heap on every call.
func (ss *Sinks) start(s *Sink) {
	for range ss.workers {
		ss.wg.Go(func() { s.Work(ss.ctx) })
	}
}

// Close starts no sink any more (the Writer is closing; its context stops
// the running ones).
func (ss *Sinks) Close() {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
}

// Route is one partition's way to the destination: its leader's sink, the
// partition's produce ops for reuse, and the handling of answers. It is
// used under the partition's operation lock.
type Route struct {
	// Leader is the destination broker leading the partition, -1 unknown.
	Leader int32
	// OnRetry, when set, is told of each retriable error before the append
	// is retried, and nil once an append that was retried ends (landed,
	// gave up or cancelled).
	OnRetry func(err error)

	sinks *Sinks
	dest  *cluster.Client
	where cluster.Where
	log   hclog.Logger
	free  []*Op // answered ops for reuse
}

// NewRoute returns the route of the partition where names.
func NewRoute(sinks *Sinks, dest *cluster.Client, where cluster.Where, log hclog.Logger) *Route {
	return &Route{Leader: -1, sinks: sinks, dest: dest, where: where, log: log}
}

// Sink returns the sink of the partition's leader.
func (r *Route) Sink() (*Sink, error) { return r.sinks.Get(r.Leader) }

// Produce sends b through the leader's sink until it is appended, retrying
// retriable errors. inFlight reports that it gave up (ctx ended) while a
// request carrying b was in flight: b must not be modified then.
//
// txnID is the destination transactional id of a transactional batch, ""
// otherwise: brokers verify a request's transactional batches against the
// request's one transactional id, so the sink never puts two in a request.
func (r *Route) Produce(ctx context.Context, b []byte, txnID string) (op *Op, inFlight bool, err error) {
	op = r.Take()
	defer func() {
		if err != nil && !inFlight {
			r.Put(op)
		}
		if err != nil {
			op = nil
		}
	}()
	rt := r.dest.NewRetrier()
	retried := false
	defer func() {
		if retried {
			r.OnRetry(nil)
		}
	}()
	for {
		var retryErr error
		if r.Leader < 0 {
			leader, err := r.dest.Leader(ctx, r.where.Topic, r.where.Partition, rt.Retries() > 0)
			if err != nil {
				if !cluster.IsRetriable(err) {
					return nil, false, r.where.Errorf("find the partition leader", err)
				}
				if r.OnRetry != nil {
					r.OnRetry(fmt.Errorf("finding the partition leader: %w", err))
					retried = true
				}
				if err := rt.Backoff(ctx, err); err != nil {
					return nil, false, r.where.Errorf("find the partition leader", err)
				}
				continue
			}
			r.Leader = leader
		}
		s, err := r.sinks.Get(r.Leader)
		if err != nil {
			return nil, false, r.where.Errorf("produce", err)
		}
		op.Records = b
		op.TxnID = txnID
		if err := s.Enqueue(op); err != nil {
			return nil, false, r.where.Errorf("produce", err)
		}
		select {
		case <-op.Done:
		case <-ctx.Done():
			if s.Remove(op) {
				return nil, false, r.where.Errorf("produce", context.Cause(ctx))
			}
			return nil, true, r.where.Errorf("produce", context.Cause(ctx)) // a worker holds op: leave it to it
		}
		switch {
		case op.Err != nil:
			if r.sinks.ctx.Err() != nil {
				return nil, false, r.where.Errorf("produce", r.sinks.cfg.Closed)
			}
			if !cluster.IsRetriable(op.Err) {
				return nil, false, r.where.Errorf("produce", op.Err)
			}
			r.Leader = -1 // the broker may be gone: look the leader up again
			retryErr = op.Err
		case op.ErrCode == 0:
			return op, false, nil
		default:
			kerrE := withBrokerMessage(kerr.ErrorForCode(op.ErrCode), op.ErrMsg)
			switch {
			case leaderMoved(op.ErrCode):
				r.Leader = op.CurrentLeader // -1 unless the broker named the new leader
			case !kerr.IsRetriable(kerr.ErrorForCode(op.ErrCode)):
				return nil, false, r.where.Errorf(fmt.Sprintf("produce (v%d)", op.RequestVersion), kerrE)
			}
			retryErr = kerrE
		}
		r.log.Debug("retrying append", "error", retryErr, "attempt", rt.Retries()+1)
		if r.OnRetry != nil {
			r.OnRetry(retryErr)
			retried = true
		}
		if err := rt.Backoff(ctx, retryErr); err != nil {
			return nil, false, r.where.Errorf("produce", err)
		}
	}
}

// leaderMoved reports the produce errors after which the partition's leader
// must be looked up again.
func leaderMoved(code int16) bool {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.KafkaStorageError.Code:
		return true
	}
	return false
}

func withBrokerMessage(err error, msg string) error {
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w (broker: %s)", err, msg)
}

// Answer reads a finished op: nil for a success; otherwise the error, and
// whether the append may be sent again with the same sequence.
func (r *Route) Answer(op *Op) (retry bool, err error) {
	switch {
	case op.Err != nil:
		if r.sinks.ctx.Err() != nil {
			return false, r.where.Errorf("produce", r.sinks.cfg.Closed)
		}
		return cluster.IsRetriable(op.Err), r.where.Errorf("produce", op.Err)
	case op.ErrCode == 0:
		return false, nil
	}
	kerrE := withBrokerMessage(kerr.ErrorForCode(op.ErrCode), op.ErrMsg)
	err = r.where.Errorf(fmt.Sprintf("produce (v%d)", op.RequestVersion), kerrE)
	switch {
	case leaderMoved(op.ErrCode):
		r.Leader = op.CurrentLeader
		return true, err
	case op.ErrCode == kerr.OutOfOrderSequenceNumber.Code:
		// It reached the broker before the append it follows (each was
		// sent in order, but on different requests): refused, not written.
		return true, err
	}
	return kerr.IsRetriable(kerr.ErrorForCode(op.ErrCode)), err
}

// Take returns a free produce op of the partition.
func (r *Route) Take() *Op {
	if n := len(r.free); n > 0 {
		op := r.free[n-1]
		r.free = r.free[:n-1]
		return op
	}
	return NewOp(r.where.Topic, r.where.Partition)
}

// Put returns an answered op for reuse.
func (r *Route) Put(op *Op) {
	if op == nil {
		return
	}
	op.Records, op.TxnID = nil, ""
	select {
	case <-op.Done: // drain a signal nobody read
	default:
	}
	r.free = append(r.free, op)
}
