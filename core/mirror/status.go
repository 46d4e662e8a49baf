package mirror

import (
	"github.com/kmirror/kmirror/core/runner"

	"github.com/kmirror/kmirror/core/groupsync"
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
	Notes      []string          `json:"notes,omitempty"`
	Partitions []PartitionStatus `json:"partitions"`
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
