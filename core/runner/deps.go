package runner

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Deps is everything a Runner uses. The engine (core/mirror) builds one per
// partition; tests build them by hand. A Runner holds no pointer back to
// the engine.
type Deps struct {
	// Mirror names the mirror (errors, logs, the offset map's key).
	Mirror string
	// Topic and TopicID are the source topic; TopicID is the id the
	// partition mirrors (the recorded one when the source topic was
	// recreated).
	Topic   string
	TopicID [16]byte
	// Partition is the partition's loaded state machine record.
	Partition *partition.Partition
	// Store holds the offset map (map mode).
	Store statestore.Store
	// Log is the mirror's logger; the runner adds topic and partition.
	Log hclog.Logger

	// Source and Dest are the two clusters' clients; DestAdmin is Dest's
	// admin client (DeleteRecords at alignment).
	Source, Dest *kgo.Client
	DestAdmin    *kadm.Client
	// SourceBounds and DestBounds, when set, answer the partition's log
	// bounds on each cluster for the mirror's partitions together
	// (kafkalog.BoundsBatcher); nil: the runner asks for its partition
	// alone.
	SourceBounds, DestBounds Bounds
	// SourceLeaders and DestLeaders, when set, gather the leader lookups of
	// the mirror's partitions reading their logs raw; nil: one each.
	SourceLeaders, DestLeaders *kafkalog.LeaderBatcher

	// Path is the mirror's shared fetcher and writer.
	Path DataPath
	// Control answers the mirror's operator rules.
	Control Control
	// Events tells the engine what happened.
	Events Events
	// Settings are the mirror's settings the runner applies.
	Settings Settings
}

// Bounds answers a partition's log start offset and high watermark on one
// cluster, from a request sent after the call (kafkalog.BoundsBatcher).
type Bounds interface {
	Bounds(ctx context.Context, topic string, partition int32) (start, hw int64, err error)
}

// Settings are the configuration a runner applies.
type Settings struct {
	// AlignmentBudget is mirror.offset.alignment.max.records.
	AlignmentBudget int64
	// MismatchAction is mirror.destination.mismatch.action ("map" or
	// "fail"; "" is "map").
	MismatchAction string
	// MaxAttempts is mirror.failed.retry.max.attempts (shown in status).
	MaxAttempts int
	// LagRefresh is how often a PAUSED partition reads the source's end
	// again, so that its lag keeps rising while it does not fetch
	// (mirror.metadata.refresh.interval.ms; 0: never).
	LagRefresh time.Duration
}

// DataPath is the part of the mirror's data path a runner uses: the
// fetcher shared by the mirror's partitions, and the writer its partition
// writer belongs to.
type DataPath interface {
	// Subscribe starts fetching a partition into q; Unsubscribe stops it;
	// Done acknowledges a delivery the runner has written (its bytes leave
	// the fetcher's buffer budget).
	Subscribe(spec fetcher.PartitionSpec, q *fetcher.Queue) error
	Unsubscribe(topic string, partition int32)
	Done(topic string, partition int32, bytes int)
	// NewWriter returns a new writer for the destination partition; the
	// runner owns it (and closes it). onTxnWriter records a transactional
	// writer before it is used.
	NewWriter(topic string, partition int32, onTxnWriter func(context.Context, writer.TxnWriterInfo) error) (*writer.Partition, error)
	// Refused is asked when the destination refused batch b (at expect)
	// for its size (cause): retry is true when the destination topic's
	// max.message.bytes was raised and the batch may be sent once more;
	// otherwise err says why it is refused (both limits, the key to raise).
	Refused(ctx context.Context, topic string, b batch.Batch, expect int64, cause error) (retry bool, err error)
	// MapRecords decodes a source batch for map mode within the memory
	// bound the destination's limit gives; a batch over it is an error
	// marked non-retryable.
	MapRecords(ctx context.Context, topic string, b batch.Batch) ([]batch.Record, error)
}

// Control answers what the mirror's operator rules say of a topic.
type Control interface {
	Paused(ctx context.Context, topic string) (bool, error)
	Stopped(ctx context.Context, topic string) (bool, error)
}

// Events are the engine's callbacks. They must not block.
type Events interface {
	// Appended counts batch b, covering offsets source offsets, whose
	// append the destination has just acknowledged (b is the batch as
	// appended: re-encoded in map mode, with the source's timestamps).
	// b must not be kept.
	Appended(b batch.Batch, offsets int64)
	// Mismatch counts a destination found to differ from its source, and
	// the action taken.
	Mismatch(topic string, partition int32, action string)
	// Stopped says a partition reached STOPPED (the read-only loop makes
	// the topic writable once all its partitions are).
	Stopped()
}
