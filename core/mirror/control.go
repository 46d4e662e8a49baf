package mirror

import (
	"errors"
	"time"
)

// Operator actions on a running mirror (the admin API and CLI call them):
// pause and resume, stop and start topics, failover. Each is idempotent and
// recorded in the state store before it takes effect, so that a daemon
// killed in the middle completes it when it starts again.

// Errors of the operator actions; callers branch with errors.Is.
var (
	// ErrNoMirror: no mirror of that name runs in this daemon.
	ErrNoMirror = errors.New("no such mirror")
	// ErrInvalidRequest: the request itself is wrong (a bad regex, a
	// missing field).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrConflict: the request conflicts with the mirror's state (for
	// example starting a topic that another stop pattern still stops).
	ErrConflict = errors.New("conflicts with the mirror's state")
)

// OpResult is the outcome of an operator action: what it did, and the
// affected partitions' status afterwards.
type OpResult struct {
	Mirror     string            `json:"mirror"`
	Message    string            `json:"message"`
	Partitions []PartitionStatus `json:"partitions"`
}

// FailoverRequest asks to fail a mirror's topics over to the destination.
type FailoverRequest struct {
	Mirror string `json:"mirror"`
	// Topics are regexes (anchored); empty means every topic of the mirror.
	Topics []string `json:"topics"`
	// WaitForCatchUp, when positive, first waits up to this long until
	// every affected partition has no lag (a planned failover); the
	// failover does not start if it passes.
	WaitForCatchUp time.Duration `json:"-"`
}

// FailoverResult says where each failed-over partition stopped and which
// groups had their offsets synced last.
type FailoverResult struct {
	Mirror string          `json:"mirror"`
	Topics []TopicFailover `json:"topics"`
	Groups []string        `json:"groups"`
}

// TopicFailover is one topic of a failover.
type TopicFailover struct {
	Topic      string              `json:"topic"`
	Partitions []PartitionFailover `json:"partitions"`
}

// PartitionFailover is where one partition stopped.
type PartitionFailover struct {
	Partition          int32 `json:"partition"`
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
}
