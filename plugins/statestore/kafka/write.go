package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// errOutcomeUnknown: a write was cut off after it asked to commit, and the
// store could not learn whether it did.
var errOutcomeUnknown = errors.New("the write may have happened or still happen; re-read before acting on it")

// errFenced: another client of the store started its producer during the
// write, so the brokers aborted it; the store retries.
var errFenced = errors.New("fenced by another client of the store")

// maxAttempts bounds how often a batch of writes starts over after
// another client fenced it.
const maxAttempts = 10

// maxBatch bounds how many writes share one transaction.
const maxBatch = 500

// writeOp is one Put or Delete, over the attempts of the batch it is in.
type writeOp struct {
	ctx    context.Context // the caller's: an op whose caller gave up before its batch starts is dropped
	key    string
	p      int32
	rec    []byte // the record's value; nil: a tombstone
	expect int64
	del    bool
	// pending is the offset of an earlier attempt's record whose commit
	// was asked for but not confirmed, -1 if none.
	pending int64

	// offset is the record's offset in the current transaction.
	offset int64
	// Set when the op is done.
	finished bool
	version  int64
	err      error
	done     chan struct{}
}

func (w *writeOp) finish(v int64, err error) {
	if w.finished {
		return
	}
	w.finished, w.version, w.err = true, v, err
	close(w.done)
}

// ended is the error of an op given up with err: it says the outcome is
// unknown when an earlier attempt asked to commit it.
func (w *writeOp) ended(err error) error {
	if w.pending >= 0 {
		return fmt.Errorf("%w: %w", errOutcomeUnknown, err)
	}
	return err
}

// write appends key's record (rec; a tombstone when del) if the key is at
// version expect, and returns the record's version. Writes of concurrent
// callers are batched into one transaction (group commit). See the
// package documentation for why the result is a sound compare-and-set.
func (s *Store) write(ctx context.Context, key string, rec []byte, expect int64, del bool) (int64, error) {
	w := &writeOp{ctx: ctx, key: key, p: s.partition(key), rec: rec, expect: expect, del: del, pending: -1, done: make(chan struct{})}
	s.qmu.Lock()
	s.queue = append(s.queue, w)
	s.qmu.Unlock()
	// Whoever holds wmu runs the writes queued so far, ours included once
	// it is queued: when we get wmu, ours is done or still queued.
	for {
		select {
		case <-w.done:
			return w.version, w.err
		default:
		}
		s.wmu.Lock()
		s.qmu.Lock()
		n := min(len(s.queue), maxBatch)
		batch := append([]*writeOp(nil), s.queue[:n]...)
		s.queue = s.queue[n:]
		s.qmu.Unlock()
		if len(batch) > 0 {
			s.runBatch(batch)
		}
		s.wmu.Unlock()
	}
}

// runBatch runs ops in transactions until each is done, starting over
// after a fence. The caller holds wmu.
func (s *Store) runBatch(ops []*writeOp) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	var lastErr error
	tries := 0
	for attempt := range maxAttempts {
		var live []*writeOp
		for _, w := range ops {
			switch {
			case w.finished:
			case w.ctx.Err() != nil && w.pending < 0:
				w.finish(0, w.ctx.Err()) // nothing of it was written
			default:
				live = append(live, w)
			}
		}
		if len(live) == 0 {
			return
		}
		if attempt > 0 {
			// Several clients fencing each other in turn: back off by
			// a random few milliseconds so that one gets through.
			d := time.Duration(rand.Int64N(int64(10*time.Millisecond<<min(attempt, 5)))) + time.Millisecond
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		tries++
		again, err := s.attempt(ctx, live)
		if !again {
			return
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	for _, w := range ops {
		w.finish(0, w.ended(fmt.Errorf("gave up after %d attempt(s): %w", tries, lastErr)))
	}
}

// attempt is one try of a batch: produce every record, read up to them,
// check each op, commit the ops that pass (in a second transaction when
// some did not), read the records back. again reports that the producer
// was fenced or failed and the ops not done should start over; err is
// why.
func (s *Store) attempt(ctx context.Context, ops []*writeOp) (again bool, err error) {
	prod, again, err := s.produce(ctx, ops)
	if prod == nil {
		return again, err
	}
	if s.cfg.afterProduce != nil {
		s.cfg.afterProduce()
	}
	// No other producer appends after ours started (before its first
	// record), so everything committed before our records is below
	// them: read up to them.
	upTo := map[int32]int64{}
	for _, w := range ops {
		if o, ok := upTo[w.p]; !ok || w.offset < o {
			upTo[w.p] = w.offset
		}
	}
	if err := s.log.catchUpTo(ctx, upTo); err != nil {
		s.abort(prod)
		for _, w := range ops {
			w.finish(0, w.ended(fmt.Errorf("reading partition %d up to offset %d: %w", w.p, w.offset, err)))
		}
		return false, nil
	}
	// Decide each op in order, each seeing the ones before it.
	overlay := map[string]int64{} // key → version after the ops decided so far (0: absent)
	var commit []*writeOp
	for _, w := range ops {
		if w.pending >= 0 && s.log.watched(w.p, w.pending) {
			// An earlier attempt's commit went through after all.
			w.finish(w.pending+1, nil)
			continue
		}
		w.pending = -1 // if there was one, it was aborted: its record is below ours and was not read
		cur, ok := overlay[w.key]
		if !ok {
			cur = s.log.version(w.key)
		}
		if w.del && cur == 0 {
			w.finish(0, fmt.Errorf("delete %q: %w", w.key, statestore.ErrNotFound))
			continue
		}
		if err := statestore.CheckVersion(w.key, cur, w.expect); err != nil {
			w.finish(0, err)
			continue
		}
		overlay[w.key] = w.offset + 1
		if w.del {
			overlay[w.key] = 0
		}
		commit = append(commit, w)
	}
	if len(commit) < len(ops) {
		// The transaction holds records that must not be committed:
		// abort it and write the others again. No read is needed: our
		// producer started before the read above, so if anybody wrote
		// since, our commit fails.
		if !s.abort(prod) {
			return true, errors.New("abort failed")
		}
		if len(commit) == 0 {
			return false, nil
		}
		if prod, again, err = s.produce(ctx, commit); prod == nil {
			return again, err
		}
	}
	return s.commit(ctx, prod, commit)
}

// produce begins a transaction and produces the records of ops, setting
// their offsets. On failure it returns a nil client: again reports
// whether to start over (ops not done), and ops that cannot succeed are
// finished.
func (s *Store) produce(ctx context.Context, ops []*writeOp) (prod *kgo.Client, again bool, err error) {
	prod, err = s.producerClient()
	if err != nil {
		for _, w := range ops {
			w.finish(0, w.ended(err))
		}
		return nil, false, err
	}
	if err := prod.BeginTransaction(); err != nil {
		s.dropProducer()
		return nil, true, err
	}
	recs := make([]*kgo.Record, len(ops))
	for i, w := range ops {
		recs[i] = &kgo.Record{Topic: s.cfg.Topic, Partition: w.p, Key: []byte(w.key), Value: w.rec}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		s.abort(prod)
		if ctx.Err() != nil || !retryWrite(err) {
			for _, w := range ops {
				w.finish(0, w.ended(describe(err)))
			}
			return nil, false, err
		}
		return nil, true, fmt.Errorf("%w: %w", errFenced, err)
	}
	for i, w := range ops {
		w.offset = recs[i].Offset
	}
	return prod, false, nil
}

// commit commits the transaction holding the records of ops, and reads
// them back so that they are in memory when the writes return.
func (s *Store) commit(ctx context.Context, prod *kgo.Client, ops []*writeOp) (again bool, err error) {
	watch := map[int32][]int64{}
	past := map[int32]int64{}
	for _, w := range ops {
		watch[w.p] = append(watch[w.p], w.offset)
		past[w.p] = max(past[w.p], w.offset+1)
	}
	for p, offs := range watch {
		s.log.watch(p, offs...)
	}
	if s.cfg.beforeCommit != nil {
		s.cfg.beforeCommit()
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		s.dropProducer()
		for _, w := range ops {
			w.pending = w.offset
		}
		return true, fmt.Errorf("%w: commit: %w", errFenced, err)
	}
	// Committed: it happened whatever comes of the read.
	_ = s.log.catchUpTo(ctx, past)
	for _, w := range ops {
		w.finish(w.offset+1, nil)
	}
	return false, nil
}

// retryWrite reports whether a failed produce is worth starting over with
// a new producer: not when the record or the permissions are at fault.
func retryWrite(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.TopicAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed, kerr.ClusterAuthorizationFailed, kgo.ErrRecordTimeout} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// describe adds what the operator can do to errors with an obvious
// remedy.
func describe(err error) error {
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Errorf("the value is larger than max.message.bytes allows (the store's key, and the topic's config): %w", err)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Errorf("grant kmirror's principal WRITE and DESCRIBE on the transactional id: %w", err)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("grant kmirror's principal READ, WRITE, DESCRIBE and DESCRIBE_CONFIGS on the state topic (and CREATE, unless you create it): %w", err)
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("grant kmirror's principal CREATE on the cluster, or create the state topic yourself: %w", err)
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("the brokers refused the credentials (check sasl.username and the password): %w", err)
	}
	return err
}

// producerClient returns the store's transactional producer, creating it
// if needed. The caller holds wmu.
func (s *Store) producerClient() (*kgo.Client, error) {
	if s.producer != nil {
		return s.producer, nil
	}
	opts, err := s.cfg.clientOpts()
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.TransactionalID(s.cfg.transactionalID()),
		kgo.TransactionTimeout(s.cfg.TransactionTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(int32(s.cfg.MaxMessageBytes)),
		kgo.ProducerLinger(0),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	s.producer = cl
	return cl, nil
}

// dropProducer closes the producer after a failure; the next write starts
// a new one (whose InitProducerId aborts whatever the old one left open).
// The caller holds wmu.
func (s *Store) dropProducer() {
	if s.producer != nil {
		s.producer.Close()
		s.producer = nil
	}
}

// abort ends the open transaction without committing and reports whether
// it could; if not, the producer is dropped, and the transaction is
// aborted by the next producer's start or by the transaction timeout.
// Nothing of it is ever visible. The caller holds wmu.
func (s *Store) abort(prod *kgo.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	if err := prod.EndTransaction(ctx, kgo.TryAbort); err != nil {
		s.dropProducer()
		return false
	}
	return true
}
