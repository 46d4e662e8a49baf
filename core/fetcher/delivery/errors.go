package delivery

import (
	"errors"
	"fmt"
)

// Sentinel errors delivered in Fetched.Err. Each is fatal for the partition:
// the fetcher stops fetching it until the runner removes and re-adds it.
var (
	// ErrOffsetOutOfRange: the fetch offset is below the source's log start
	// (records deleted by retention or DeleteRecords) or beyond its end (the
	// source log was truncated). Delivered as *OffsetOutOfRangeError.
	ErrOffsetOutOfRange = errors.New("fetch offset out of range on the source")

	// ErrDiverged: the source's log diverges from what was fetched (an
	// unclean leader election replaced records). Delivered as *DivergedError.
	ErrDiverged = errors.New("source log diverged from the fetched records")

	// ErrTopicIDChanged: the source topic was deleted and recreated under the
	// same name; its partitions are a different log now.
	ErrTopicIDChanged = errors.New("source topic id changed (topic deleted and recreated)")

	// ErrAuthorization: the source denies the mirror's principal access to
	// the topic (TOPIC_AUTHORIZATION_FAILED). The wrapped kerr error says
	// which. Grant READ and DESCRIBE on the topic to the source principal.
	ErrAuthorization = errors.New("not authorized to read the source topic")

	// ErrAuthentication: the source broker rejected the mirror's credentials
	// (SASL). Delivered to every partition of the session that met it.
	ErrAuthentication = errors.New("authentication to the source broker failed")
)

// OffsetOutOfRangeError details ErrOffsetOutOfRange. LogStartOffset and
// LogEndOffset are the source's, -1 when they could not be read.
type OffsetOutOfRangeError struct {
	Topic          string
	Partition      int32
	FetchOffset    int64
	LogStartOffset int64
	LogEndOffset   int64
}

func (e *OffsetOutOfRangeError) Error() string {
	var why string
	switch {
	case e.LogStartOffset >= 0 && e.FetchOffset < e.LogStartOffset:
		why = "the records were deleted on the source (retention or DeleteRecords) before they were mirrored"
	case e.LogEndOffset >= 0 && e.FetchOffset > e.LogEndOffset:
		why = "the source log is shorter than what was mirrored (truncated, or a different log)"
	default:
		why = "the source refused the offset"
	}
	return fmt.Sprintf("%s-%d: fetch offset %d out of range on the source (log start %s, log end %s): %s; mirroring cannot continue without a gap, so the partition needs an operator (check source retention, then re-seed the partition)",
		e.Topic, e.Partition, e.FetchOffset, offsetString(e.LogStartOffset), offsetString(e.LogEndOffset), why)
}

// Unwrap makes errors.Is(err, ErrOffsetOutOfRange) hold.
func (*OffsetOutOfRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// DivergedError details ErrDiverged: the source says that its log at
// FetchOffset does not follow leader epoch LastFetchedEpoch; its own history
// has epoch DivergingEpoch ending at DivergingEndOffset.
type DivergedError struct {
	Topic              string
	Partition          int32
	FetchOffset        int64
	LastFetchedEpoch   int32
	DivergingEpoch     int32
	DivergingEndOffset int64
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("%s-%d: the source log diverges before fetch offset %d: records fetched with leader epoch %d are not on the source's log (it has epoch %d ending at offset %d), most likely after an unclean leader election; the destination holds records the source no longer has, so the partition needs an operator",
		e.Topic, e.Partition, e.FetchOffset, e.LastFetchedEpoch, e.DivergingEpoch, e.DivergingEndOffset)
}

// Unwrap makes errors.Is(err, ErrDiverged) hold.
func (*DivergedError) Unwrap() error { return ErrDiverged }

func offsetString(o int64) string {
	if o < 0 {
		return "unknown"
	}
	return fmt.Sprint(o)
}
