package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/writer/internal/cluster"
	"github.com/kmirror/kmirror/core/writer/internal/produce"
	"github.com/kmirror/kmirror/core/writer/internal/txn"
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
	sinks  *produce.Sinks
	parts  map[tpKey]*Partition
	idem   map[tpKey]*cluster.Idempotent // survives Partition.Close: sequences continue

	// dest asks the destination cluster everything but Produce (leaders,
	// end offsets, producer and transaction states, coordinators), with
	// the retry policy.
	dest *cluster.Client

	inflight atomic.Int64 // pipelined appends sent and not yet answered
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
		parts:  make(map[tpKey]*Partition),
		idem:   make(map[tpKey]*cluster.Idempotent),
	}
	w.dest = cluster.New(ctx, cluster.Config{
		Client: client, RequestTimeout: cfg.requestTimeout, Retry: cfg.retryPolicy(),
		TxnTimeout: cfg.txnTimeout, Log: w.log,
	})
	w.sinks = produce.NewSinks(ctx, &w.wg, produce.Config{
		Client: client, MaxRequestBytes: cfg.maxRequestBytes, RequestTimeout: cfg.requestTimeout,
		Observer: cfg.observer, Closed: ErrClosed,
	}, cfg.maxInflight)
	return w, nil
}

// Close stops the Writer's sinks and waits for them. Appends in progress
// return ErrClosed; destination transactions stay as they are (abort them
// first with Partition.AbortAll when stopping, or leave them to be resumed).
func (w *Writer) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.sinks.Close()
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
	case !txn.LegalTopic(topic):
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
		idem = &cluster.Idempotent{PID: -1}
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
