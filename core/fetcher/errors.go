package fetcher

import (
	"errors"

	"github.com/kmirror/kmirror/core/fetcher/delivery"
)

// Sentinel errors delivered in Fetched.Err (declared in core/fetcher/delivery,
// with the delivery they come in). Each is fatal for the partition: the
// fetcher stops fetching it until the runner removes and re-adds it.
var (
	// ErrOffsetOutOfRange: the fetch offset is out of the source's log;
	// delivered as *OffsetOutOfRangeError.
	ErrOffsetOutOfRange = delivery.ErrOffsetOutOfRange
	// ErrDiverged: the source's log diverges from what was fetched;
	// delivered as *DivergedError.
	ErrDiverged = delivery.ErrDiverged
	// ErrTopicIDChanged: the source topic was deleted and recreated.
	ErrTopicIDChanged = delivery.ErrTopicIDChanged
	// ErrAuthorization: the source denies the mirror's principal access.
	ErrAuthorization = delivery.ErrAuthorization
	// ErrAuthentication: the source broker rejected the mirror's credentials.
	ErrAuthentication = delivery.ErrAuthentication
)

type (
	// OffsetOutOfRangeError details ErrOffsetOutOfRange
	// (delivery.OffsetOutOfRangeError).
	OffsetOutOfRangeError = delivery.OffsetOutOfRangeError
	// DivergedError details ErrDiverged (delivery.DivergedError).
	DivergedError = delivery.DivergedError
)

// Errors returned by the Manager's methods.
var (
	// ErrAlreadyAdded: Add was called for a partition the Manager already
	// fetches. Remove it first.
	ErrAlreadyAdded = errors.New("partition already added to the fetcher")

	// ErrStopped: the Manager's Run has returned; it fetches nothing more.
	ErrStopped = errors.New("fetcher manager stopped")

	// ErrRunning: Run was called twice.
	ErrRunning = errors.New("fetcher manager already running")
)
