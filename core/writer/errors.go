package writer

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/core/writer/internal/cluster"
	"github.com/kmirror/kmirror/core/writer/internal/txn"
)

// Sentinel errors. Errors returned by this package wrap at most one of them,
// and Kafka errors (github.com/twmb/franz-go/pkg/kerr) are wrapped as they
// are, so callers can branch with errors.Is.
var (
	// ErrOffsetMismatch: a batch or marker did not land, or would not land,
	// at the expected destination offset. The destination partition holds
	// something kmirror did not write (another producer, or a previous
	// mirror of another source), or the caller's expected offset is wrong.
	// Returned as an *OffsetMismatchError.
	ErrOffsetMismatch = errors.New("destination offset differs from the expected offset")

	// ErrNotDense: a data batch has gaps (compaction removed records:
	// RecordCount < LastOffsetDelta+1). Brokers assign consecutive offsets,
	// so it cannot be written offset for offset; the partition needs map
	// mode, where gapped batches are re-encoded.
	ErrNotDense = errors.New("record batch has offset gaps and cannot be appended offset for offset")

	// ErrDuplicateMarker: the destination wrote a replayed transaction's
	// marker more than once, so its end offset is past the marker's
	// offset + 1 and later source offsets cannot land at their own offsets.
	// Kafka's transaction coordinator writes the markers of a transaction
	// again when it fails over between writing them and recording the
	// transaction complete (a broker restart); consumers skip the extra
	// markers. Returned as a *DuplicateMarkerError, which also matches
	// ErrOffsetMismatch.
	ErrDuplicateMarker = errors.New("the destination wrote the transaction marker more than once")

	// ErrNotFlushed: an operation was called while appends of Send are
	// still in flight on the partition; Flush first.
	ErrNotFlushed = errors.New("appends are in flight on the partition (Flush first)")

	// ErrUnresumedTransaction: the destination has an open transaction for
	// a transactional id this Partition has no writer for. Initialising it
	// would abort that transaction; call Partition.Resume with the writers
	// recorded through OnTxnWriter before appending.
	ErrUnresumedTransaction = txn.ErrUnresumedTransaction

	// ErrWriterLost: the destination no longer holds a transactional
	// writer's producer id and epoch: its transaction timed out and was
	// aborted by the destination, or another producer initialised the
	// transactional id. Records of that transaction may be aborted on the
	// destination while the source commits them; compare the partition with
	// the source (Partition.Resume reports such writers as Lost).
	ErrWriterLost = txn.ErrWriterLost

	// ErrUnsupportedControl: a control batch holds a record other than a
	// transaction marker (COMMIT or ABORT), which only KRaft metadata logs
	// carry.
	ErrUnsupportedControl = errors.New("control record is not a COMMIT or ABORT marker")

	// ErrClosed: the Writer or Partition was closed.
	ErrClosed = cluster.ErrClosed
)

// OffsetMismatchError says where a batch or marker landed, or would have
// landed, on the destination, and where it was expected. It matches
// ErrOffsetMismatch with errors.Is.
type OffsetMismatchError struct {
	Mirror    string
	Topic     string
	Partition int32
	// Expected is the destination offset the batch's first record (or the
	// marker) should have.
	Expected int64
	// Got is the offset it got, or, when nothing was written, the
	// destination's end offset it would have got.
	Got int64
	// What says which check failed.
	What string
}

func (e *OffsetMismatchError) Error() string {
	hint := "the destination partition holds records kmirror did not write there, or the resume point is wrong; " +
		"compare it with the source, and run it in map mode or empty it"
	if e.Got < e.Expected {
		// Shorter than kmirror left it: nothing foreign in the way, offsets
		// kmirror wrote are gone.
		hint = "the destination partition ends before offsets kmirror wrote there: the destination topic was deleted " +
			"(and created again) or lost records (an unclean leader election); delete the destination topic and reset " +
			"the partition to copy it again"
	}
	return fmt.Sprintf("writer: mirror %q, destination %s/%d: %s: expected offset %d, got %d: %v (%s)",
		e.Mirror, e.Topic, e.Partition, e.What, e.Expected, e.Got, ErrOffsetMismatch, hint)
}

// Is reports whether target is ErrOffsetMismatch.
func (e *OffsetMismatchError) Is(target error) bool { return target == ErrOffsetMismatch }

// DuplicateMarkerError says that the destination wrote a transaction marker
// the writer replayed more than once: its transaction coordinator failed over
// between writing the marker and recording the transaction complete (a
// broker restart) and wrote it again. Consumers skip the copies, but each
// takes an offset, so later source offsets cannot land at their own
// offsets. errors.Is matches ErrDuplicateMarker and ErrOffsetMismatch.
//
// Two cases:
//   - The copies were there when the marker's append looked (Shifted is
//     empty): the destination holds the marker asked for at Marker and,
//     after it, End-Marker-1 copies; its end offset is End.
//   - A copy was written after the marker's append had returned (Shifted is
//     set): the next append, expected at Expected, found only copies of the
//     marker at Marker between Expected and where it landed (a next marker
//     may have copies of its own after it too). Shifted says
//     where that batch and the appends pipelined behind it landed, in order,
//     each Shifted[0].BaseOffset-Expected offsets later than expected: they
//     are on the destination, once. End is the offset after the last of
//     them, where the next append lands.
type DuplicateMarkerError struct {
	Mirror    string
	Topic     string
	Partition int32
	// Marker is the destination offset of the marker that was copied.
	Marker int64
	// End is the destination's end offset after the copies (and after the
	// Shifted batches).
	End int64
	// Expected is the destination offset the first Shifted batch was
	// expected at (where the late copies start); 0 when Shifted is empty.
	Expected int64
	// Shifted are the batches that landed after late copies, in the order
	// they were sent (for Partition.Send and AppendAll, the first ones sent
	// for which done was not called).
	Shifted []Result
}

func (e *DuplicateMarkerError) Error() string {
	if len(e.Shifted) > 0 {
		copies := e.Shifted[0].BaseOffset - e.Expected
		what := "batch"
		if e.Shifted[0].Control {
			what = "next transaction marker"
		}
		return fmt.Sprintf("writer: mirror %q, destination %s/%d: the destination wrote the transaction marker at offset %d %d more time(s) after it was replayed "+
			"(its transaction coordinator failed over), so the %s expected at offset %d landed at offset %d; %d append(s) landed %d offset(s) later than expected, "+
			"the destination's end offset is %d: %v",
			e.Mirror, e.Topic, e.Partition, e.Marker, copies, what, e.Expected, e.Shifted[0].BaseOffset, len(e.Shifted), copies, e.End, ErrDuplicateMarker)
	}
	return fmt.Sprintf("writer: mirror %q, destination %s/%d: the transaction marker at offset %d was written %d times by the destination "+
		"(its transaction coordinator failed over while writing it); the destination's end offset is %d, not %d: %v",
		e.Mirror, e.Topic, e.Partition, e.Marker, e.End-e.Marker, e.End, e.Marker+1, ErrDuplicateMarker)
}

func (e *DuplicateMarkerError) Unwrap() []error {
	return []error{ErrDuplicateMarker, ErrOffsetMismatch}
}
