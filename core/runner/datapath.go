package runner

import (
	"context"
	"errors"

	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/writer"
)

// resumeWriters replaces the runner's partition writer with a fresh one
// (what was in flight stays with the old one) and resumes the recorded
// transactional writers (destination.Writer.Resume).
func (r *Runner) resumeWriters(ctx context.Context) (writer.ResumeReport, error) {
	if old := r.dest.Take(); old != nil {
		r.dropSent() // what was in flight stays with the old writer
		old.Close()
	}
	return r.dest.Resume(ctx)
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

// isSourceLogChanged reports whether a fetch error means the source log is
// no longer the one mirrored, which no retry can fix.
func isSourceLogChanged(err error) bool {
	return errors.Is(err, fetcher.ErrOffsetOutOfRange) || errors.Is(err, fetcher.ErrDiverged) || errors.Is(err, fetcher.ErrTopicIDChanged)
}
