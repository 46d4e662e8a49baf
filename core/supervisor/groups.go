package supervisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/core/aclsync"
	"github.com/kmirror/kmirror/core/groupsync"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/sdk/filter"
)

// mirroredView answers groupsync's questions from the mirror's runners: which
// partitions are mirrored, up to where, and how a source offset translates.
type mirroredView struct{ m *Mirror }

func (v mirroredView) runner(topic string, p int32) *runner.Runner {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	return v.m.runners[topicPartition{topic, p}]
}

// End is the next source offset the partition mirrors: everything below it is
// on the destination. Only running partitions (MIRRORING, PAUSED) count.
func (v mirroredView) End(topic string, p int32) (int64, bool) {
	r := v.runner(topic, p)
	if r == nil {
		return 0, false
	}
	switch r.Record().State {
	case partition.Mirroring, partition.Paused:
	default:
		return 0, false
	}
	next := r.Next()
	return next, next >= 0
}

// Translate maps a committed source offset to the destination: identity in
// preserve mode; through the offset map in map mode, never beyond what the
// destination holds. The map is the runner's, in memory; only a runner that
// has not loaded it in this process (a partition PAUSED since the daemon
// started) has it read from the state store.
func (v mirroredView) Translate(topic string, p int32, offset int64) (int64, error) {
	r := v.runner(topic, p)
	if r == nil {
		return 0, fmt.Errorf("%s[%d] is not mirrored", topic, p)
	}
	if r.Record().Mode != partition.ModeMap {
		return offset, nil
	}
	om := r.OffsetMap()
	if om == nil {
		var err error
		if om, err = offsetmap.Load(context.Background(), v.m.d.Store, v.m.name, topic, p); err != nil {
			return 0, fmt.Errorf("%s[%d]: reading the offset map: %w", topic, p, err)
		}
	}
	dst, _ := om.Translate(offset)
	end := r.DestinationEnd()
	// The map is written ahead of the appends: never point past the data.
	return min(dst, end), nil
}

// newGroupSync builds the mirror's consumer/share group offset syncer.
func (m *Mirror) newGroupSync() (*groupsync.Syncer, error) {
	return groupsync.New(groupsync.Options{
		Mirror:      m.name,
		Source:      m.srcAdm,
		Destination: m.dstAdm,
		Filter:      m.scopeFilter(),
		Mirrored:    mirroredView{m},
		Logger:      m.log.Named("groups"),
		Meter:       m.d.Metrics.Meter("github.com/kmirror/kmirror/core/groupsync"),
		Store:       m.d.Store,
	})
}

// newACLSync builds the mirror's ACL syncer for mirror.acl.include. Without
// a rule there is no filter: the ACL sync then reads no cluster.
func (m *Mirror) newACLSync() (*aclsync.Syncer, error) {
	var f filter.Filter
	if len(m.cfg.ACLInclude) > 0 {
		f = m.scopeFilter()
	}
	return aclsync.New(aclsync.Options{
		Mirror:      m.name,
		Source:      m.src,
		Destination: m.dst,
		Filter:      f,
		Managed:     topicsync.ReadOnlyManaged(m.isReadOnlyTopic),
		Logger:      m.log.Named("acls"),
		Meter:       m.d.Metrics.Meter("github.com/kmirror/kmirror/core/aclsync"),
	})
}

// syncGroups is the groups loop's round.
func (m *Mirror) syncGroups(ctx context.Context) error {
	m.mu.Lock()
	gs := m.groups
	m.mu.Unlock()
	if gs == nil {
		return nil
	}
	rep, err := gs.Sync(ctx)
	if err != nil {
		return fmt.Errorf("mirror %s: group offset sync: %w", m.name, err)
	}
	if rep.Errors > 0 {
		return fmt.Errorf("mirror %s: group offset sync: %d groups failed (see describe)", m.name, rep.Errors)
	}
	return nil
}

// syncACLs is the ACLs loop's round. Clusters without an authorizer have no
// ACLs to mirror: that is said once, not reported every round.
func (m *Mirror) syncACLs(ctx context.Context) error {
	m.mu.Lock()
	as := m.acls
	m.mu.Unlock()
	if as == nil {
		return nil
	}
	_, err := as.Sync(ctx)
	if errors.Is(err, aclsync.ErrNoAuthorizer) {
		m.warnOnce("no-authorizer", "a cluster has no authorizer: ACLs are not mirrored", "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("mirror %s: ACL sync: %w", m.name, err)
	}
	return nil
}
