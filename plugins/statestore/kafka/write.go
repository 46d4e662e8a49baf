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

// maxAttempts bounds how often a write starts over after another client
// fenced it.
const maxAttempts = 10

// write appends key's record (rec; a tombstone when del) if the key is at
// version expect, and returns the record's version. See the package
// documentation for why the result is a sound compare-and-set.
func (s *Store) write(ctx context.Context, key string, rec []byte, expect int64, del bool) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	p := s.partition(key)
	w := &writeOp{s: s, p: p, key: key, rec: rec, expect: expect, del: del, pending: -1}
	var err error
	for attempt := range maxAttempts {
		if attempt > 0 {
			// Several clients fencing each other in turn: back off by
			// a random few milliseconds so that one gets through.
			d := time.Duration(rand.Int64N(int64(10*time.Millisecond<<min(attempt, 5)))) + time.Millisecond
			select {
			case <-ctx.Done():
				return 0, w.ended(ctx, err)
			case <-time.After(d):
			}
		}
		var v int64
		var again bool
		v, again, err = w.attempt(ctx)
		if !again {
			return v, err
		}
	}
	return 0, fmt.Errorf("gave up after %d attempts: %w", maxAttempts, w.ended(ctx, err))
}

// writeOp is one write, over its attempts.
type writeOp struct {
	s      *Store
	p      int32
	key    string
	rec    []byte
	expect int64
	del    bool
	// pending is the offset of an earlier attempt's record whose commit
	// was asked for but not confirmed, -1 if none.
	pending int64
}

// ended is the error of a write given up with err: it says the outcome is
// unknown when an earlier attempt asked to commit.
func (w *writeOp) ended(ctx context.Context, err error) error {
	if err == nil {
		err = ctx.Err()
	}
	if w.pending >= 0 {
		return fmt.Errorf("%w: %w", errOutcomeUnknown, err)
	}
	return err
}

// attempt is one try: produce, read up to the record, check, commit or
// abort, read the record back. again reports that the producer was fenced
// or failed and the write should start over.
func (w *writeOp) attempt(ctx context.Context) (version int64, again bool, err error) {
	s := w.s
	prod, err := s.producerClient()
	if err != nil {
		return 0, false, err
	}
	if err := prod.BeginTransaction(); err != nil {
		s.dropProducer()
		return 0, true, err
	}
	r := &kgo.Record{Topic: s.cfg.Topic, Partition: w.p, Key: []byte(w.key), Value: w.rec}
	if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
		s.abort(prod)
		if ctx.Err() != nil || !retryWrite(err) {
			return 0, false, w.ended(ctx, describe(err))
		}
		return 0, true, fmt.Errorf("%w: %w", errFenced, err)
	}
	o := r.Offset
	if s.cfg.afterProduce != nil {
		s.cfg.afterProduce()
	}
	// No other producer appends after ours started, so everything
	// committed before our record is below it: read up to it.
	if err := s.log.catchUp(ctx, []int32{w.p}, o); err != nil {
		s.abort(prod)
		return 0, false, w.ended(ctx, fmt.Errorf("reading partition %d up to offset %d: %w", w.p, o, err))
	}
	if w.pending >= 0 {
		if s.log.watched(w.p, w.pending) {
			// The earlier attempt's commit went through after all.
			s.abort(prod)
			return w.pending + 1, false, nil
		}
		w.pending = -1 // it was aborted: its record is below ours and was not read
	}
	cur := s.log.version(w.key)
	if w.del && cur == 0 {
		s.abort(prod)
		return 0, false, fmt.Errorf("delete %q: %w", w.key, statestore.ErrNotFound)
	}
	if err := statestore.CheckVersion(w.key, cur, w.expect); err != nil {
		s.abort(prod)
		return 0, false, err
	}
	s.log.watch(w.p, o)
	if s.cfg.beforeCommit != nil {
		s.cfg.beforeCommit()
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		s.dropProducer()
		w.pending = o
		if ctx.Err() != nil {
			return 0, false, w.ended(ctx, err)
		}
		return 0, true, fmt.Errorf("%w: commit: %w", errFenced, err)
	}
	// Committed: read it back, so that it is in memory when Put
	// returns. It happened whatever comes of the read.
	_ = s.log.catchUp(ctx, []int32{w.p}, o+1)
	return o + 1, false, nil
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

// describe adds what the operator can do to produce errors with an
// obvious remedy.
func describe(err error) error {
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Errorf("the value is larger than max.message.bytes allows (the store's key, and the topic's config): %w", err)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Errorf("grant kmirror's principal WRITE and DESCRIBE on the transactional id: %w", err)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("grant kmirror's principal READ, WRITE and DESCRIBE on the state topic: %w", err)
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

// abort ends the open transaction without committing; if that fails the
// producer is dropped, and the transaction is aborted by the next
// producer's start or by the transaction timeout. Nothing of it is ever
// visible. The caller holds wmu.
func (s *Store) abort(prod *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	if err := prod.EndTransaction(ctx, kgo.TryAbort); err != nil {
		s.dropProducer()
	}
}
