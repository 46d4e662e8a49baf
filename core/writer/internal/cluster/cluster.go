// Package cluster holds what a Writer asks of the destination cluster
// besides Produce: partition leaders, end offsets and producer states (each
// gathered per topic, core/internal/coalesce), transaction coordinators and
// their requests, the idempotent producer id, the destination's
// transaction timeout, the Fetch that recognises duplicated markers, and
// the retry policy every one of these requests follows.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/internal/coalesce"
)

// ErrClosed: the Writer was closed (the writer package's ErrClosed).
var ErrClosed = errors.New("writer closed")

// DefaultTransactionTimeout is Kafka's transaction.max.timeout.ms default,
// the transaction timeout used when the destination's cannot be read.
const DefaultTransactionTimeout = 900000 * time.Millisecond

// Config is what a Client asks with.
type Config struct {
	Client         *kgo.Client
	RequestTimeout time.Duration // bounds each request
	// Retry paces the retries of one operation; its Timeout is the
	// Writer's RetryTimeout.
	Retry backoff.Policy
	// TxnTimeout is the transaction timeout option, 0: read the
	// destination brokers' transaction.max.timeout.ms.
	TxnTimeout time.Duration
	Log        hclog.Logger
}

// Client asks the destination cluster for a Writer. Its methods are safe
// for concurrent use.
type Client struct {
	cfg Config
	cl  *kgo.Client
	ctx context.Context // ends when the Writer closes: retries stop
	log hclog.Logger

	pidMu    sync.Mutex
	pid      int64 // the mirror's idempotent producer; -1 until initialised
	pidEpoch int16

	timeoutMu  sync.Mutex
	txnTimeout int32 // ms; 0 until read from the destination

	// producers gathers the partitions' DescribeProducers per topic
	// (batchers.go).
	producers *coalesce.Group[string, int32, ActiveProducers]
	// ends gathers the partitions' end-offset reads per topic
	// (batchers.go).
	ends *coalesce.Group[string, int32, int64]
	// leaders gathers the partitions' leader lookups per topic (Leader).
	leaders *coalesce.Group[leaderKey, int32, int32]
}

// New returns a Client whose retries end with ctx (the Writer's).
func New(ctx context.Context, cfg Config) *Client {
	c := &Client{cfg: cfg, cl: cfg.Client, ctx: ctx, log: cfg.Log, pid: -1}
	c.producers, c.ends = newProducersBatcher(c), newEndsBatcher(c)
	c.leaders = coalesce.New(0, c.topicLeaders)
	return c
}

// IsRetriable: Kafka's retriable errors, and transport errors (which are not
// Kafka errors), but not a closed client or an ended context.
func IsRetriable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// A request timeout is retriable; the caller's context is checked
		// by the retrier.
		return errors.Is(err, context.DeadlineExceeded)
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, ErrClosed):
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}

// Pinned sends a request at most at version max, whatever the broker and
// franz-go support. franz-go sets the version to the smaller of the
// request's MaxVersion and the broker's; overriding MaxVersion is how a
// request is pinned through Broker.Request.
type Pinned struct {
	kmsg.Request
	Max int16
}

// MaxVersion returns the version the request is pinned to.
func (p *Pinned) MaxVersion() int16 { return p.Max }

// Retrier paces the retries of one operation with the Writer's retry
// policy: waits double from the RetryBackoff minimum to its maximum, each
// drawn with full jitter (core/backoff), and the operation gives up when
// the next wait would end more than RetryTimeout after it started.
type Retrier struct {
	c *Client
	*backoff.Retry
}

// NewRetrier starts the retries of one operation.
func (c *Client) NewRetrier() Retrier {
	return Retrier{c: c, Retry: c.cfg.Retry.Start()}
}

// Backoff waits before the next attempt after lastErr. It returns an error
// wrapping lastErr when the retry timeout has passed, and the context's
// error when ctx ends or the Writer closes.
func (r *Retrier) Backoff(ctx context.Context, lastErr error) error {
	d, ok := r.Next()
	if !ok {
		return fmt.Errorf("gave up after %d attempts in %v (RetryTimeout): %w", r.Retries(), r.c.cfg.Retry.Timeout, lastErr)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(context.Cause(ctx), lastErr)
	case <-r.c.ctx.Done():
		return errors.Join(ErrClosed, lastErr)
	}
}

// Request sends req to broker node with the RequestTimeout.
func (c *Client) Request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return c.cl.Broker(int(node)).Request(ctx, req)
}

// Routed sends req through franz-go's routing (partition leaders for
// ListOffsets and DescribeProducers, coordinators for DescribeTransactions),
// with the RequestTimeout.
func (c *Client) Routed(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return c.cl.Request(ctx, req)
}

// RefreshBrokers makes the client reload the destination's broker list (a
// Metadata request without topics), so that Broker(id) knows a coordinator
// or leader that joined since. Errors are left to the retried request.
func (c *Client) RefreshBrokers(ctx context.Context) {
	_, _ = c.Routed(ctx, kmsg.NewPtrMetadataRequest())
}

// IdempotentProducer returns the mirror's idempotent producer id and epoch,
// initialising it on first use.
func (c *Client) IdempotentProducer(ctx context.Context) (int64, int16, error) {
	c.pidMu.Lock()
	defer c.pidMu.Unlock()
	if c.pid >= 0 {
		return c.pid, c.pidEpoch, nil
	}
	pid, epoch, err := c.InitIdempotent(ctx)
	if err != nil {
		return 0, 0, err
	}
	c.pid, c.pidEpoch = pid, epoch
	c.log.Debug("idempotent producer initialised", "producer_id", pid, "epoch", epoch)
	return pid, epoch, nil
}

// InitIdempotent sends InitProducerId without transactional id: a fresh
// producer id. Any broker answers it.
func (c *Client) InitIdempotent(ctx context.Context) (int64, int16, error) {
	r := c.NewRetrier()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = -1
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := c.Routed(ctx, req)
		if err == nil {
			ir := resp.(*kmsg.InitProducerIDResponse)
			if err = kerr.ErrorForCode(ir.ErrorCode); err == nil {
				return ir.ProducerID, ir.ProducerEpoch, nil
			}
			if !kerr.IsRetriable(err) {
				return 0, 0, fmt.Errorf("InitProducerId (idempotent): %w", err)
			}
		}
		if err := r.Backoff(ctx, err); err != nil {
			return 0, 0, fmt.Errorf("InitProducerId (idempotent): %w", err)
		}
	}
}

// TransactionTimeout returns the InitProducerId transaction timeout in ms:
// the option, else the smallest transaction.max.timeout.ms of the
// destination brokers, else Kafka's default.
func (c *Client) TransactionTimeout(ctx context.Context) int32 {
	if c.cfg.TxnTimeout > 0 {
		return int32(c.cfg.TxnTimeout.Milliseconds())
	}
	c.timeoutMu.Lock()
	defer c.timeoutMu.Unlock()
	if c.txnTimeout > 0 {
		return c.txnTimeout
	}
	ms, err := c.describeMaxTxnTimeout(ctx)
	if err != nil {
		fallback := int32(DefaultTransactionTimeout.Milliseconds())
		c.log.Warn("cannot read transaction.max.timeout.ms from the destination brokers; using Kafka's default",
			"timeout_ms", fallback, "error", err)
		return fallback // not cached: the next writer tries again
	}
	c.txnTimeout = ms
	c.log.Debug("destination transaction timeout", "timeout_ms", ms)
	return ms
}

func (c *Client) describeMaxTxnTimeout(ctx context.Context) (int32, error) {
	mresp, err := c.Routed(ctx, kmsg.NewPtrMetadataRequest()) // no topics: brokers only
	if err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, b := range mresp.(*kmsg.MetadataResponse).Brokers {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType = kmsg.ConfigResourceTypeBroker
		res.ResourceName = strconv.Itoa(int(b.NodeID))
		res.ConfigNames = []string{"transaction.max.timeout.ms"}
		req.Resources = append(req.Resources, res)
	}
	if len(req.Resources) == 0 {
		return 0, errors.New("metadata lists no broker")
	}
	resp, err := c.Routed(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("DescribeConfigs: %w", err)
	}
	least := int64(math.MaxInt32)
	var found bool
	for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			return 0, fmt.Errorf("DescribeConfigs broker %s: %w", res.ResourceName, err)
		}
		for _, c := range res.Configs {
			if c.Name != "transaction.max.timeout.ms" || c.Value == nil {
				continue
			}
			v, err := strconv.ParseInt(*c.Value, 10, 32)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("broker %s: transaction.max.timeout.ms %q is not a positive int32", res.ResourceName, *c.Value)
			}
			least = min(least, v)
			found = true
		}
	}
	if !found {
		return 0, errors.New("no broker reported transaction.max.timeout.ms")
	}
	return int32(least), nil
}

// FindCoordinator returns the transaction coordinator of txid
// (FindCoordinator, key type 1).
func (c *Client) FindCoordinator(ctx context.Context, txid string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = txid
	req.CoordinatorKeys = []string{txid}
	resp, err := c.Routed(ctx, req)
	if err != nil {
		return -1, err
	}
	fr := resp.(*kmsg.FindCoordinatorResponse)
	code, node := fr.ErrorCode, fr.NodeID
	if len(fr.Coordinators) > 0 {
		code, node = fr.Coordinators[0].ErrorCode, fr.Coordinators[0].NodeID
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return -1, err
	}
	return node, nil
}

// Leader returns the leader of topic/partition from metadata, at most
// MetadataMinAge old unless fresh is set. The partitions of a topic looking
// up their leaders while a lookup is in flight share the next one
// (Client.leaders): many partitions starting together send one Metadata
// request, not one each.
func (c *Client) Leader(ctx context.Context, topic string, partition int32, fresh bool) (int32, error) {
	l, err := c.leaders.Get(ctx, leaderKey{topic, fresh}, partition)
	if errors.Is(err, coalesce.ErrNoAnswer) {
		return -1, kerr.UnknownTopicOrPartition
	}
	if err != nil {
		return -1, err
	}
	return l, nil
}

// leaderKey groups leader lookups: one topic, from the cache or fresh.
type leaderKey struct {
	topic string
	fresh bool
}

// topicLeaders answers the leaders of parts of the topic from one Metadata
// request (see leader); a partition without a leader gets
// LeaderNotAvailable, one the answer lacks UnknownTopicOrPartition.
func (c *Client) topicLeaders(ctx context.Context, k leaderKey, parts []int32) (map[int32]coalesce.Result[int32], error) {
	topic := k.topic
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	var (
		resp *kmsg.MetadataResponse
		err  error
	)
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	if k.fresh {
		var r kmsg.Response
		if r, err = c.cl.Request(rctx, req); err == nil {
			resp = r.(*kmsg.MetadataResponse)
		}
	} else {
		resp, err = c.cl.RequestCachedMetadata(rctx, req, 0)
	}
	if err != nil {
		return nil, err
	}
	// Only the partitions asked for: a topic of 10,000 partitions would
	// otherwise cost a map of all of them per call, and partitions
	// starting one after another make hundreds of calls.
	want := make(map[int32]bool, len(parts))
	for _, p := range parts {
		want[p] = true
	}
	out := make(map[int32]coalesce.Result[int32], len(parts))
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, err
		}
		for _, p := range t.Partitions {
			if !want[p.Partition] {
				continue
			}
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case err != nil:
				out[p.Partition] = coalesce.Result[int32]{Value: -1, Err: err}
			case p.Leader < 0:
				out[p.Partition] = coalesce.Result[int32]{Value: -1, Err: kerr.LeaderNotAvailable}
			default:
				out[p.Partition] = coalesce.Result[int32]{Value: p.Leader}
			}
		}
	}
	return out, nil
}

// Where names a mirror's destination partition in errors.
type Where struct {
	Mirror    string
	Topic     string
	Partition int32
}

// Errorf wraps err with the mirror, the destination partition and what
// failed.
func (w Where) Errorf(what string, err error) error {
	return fmt.Errorf("writer: mirror %q, destination %s/%d: %s: %w", w.Mirror, w.Topic, w.Partition, what, err)
}

// Wrap wraps err, which says what failed, with the mirror and the
// destination partition.
func (w Where) Wrap(err error) error {
	return fmt.Errorf("writer: mirror %q, destination %s/%d: %w", w.Mirror, w.Topic, w.Partition, err)
}

// Idempotent is a partition's use of an idempotent producer. It belongs to
// the Writer, so a reopened Partition continues the sequence.
type Idempotent struct {
	PID   int64 // -1: use the Writer's shared producer
	Epoch int16
	Seq   int32
	Stale bool // the last append's fate is unknown: take a fresh producer id
	// Confirmed is when the destination last answered an append of the
	// producer on the partition (zero: not since it was taken): appends are
	// pipelined only behind a confirmed producer (see core/writer's
	// confirmTTL).
	Confirmed time.Time
}

// ReadyIdempotent gives st a producer: the mirror's shared one on first
// use, a fresh producer id after an append whose outcome is unknown
// (Stale); its sequence starts at 0.
func (c *Client) ReadyIdempotent(ctx context.Context, st *Idempotent, log hclog.Logger) error {
	var (
		pid   int64
		epoch int16
		err   error
	)
	if st.Stale {
		pid, epoch, err = c.InitIdempotent(ctx)
		if err == nil {
			log.Info("fresh idempotent producer after an append whose outcome is unknown", "producer_id", pid)
		}
	} else {
		pid, epoch, err = c.IdempotentProducer(ctx)
	}
	if err != nil {
		return err
	}
	st.PID, st.Epoch, st.Seq, st.Stale, st.Confirmed = pid, epoch, 0, false, time.Time{}
	return nil
}
