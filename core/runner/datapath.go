package runner

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
)

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

// partitionWriter returns the runner's destination partition writer,
// creating it on first use. Its hook persists every transactional writer in
// the partition record before the writer is used. Only the runner
// goroutine calls it.
func (r *Runner) partitionWriter() (*writer.Partition, error) {
	if r.pw != nil {
		return r.pw, nil
	}
	pw, err := r.d.Path.NewWriter(r.topic, r.partition, func(ctx context.Context, info writer.TxnWriterInfo) error {
		return r.state.Update(ctx, func(d *partition.Data) error {
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
	r.setWriter(pw)
	return pw, nil
}

// setWriter replaces the runner's partition writer (nil: none), closing
// the previous one.
func (r *Runner) setWriter(pw *writer.Partition) {
	r.mu.Lock()
	old := r.pw
	r.pw = pw
	r.mu.Unlock()
	if old != nil && old != pw {
		r.dropSent() // what was in flight stays with the old writer
		old.Close()
	}
}

// resumeWriters replaces the runner's partition writer with a fresh one and
// hands it the recorded transactional writers; the writer learns from the
// destination which transactions are open (and waits for those completing),
// so the destination end offset read afterwards is the resume point. Writers
// the destination no longer holds as recorded are in the report's Lost list
// for the caller (proveDestination); a transaction open on the partition that
// kmirror did not start is an error.
func (r *Runner) resumeWriters(ctx context.Context) (writer.ResumeReport, error) {
	r.setWriter(nil)
	pw, err := r.partitionWriter()
	if err != nil {
		return writer.ResumeReport{}, r.errorf("%w", err)
	}
	rep, err := pw.Resume(ctx, recordedTxnWriters(r.state.Record().Data))
	if err != nil {
		return writer.ResumeReport{}, r.errorf("resuming destination transactions: %w", err)
	}
	for _, rw := range rep.Resumed {
		r.log.Info("resumed an open destination transaction", "transactional_id", rw.Writer.TransactionalID)
	}
	if len(rep.Foreign) > 0 {
		f := rep.Foreign[0]
		return writer.ResumeReport{}, partition.NonRetryable(r.errorf("producer %d has a transaction open on the destination partition since offset %d that kmirror did not start: "+
			"someone else writes to the mirror topic", f.ProducerID, f.StartOffset))
	}
	return rep, nil
}

// append writes b to the destination partition, which must assign it base
// offset expect.
//
// A batch the destination refuses for its size gets one more try once the
// destination topic's max.message.bytes is raised to the source's limit
// (unless the key is excluded, or the limit already allows it): the sync
// loops raise it too, but a partition may reach such a batch first. A batch
// still refused fails the partition at once, non-retryable, with both
// limits and the key to raise: the same batch would be refused again.
func (r *Runner) append(ctx context.Context, b batch.Batch, expect int64) error {
	pw, err := r.partitionWriter()
	if err != nil {
		return r.errorf("%w", err)
	}
	_, err = pw.AppendAt(ctx, b, expect)
	return r.appendFailed(ctx, pw, b, expect, err)
}

// appendFailed handles the outcome err of appending b at expect: nil when
// err is nil, or when b was refused for its size and went through once the
// destination's limit was raised; otherwise the error to fail the partition
// with.
func (r *Runner) appendFailed(ctx context.Context, pw *writer.Partition, b batch.Batch, expect int64, err error) error {
	if errors.Is(err, writer.ErrDuplicateMarker) {
		return err // for the caller (markerDuplicated)
	}
	if isTooLarge(err) && ctx.Err() == nil {
		retry, refused := r.d.Path.Refused(ctx, r.topic, b, expect, err)
		if retry {
			_, err = pw.AppendAt(ctx, b, expect)
		}
		if isTooLarge(err) {
			if retry {
				_, refused = r.d.Path.Refused(ctx, r.topic, b, expect, err)
			}
			return partition.NonRetryable(r.errorf("%w", refused))
		}
	}
	if err != nil {
		if errors.Is(err, writer.ErrOffsetMismatch) {
			return partition.NonRetryable(r.errorf("%w", err))
		}
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return r.errorf("%w; kmirror's destination principal must be allowed to write (make it a super user: mirror topics carry a DENY WRITE ACL for User:* while mirroring)", err)
		}
		return r.errorf("%w", err)
	}
	return nil
}

// abortAll aborts the destination transactions the partition holds open.
func (r *Runner) abortAll(ctx context.Context) error {
	pw, err := r.partitionWriter()
	if err != nil {
		return r.errorf("%w", err)
	}
	if err := pw.AbortAll(ctx); err != nil {
		return r.errorf("aborting open destination transactions: %w", err)
	}
	return nil
}

// subscribe starts fetching the runner's partition from offset into a queue
// the runner reads.
// epoch is the source leader epoch of the batch that ends right before
// offset (-1 when unknown); the source reports a divergence against it.
func (r *Runner) subscribe(offset int64, epoch int32) (*fetcher.Queue, error) {
	q := fetcher.NewQueue()
	r.d.Path.Unsubscribe(r.topic, r.partition)
	err := r.d.Path.Subscribe(fetcher.PartitionSpec{Topic: r.topic, TopicID: r.topicID, Partition: r.partition, FetchOffset: offset, LeaderEpoch: epoch}, q)
	if err != nil {
		return nil, r.errorf("%w", err)
	}
	return q, nil
}

func (r *Runner) unsubscribe() { r.d.Path.Unsubscribe(r.topic, r.partition) }

// done acknowledges a delivery the runner has written.
func (r *Runner) done(f fetcher.Fetched) { r.d.Path.Done(r.topic, r.partition, f.Bytes()) }

// isTooLarge reports whether the destination refused a batch for its size.
func isTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// isSourceLogChanged reports whether a fetch error means the source log is
// no longer the one mirrored, which no retry can fix.
func isSourceLogChanged(err error) bool {
	return errors.Is(err, fetcher.ErrOffsetOutOfRange) || errors.Is(err, fetcher.ErrDiverged) || errors.Is(err, fetcher.ErrTopicIDChanged)
}
