package admin

import (
	"time"

	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/core/failover"
	"github.com/kmirror/kmirror/core/groupsync"
	"github.com/kmirror/kmirror/core/runner"
)

// The types a Controller takes and returns: the engine's status and the
// outcomes of operator actions. They are the admin API's JSON answers too
// (field names are stable), and the CLI decodes them.

// Errors of the operator actions; callers branch with errors.Is.
var (
	// ErrNoMirror: no mirror of that name runs in this daemon.
	ErrNoMirror = control.ErrNoMirror
	// ErrInvalidRequest: the request itself is wrong (a bad regex, a
	// missing field).
	ErrInvalidRequest = control.ErrInvalidRequest
	// ErrConflict: the request conflicts with the mirror's state (for
	// example starting a topic that another stop pattern still stops).
	ErrConflict = control.ErrConflict
)

// Status is the engine's answer to `kmirror describe`: every mirror and every
// partition it runs. It holds no secret.
type Status struct {
	Mirrors []MirrorStatus `json:"mirrors"`
}

// MirrorStatus describes one mirror.
type MirrorStatus struct {
	Name string `json:"name"`
	// Error is why the mirror as a whole cannot run (for example an
	// unreachable source cluster), one short line per failing loop
	// ("topics: …; acls: …"); its partitions keep their states. Errors
	// has each loop's full cause.
	Error string `json:"error,omitempty"`
	// Errors are the failing sync loops and FAILED partitions, one short
	// line each with the full cause beside it.
	Errors []LoopError `json:"errors,omitempty"`
	// TopicConfigErrors are the topic configs the destination rejected in
	// the last config sync round, one per topic and key, and the
	// destination topics whose max.message.bytes is below the source's while
	// the key is in mirror.topic.properties.exclude.
	TopicConfigErrors []TopicConfigError `json:"topic_config_errors,omitempty"`
	// Groups is the last offset sync of each consumer and share group: when
	// it was synced, and whether it was skipped because it is active on the
	// destination.
	Groups []groupsync.GroupReport `json:"groups,omitempty"`
	// SyncLeaseHeld is true while this daemon holds the mirror's
	// metadata-sync lease and so runs its sync loops (topics, topic
	// configs, groups, ACLs, read-only ACLs). A daemon without it skips
	// sync rounds and starts no partitions.
	SyncLeaseHeld bool `json:"sync_lease_held"`
	// SyncLeaseHolder is the daemon that holds the lease, as
	// "<hostname>/<pid>/<random>"; empty while none is known (not yet
	// connected, or the state store unreachable).
	SyncLeaseHolder string `json:"sync_lease_holder,omitempty"`
	// Notes are facts about the mirror an operator should know (for
	// example that the destination has no authorizer).
	Notes []string `json:"notes,omitempty"`
	// Clusters are the mirror's source and the destination it writes,
	// and whether kmirror can talk to each now.
	Clusters   []ClusterStatus   `json:"clusters,omitempty"`
	Partitions []PartitionStatus `json:"partitions"`
}

// LoopError is one failing part of a mirror: a sync loop ("connect",
// "topics", "topic-configs", "groups", "acls", "read-only") or a
// partition ("partition orders/3").
type LoopError struct {
	Loop string `json:"loop"`
	// Message is one short line: what failed, without the mirror's name
	// (the status names it) and without the layers of wrapping.
	Message string `json:"message"`
	// Cause is the full error, as logged.
	Cause string `json:"cause"`
}

// ClusterStatus is whether kmirror can talk to one cluster of a mirror, as
// its client's connections tell (core/kclient's Health).
type ClusterStatus struct {
	// Cluster is "source" or "destination".
	Cluster string `json:"cluster"`
	// Reachable is false while kmirror cannot talk to any broker of the
	// cluster.
	Reachable bool `json:"reachable"`
	// Since is when Reachable took its value.
	Since time.Time `json:"since"`
	// LastError is the last connection or request failure (it names a
	// broker address, never a credential); empty before any.
	LastError string `json:"last_error,omitempty"`
}

// TopicConfigError is a source topic config the destination rejected, or a
// destination limit that cannot take the source's batches.
type TopicConfigError struct {
	Topic string `json:"topic"`
	Key   string `json:"key"`
	Error string `json:"error"`
}

// PartitionStatus describes one mirrored partition (core/runner's Status).
type PartitionStatus = runner.Status

// OpResult is the outcome of an operator action: what it did, and the
// affected partitions' status afterwards (core/control's Result).
type OpResult = control.Result

// FailoverOrder asks to fail a mirror's topics over to the destination.
type FailoverOrder struct {
	Mirror string `json:"mirror"`
	// Topics are regexes (anchored); empty means every topic of the mirror.
	Topics []string `json:"topics"`
	// WaitForCatchUp, when positive, first waits up to this long until
	// every affected partition has no lag (a planned failover); the
	// failover does not start if it passes.
	WaitForCatchUp time.Duration `json:"-"`
}

// FailoverResult says where each failed-over partition stopped and which
// groups had their offsets synced last (core/failover's Result).
type FailoverResult = failover.Result

// TopicFailover is one topic of a failover.
type TopicFailover = failover.Topic

// PartitionFailover is where one partition stopped.
type PartitionFailover = failover.Partition

// FailbackOrder asks to fail a failed-over mirror back.
type FailbackOrder struct {
	Mirror string `json:"mirror"`
	// AllowRecreate lets failback delete and recreate, on the old source,
	// a topic whose partitions cannot continue offset for offset.
	AllowRecreate bool `json:"allow_recreate"`
	// SideTopicSuffix names the side topics that keep records the old
	// source holds beyond the last mirrored offset; default
	// ".kmirror-diverged".
	SideTopicSuffix string `json:"side_topic_suffix,omitempty"`
}

// FailbackResult says what failback did per partition.
type FailbackResult struct {
	// Mirror is the reverse mirror's name.
	Mirror string `json:"mirror"`
	// Of is the mirror it reverses.
	Of     string          `json:"of"`
	Topics []TopicFailback `json:"topics"`
}

// TopicFailback is one topic of a failback (core/failback's Topic).
type TopicFailback = failback.Topic

// PartitionFailback is what failback did with one partition.
type PartitionFailback = failback.Partition

// Failback actions of a partition.
const (
	FailbackContinue  = failback.Continue
	FailbackRecreated = failback.Recreated
	FailbackFailed    = failback.Failed
)

// Errors of the operator actions, continued.
var (
	// ErrNoMatch: a topic pattern of the request matches no topic of the
	// mirror; nothing was recorded.
	ErrNoMatch = control.ErrNoMatch
	// ErrUnavailable: a cluster, the state store or the mirror itself
	// (still connecting) cannot serve the request now; nothing was
	// changed, and the request can be repeated.
	ErrUnavailable = control.ErrUnavailable
	// ErrNotCaughtUp: a planned failover's partitions did not catch up
	// within its wait; nothing was changed.
	ErrNotCaughtUp = failover.ErrNotCaughtUp
	// ErrLastSyncFailed: a planned failover's last group or ACL sync
	// failed; nothing was changed.
	ErrLastSyncFailed = failover.ErrLastSyncFailed
)

// Operations a Plan can be asked for (a dry run).
const (
	OpStop     = "stop"
	OpReset    = "reset"
	OpDelete   = "delete"
	OpFailover = "failover"
	OpFailback = "failback"
)

// PlanOrder asks what an operation would do (a dry run).
type PlanOrder struct {
	// Op is OpStop, OpReset, OpDelete, OpFailover or OpFailback.
	Op     string `json:"op"`
	Mirror string `json:"mirror"`
	// Topics: stop, reset and failover, as in their orders.
	Topics []string `json:"topics,omitempty"`
	// WaitForCatchUp: failover, as in FailoverOrder.
	WaitForCatchUp time.Duration `json:"-"`
	// AllowRecreate and SideTopicSuffix: failback, as in FailbackOrder.
	AllowRecreate   bool   `json:"allow_recreate,omitempty"`
	SideTopicSuffix string `json:"side_topic_suffix,omitempty"`
}

// Plan is the answer of a dry run: what the operation would do now, in
// order (Steps) and per topic and partition; nothing was changed. An
// operation the daemon would refuse gets the refusal instead, as the
// operation itself would.
type Plan struct {
	Mirror string `json:"mirror"`
	Op     string `json:"op"`
	// DryRun is always true: nothing was changed.
	DryRun bool `json:"dry_run"`
	// Steps are the operation's steps, in the order it would take them.
	Steps  []string    `json:"steps"`
	Topics []TopicPlan `json:"topics"`
	// CreateOnOldSource (failback) are the side topics that would be
	// created on the old source to keep its diverged records.
	CreateOnOldSource []string `json:"create_on_old_source,omitempty"`
	// DeleteOnOldSource (failback with allow_recreate) are the topics that
	// would be deleted on the old source and mirrored back from scratch.
	DeleteOnOldSource []string `json:"delete_on_old_source,omitempty"`
	// Warnings are what would likely go wrong now (for example an
	// unreachable source, which fails a planned failover's last sync).
	Warnings []string `json:"warnings,omitempty"`
}

// TopicPlan is one topic of a Plan.
type TopicPlan struct {
	Topic      string          `json:"topic"`
	Partitions []PartitionPlan `json:"partitions"`
}

// PartitionPlan is what an operation would do with one partition.
type PartitionPlan struct {
	Partition int32 `json:"partition"`
	// State is the partition's state now ("" for a failback partition the
	// reverse mirror does not have yet).
	State string `json:"state"`
	// Lag and LastMirroredOffset are as in the partition's status now.
	Lag                int64 `json:"lag"`
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	// Action is what would be done: PlanStop, PlanNone, PlanDelete,
	// PlanReset, or a
	// failback action (FailbackContinue, FailbackRecreated,
	// FailbackFailed).
	Action string `json:"action"`
	// Detail says why, and what the action involves.
	Detail string `json:"detail,omitempty"`
	// Failback is the failback decision (failback only).
	Failback *PartitionFailback `json:"failback,omitempty"`
}

// Actions of a PartitionPlan besides failback's.
const (
	PlanStop   = "stop"   // STOPPING → STOPPED, last mirrored offset recorded
	PlanNone   = "none"   // left as it is (Detail says why)
	PlanDelete = "delete" // its records in the state store are deleted
	PlanReset  = "reset"  // its record and offset map are deleted; it starts again from the source's log start
)
