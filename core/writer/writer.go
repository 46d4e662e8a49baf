package writer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/internal/coalesce"
	"github.com/kmirror/kmirror/core/writer/internal/produce"
)

// Request versions pinned to transaction protocol v1 (see the package doc).
// Produce v12 would add partitions to transactions implicitly and EndTxn v5
// would bump the epoch after every transaction (KIP-890 part 2).
const (
	produceVersion            int16 = produce.Version
	initProducerIDVersion     int16 = 4
	addPartitionsToTxnVersion int16 = 3
	endTxnVersion             int16 = 4
)

// Writer writes one mirror's batches to one destination cluster. It owns a
// sink per destination broker (started on first use) and the partition
// writers it hands out. Close stops the sinks and waits for them.
type Writer struct {
	cl  *kgo.Client
	cfg config
	log hclog.Logger

	ctx    context.Context // ends at Close; the sinks' goroutines run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	sinks  map[int32]*produce.Sink
	parts  map[tpKey]*Partition
	idem   map[tpKey]*idemState // survives Partition.Close: sequences continue

	pidMu    sync.Mutex
	pid      int64 // the mirror's idempotent producer; -1 until initialised
	pidEpoch int16

	timeoutMu  sync.Mutex
	txnTimeout int32 // ms; 0 until read from the destination

	inflight atomic.Int64 // pipelined appends sent and not yet answered
	// producers gathers the partitions' DescribeProducers per topic
	// (producers.go).
	producers *coalesce.Group[string, int32, activeProducers]
	// ends gathers the partitions' end-offset reads per topic
	// (producers.go).
	ends *coalesce.Group[string, int32, int64]
	// leaders gathers the partitions' leader lookups per topic (leader).
	leaders *coalesce.Group[leaderKey, int32, int32]
}

// InflightAppends returns how many pipelined appends (Send, AppendAll) of the
// Writer's partitions are sent and not yet answered.
func (w *Writer) InflightAppends() int64 { return w.inflight.Load() }

type tpKey struct {
	topic     string
	partition int32
}

// New returns a Writer that writes through client, a client of the
// destination cluster. The Writer does not own client: close the Writer
// before the client. New sends no request; the first Append connects.
//
// client must not be configured with RequiredAcks(NoAck): franz-go then
// discards every response on its produce connections, and the Writer's
// acks=-1 ProduceRequests would never be answered.
func New(client *kgo.Client, opts ...Option) (*Writer, error) {
	if client == nil {
		return nil, errors.New("writer: New: nil destination client")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if acks, ok := client.OptValue(kgo.RequiredAcks).(kgo.Acks); ok && acks == kgo.NoAck() {
		return nil, errors.New("writer: New: the destination client is configured with RequiredAcks(NoAck); " +
			"kmirror needs acks=all answers, use a client without that option")
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		cl:     client,
		cfg:    cfg,
		log:    cfg.logger.With("mirror", cfg.mirror),
		ctx:    ctx,
		cancel: cancel,
		sinks:  make(map[int32]*produce.Sink),
		parts:  make(map[tpKey]*Partition),
		idem:   make(map[tpKey]*idemState),
		pid:    -1,
	}
	w.producers, w.ends = newProducersBatcher(w), newEndsBatcher(w)
	w.leaders = coalesce.New(0, w.topicLeaders)
	return w, nil
}

// Close stops the Writer's sinks and waits for them. Appends in progress
// return ErrClosed; destination transactions stay as they are (abort them
// first with Partition.AbortAll when stopping, or leave them to be resumed).
func (w *Writer) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// Partition returns the writer of destination partition topic/partition.
// A Writer hands out at most one Partition per destination partition at a
// time (a second one would break the per-partition order and sequences);
// Close it to release the partition.
//
// onTxnWriter is called when a destination transactional writer of the
// partition gets a producer id and epoch (its first use, or a new epoch after
// it was idle), after InitProducerId and before any transaction is opened
// with it. It must persist the TxnWriterInfo (the partition's state record)
// before returning; when it returns an error, nothing is appended and the
// Append returns that error. Pass the recorded writers to Partition.Resume
// after a restart.
func (w *Writer) Partition(topic string, partition int32, onTxnWriter func(context.Context, TxnWriterInfo) error) (*Partition, error) {
	switch {
	case topic == "":
		return nil, errors.New("writer: Partition: empty topic name")
	case !legalTopic(topic):
		// Transactional ids rely on topic names holding no ':'.
		return nil, fmt.Errorf("writer: Partition %q/%d: not a legal Kafka topic name (letters, digits, '.', '_' and '-', at most 249 characters)", topic, partition)
	case partition < 0:
		return nil, fmt.Errorf("writer: Partition %s/%d: negative partition", topic, partition)
	case onTxnWriter == nil:
		return nil, fmt.Errorf("writer: Partition %s/%d: nil OnTxnWriter hook: transactional writers must be recorded before use", topic, partition)
	}
	k := tpKey{topic, partition}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, fmt.Errorf("writer: mirror %q: Partition %s/%d: %w", w.cfg.mirror, topic, partition, ErrClosed)
	}
	if _, ok := w.parts[k]; ok {
		return nil, fmt.Errorf("writer: mirror %q: Partition %s/%d is already open in this Writer; close it first", w.cfg.mirror, topic, partition)
	}
	idem := w.idem[k]
	if idem == nil {
		idem = &idemState{pid: -1}
		w.idem[k] = idem
	}
	p := newPartition(w, topic, partition, onTxnWriter, idem)
	w.parts[k] = p
	return p, nil
}

func (w *Writer) release(p *Partition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parts[tpKey{p.topic, p.partition}] == p {
		delete(w.parts, tpKey{p.topic, p.partition})
	}
}

// sink returns the sink of destination broker node, starting it on first
// use.
func (w *Writer) sink(node int32) (*produce.Sink, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	s := w.sinks[node]
	if s == nil {
		s = produce.NewSink(produce.Config{
			Client: w.cl, Node: node, MaxRequestBytes: w.cfg.maxRequestBytes,
			RequestTimeout: w.cfg.requestTimeout, Observer: w.cfg.observer, Closed: ErrClosed,
		})
		w.sinks[node] = s
		for range w.cfg.maxInflight {
			w.wg.Go(func() { s.Work(w.ctx) })
		}
	}
	return s, nil
}

// pinned sends a request at most at version max, whatever the broker and
// franz-go support. franz-go sets the version to the smaller of the
// request's MaxVersion and the broker's; overriding MaxVersion is how a
// request is pinned through Broker.Request.
type pinned struct {
	kmsg.Request
	max int16
}

func (p *pinned) MaxVersion() int16 { return p.max }

// retrier paces the retries of one operation with the Writer's retry
// policy: waits double from the RetryBackoff minimum to its maximum, each
// drawn with full jitter (core/backoff), and the operation gives up when
// the next wait would end more than RetryTimeout after it started.
type retrier struct {
	w *Writer
	*backoff.Retry
}

func (w *Writer) newRetrier() retrier {
	return retrier{w: w, Retry: w.cfg.retryPolicy().Start()}
}

// backoff waits before the next attempt after lastErr. It returns an error
// wrapping lastErr when the retry timeout has passed, and the context's
// error when ctx ends or the Writer closes.
func (r *retrier) backoff(ctx context.Context, lastErr error) error {
	d, ok := r.Next()
	if !ok {
		return fmt.Errorf("gave up after %d attempts in %v (RetryTimeout): %w", r.Retries(), r.w.cfg.retryTimeout, lastErr)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(context.Cause(ctx), lastErr)
	case <-r.w.ctx.Done():
		return errors.Join(ErrClosed, lastErr)
	}
}

// request sends req to broker node with the RequestTimeout.
func (w *Writer) request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.requestTimeout)
	defer cancel()
	return w.cl.Broker(int(node)).Request(ctx, req)
}

// routed sends req through franz-go's routing (partition leaders for
// ListOffsets and DescribeProducers, coordinators for DescribeTransactions),
// with the RequestTimeout.
func (w *Writer) routed(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.requestTimeout)
	defer cancel()
	return w.cl.Request(ctx, req)
}

// refreshBrokers makes the client reload the destination's broker list (a
// Metadata request without topics), so that Broker(id) knows a coordinator
// or leader that joined since. Errors are left to the retried request.
func (w *Writer) refreshBrokers(ctx context.Context) {
	_, _ = w.routed(ctx, kmsg.NewPtrMetadataRequest())
}

// idempotentProducer returns the mirror's idempotent producer id and epoch,
// initialising it on first use.
func (w *Writer) idempotentProducer(ctx context.Context) (int64, int16, error) {
	w.pidMu.Lock()
	defer w.pidMu.Unlock()
	if w.pid >= 0 {
		return w.pid, w.pidEpoch, nil
	}
	pid, epoch, err := w.initIdempotent(ctx)
	if err != nil {
		return 0, 0, err
	}
	w.pid, w.pidEpoch = pid, epoch
	w.log.Debug("idempotent producer initialised", "producer_id", pid, "epoch", epoch)
	return pid, epoch, nil
}

// initIdempotent sends InitProducerId without transactional id: a fresh
// producer id. Any broker answers it.
func (w *Writer) initIdempotent(ctx context.Context) (int64, int16, error) {
	r := w.newRetrier()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = -1
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := w.routed(ctx, req)
		if err == nil {
			ir := resp.(*kmsg.InitProducerIDResponse)
			if err = kerr.ErrorForCode(ir.ErrorCode); err == nil {
				return ir.ProducerID, ir.ProducerEpoch, nil
			}
			if !kerr.IsRetriable(err) {
				return 0, 0, fmt.Errorf("InitProducerId (idempotent): %w", err)
			}
		}
		if err := r.backoff(ctx, err); err != nil {
			return 0, 0, fmt.Errorf("InitProducerId (idempotent): %w", err)
		}
	}
}

// transactionTimeout returns the InitProducerId transaction timeout in ms:
// the option, else the smallest transaction.max.timeout.ms of the
// destination brokers, else Kafka's default.
func (w *Writer) transactionTimeout(ctx context.Context) int32 {
	if w.cfg.txnTimeout > 0 {
		return int32(w.cfg.txnTimeout.Milliseconds())
	}
	w.timeoutMu.Lock()
	defer w.timeoutMu.Unlock()
	if w.txnTimeout > 0 {
		return w.txnTimeout
	}
	ms, err := w.describeMaxTxnTimeout(ctx)
	if err != nil {
		fallback := int32(DefaultTransactionTimeout.Milliseconds())
		w.log.Warn("cannot read transaction.max.timeout.ms from the destination brokers; using Kafka's default",
			"timeout_ms", fallback, "error", err)
		return fallback // not cached: the next writer tries again
	}
	w.txnTimeout = ms
	w.log.Debug("destination transaction timeout", "timeout_ms", ms)
	return ms
}

func (w *Writer) describeMaxTxnTimeout(ctx context.Context) (int32, error) {
	mresp, err := w.routed(ctx, kmsg.NewPtrMetadataRequest()) // no topics: brokers only
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
	resp, err := w.routed(ctx, req)
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

// findCoordinator returns the transaction coordinator of txid
// (FindCoordinator, key type 1).
func (w *Writer) findCoordinator(ctx context.Context, txid string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = txid
	req.CoordinatorKeys = []string{txid}
	resp, err := w.routed(ctx, req)
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

// leader returns the leader of topic/partition from metadata, at most
// MetadataMinAge old unless fresh is set. The partitions of a topic looking
// up their leaders while a lookup is in flight share the next one
// (Writer.leaders): many partitions starting together send one Metadata
// request, not one each.
func (w *Writer) leader(ctx context.Context, topic string, partition int32, fresh bool) (int32, error) {
	l, err := w.leaders.Get(ctx, leaderKey{topic, fresh}, partition)
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
func (w *Writer) topicLeaders(ctx context.Context, k leaderKey, parts []int32) (map[int32]coalesce.Result[int32], error) {
	topic := k.topic
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	var (
		resp *kmsg.MetadataResponse
		err  error
	)
	rctx, cancel := context.WithTimeout(ctx, w.cfg.requestTimeout)
	defer cancel()
	if k.fresh {
		var r kmsg.Response
		if r, err = w.cl.Request(rctx, req); err == nil {
			resp = r.(*kmsg.MetadataResponse)
		}
	} else {
		resp, err = w.cl.RequestCachedMetadata(rctx, req, 0)
	}
	if err != nil {
		return nil, err
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

// legalTopic says whether topic is made of what Kafka allows in a topic
// name: [A-Za-z0-9._-], at most 249 characters.
func legalTopic(topic string) bool {
	if len(topic) > 249 {
		return false
	}
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
