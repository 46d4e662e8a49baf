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
	// unreachable source cluster); its partitions keep their states.
	Error string `json:"error,omitempty"`
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
