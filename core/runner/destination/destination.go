// Package destination is a runner's writer of its destination partition:
// the writer.Partition it creates and replaces, whose hook records every
// transactional writer in the partition record before it is used; the
// resume of the recorded transactional writers; appends, with one more try
// for a batch refused for its size once the destination's limit is raised;
// and the abort of the transactions the partition holds open. The runner's
// goroutine is its only user.
package destination

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
)

// Path is the part of the mirror's data path the writer uses (the runner's
// DataPath).
type Path interface {
	// NewWriter returns a new writer for the destination partition; the
	// caller owns it (and closes it). onTxnWriter records a transactional
	// writer before it is used.
	NewWriter(topic string, partition int32, onTxnWriter func(context.Context, writer.TxnWriterInfo) error) (*writer.Partition, error)
	// Refused is asked when the destination refused batch b (at expect)
	// for its size (cause): retry is true when the destination topic's
	// max.message.bytes was raised and the batch may be sent once more;
	// otherwise err says why it is refused (both limits, the key to raise).
	Refused(ctx context.Context, topic string, b batch.Batch, expect int64, cause error) (retry bool, err error)
}

// Writer is one partition's destination writer.
type Writer struct {
	path      Path
	state     *partition.Partition
	mirror    string
	topic     string
	partition int32
	log       hclog.Logger
	// onRetry is every partition writer's writer.Partition.OnRetry hook.
	onRetry func(error)

	mu sync.Mutex // guards pw
	// pw is the partition's destination writer (nil until first used);
	// Partition creates it, Take removes it.
	pw *writer.Partition
}

// New returns the writer of mirror's topic partition, whose record is state;
// log gets what it tells.
func New(path Path, state *partition.Partition, mirror, topic string, p int32, log hclog.Logger) *Writer {
	return &Writer{path: path, state: state, mirror: mirror, topic: topic, partition: p, log: log}
}

// OnRetry sets the hook every partition writer created from now on is
// given (writer.Partition.OnRetry): told of each retriable error an append
// meets while it is retried, and nil once that append ends.
func (w *Writer) OnRetry(fn func(error)) { w.onRetry = fn }

// errorf builds an error that names the mirror, topic and partition.
func (w *Writer) errorf(format string, args ...any) error {
	return fmt.Errorf("mirror %s: topic %s partition %d: %w", w.mirror, w.topic, w.partition, fmt.Errorf(format, args...))
}

// txnWriterRecord is how a destination transactional writer is kept in the
// partition record.
func txnWriterRecord(w writer.TxnWriterInfo) partition.TxnWriter {
	return partition.TxnWriter{SourceProducerID: w.SourceProducerID, TransactionalID: w.TransactionalID, ProducerID: w.ProducerID, Epoch: w.Epoch}
}

// recordedTxnWriters returns the writers a partition record holds, for the
// writer.
func recordedTxnWriters(d partition.Data) []writer.TxnWriterInfo {
	out := make([]writer.TxnWriterInfo, len(d.TxnWriters))
	for i, w := range d.TxnWriters {
		out[i] = writer.TxnWriterInfo{SourceProducerID: w.SourceProducerID, TransactionalID: w.TransactionalID, ProducerID: w.ProducerID, Epoch: w.Epoch}
	}
	return out
}

// Current returns the partition writer, nil when there is none.
func (w *Writer) Current() *writer.Partition { return w.pw }

// Partition returns the destination partition writer, creating it on first
// use. Its hook persists every transactional writer in the partition record
// before the writer is used.
func (w *Writer) Partition() (*writer.Partition, error) {
	if w.pw != nil {
		return w.pw, nil
	}
	pw, err := w.path.NewWriter(w.topic, w.partition, func(ctx context.Context, info writer.TxnWriterInfo) error {
		return w.state.Update(ctx, func(d *partition.Data) error {
			rec := txnWriterRecord(info)
			for i := range d.TxnWriters {
				if d.TxnWriters[i].SourceProducerID == info.SourceProducerID {
					d.TxnWriters[i] = rec
					return nil
				}
			}
			d.TxnWriters = append(d.TxnWriters, rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if w.onRetry != nil {
		pw.OnRetry(w.onRetry)
	}
	w.mu.Lock()
	w.pw = pw
	w.mu.Unlock()
	return pw, nil
}

// Take removes the partition writer and returns it (nil: none) for the
// caller to close, once it let go of what it had in flight there.
func (w *Writer) Take() *writer.Partition {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.pw
	w.pw = nil
	return old
}

// Resume hands a fresh partition writer (Take the previous one first) the
// recorded transactional writers; the writer learns from the destination
// which transactions are open (and waits for those completing), so the
// destination end offset read afterwards is the resume point. Writers the
// destination no longer holds as recorded are in the report's Lost list for
// the caller (proving the destination); a transaction open on the partition
// that kmirror did not start is an error.
func (w *Writer) Resume(ctx context.Context) (writer.ResumeReport, error) {
	pw, err := w.Partition()
	if err != nil {
		return writer.ResumeReport{}, w.errorf("%w", err)
	}
	rep, err := pw.Resume(ctx, recordedTxnWriters(w.state.Record().Data))
	if err != nil {
		return writer.ResumeReport{}, w.errorf("resuming destination transactions: %w", err)
	}
	for _, rw := range rep.Resumed {
		w.log.Info("resumed an open destination transaction", "transactional_id", rw.Writer.TransactionalID)
	}
	if len(rep.Foreign) > 0 {
		f := rep.Foreign[0]
		return writer.ResumeReport{}, partition.NonRetryable(w.errorf("producer %d has a transaction open on the destination partition since offset %d that kmirror did not start: "+
			"someone else writes to the mirror topic", f.ProducerID, f.StartOffset))
	}
	return rep, nil
}

// Append writes b to the destination partition, which must assign it base
// offset expect.
//
// A batch the destination refuses for its size gets one more try once the
// destination topic's max.message.bytes is raised to the source's limit
// (unless the key is excluded, or the limit already allows it): the sync
// loops raise it too, but a partition may reach such a batch first. A batch
// still refused fails the partition at once, non-retryable, with both
// limits and the key to raise: the same batch would be refused again.
func (w *Writer) Append(ctx context.Context, b batch.Batch, expect int64) error {
	pw, err := w.Partition()
	if err != nil {
		return w.errorf("%w", err)
	}
	_, err = pw.AppendAt(ctx, b, expect)
	return w.Failed(ctx, pw, b, expect, err)
}

// Failed handles the outcome err of appending b at expect: nil when err is
// nil, or when b was refused for its size and went through once the
// destination's limit was raised; otherwise the error to fail the partition
// with (a duplicated marker's as it is, for the caller).
func (w *Writer) Failed(ctx context.Context, pw *writer.Partition, b batch.Batch, expect int64, err error) error {
	if errors.Is(err, writer.ErrDuplicateMarker) {
		return err // for the caller (markerDuplicated)
	}
	if isTooLarge(err) && ctx.Err() == nil {
		retry, refused := w.path.Refused(ctx, w.topic, b, expect, err)
		if retry {
			_, err = pw.AppendAt(ctx, b, expect)
		}
		if isTooLarge(err) {
			if retry {
				_, refused = w.path.Refused(ctx, w.topic, b, expect, err)
			}
			return partition.NonRetryable(w.errorf("%w", refused))
		}
	}
	if err != nil {
		if errors.Is(err, writer.ErrOffsetMismatch) {
			return partition.NonRetryable(w.errorf("%w", err))
		}
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return w.errorf("%w; kmirror's destination principal must be allowed to write (make it a super user: mirror topics carry a DENY WRITE ACL for User:* while mirroring)", err)
		}
		return w.errorf("%w", err)
	}
	return nil
}

// AbortAll aborts the destination transactions the partition holds open.
func (w *Writer) AbortAll(ctx context.Context) error {
	pw, err := w.Partition()
	if err != nil {
		return w.errorf("%w", err)
	}
	if err := pw.AbortAll(ctx); err != nil {
		return w.errorf("aborting open destination transactions: %w", err)
	}
	return nil
}

// isTooLarge reports whether the destination refused a batch for its size.
func isTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}
