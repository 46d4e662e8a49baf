package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/aclsync"
	"github.com/kmirror/kmirror/core/partition"
)

// Read-only mirror topics (DESIGN.md §1.6). Where the destination has an
// authorizer, every topic the mirror owns carries a DENY WRITE ACL for
// User:* (literal, any host) while any of its partitions is not STOPPED, so
// that nobody but kmirror writes to it; kmirror's own destination principal
// must be a super user (super users bypass ACLs). The ACL is removed once every
// partition of the topic is STOPPED (failover done, source topic deleted, or
// topic out of scope). The shape is exactly the one aclsync.ReadOnlyManaged
// recognises, so ACL sync never deletes it.

// readOnlyTopics returns the topics whose partitions the mirror runs, split
// into those that must be read-only (some partition not STOPPED) and those
// that must be writable (every partition STOPPED).
func (m *mirrorRun) readOnlyTopics() (protect, release []string) {
	m.mu.Lock()
	running := map[string]bool{}
	for tp, r := range m.runners {
		st := r.p.State()
		if _, seen := running[tp.topic]; !seen {
			running[tp.topic] = false
		}
		if st != partition.Stopped {
			running[tp.topic] = true
		}
	}
	m.mu.Unlock()
	for t, on := range running {
		if on {
			protect = append(protect, t)
		} else {
			release = append(release, t)
		}
	}
	sort.Strings(protect)
	sort.Strings(release)
	return protect, release
}

// isReadOnlyTopic reports whether topic is one the mirror keeps read-only
// (for ACL sync's Managed filter).
func (m *mirrorRun) isReadOnlyTopic(topic string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp := range m.runners {
		if tp.topic == topic {
			return true
		}
	}
	return false
}

func readOnlyACL(topics ...string) *kadm.ACLBuilder {
	return kadm.NewACLs().Topics(topics...).ResourcePatternType(kadm.ACLPatternLiteral).
		Deny(aclsync.ReadOnlyPrincipal).DenyHosts("*").Operations(kadm.OpWrite)
}

// protect makes topic read-only once per mirror run, before its partitions
// start (the read-only loop keeps it so afterwards).
func (m *mirrorRun) protect(ctx context.Context, topic string) error {
	m.mu.Lock()
	done := m.protected[topic]
	m.mu.Unlock()
	if done {
		return nil
	}
	if err := m.createReadOnly(ctx, []string{topic}); err != nil {
		return err
	}
	m.mu.Lock()
	m.protected[topic] = true
	m.mu.Unlock()
	return nil
}

// syncReadOnly is the read-only loop's round: create the DENY WRITE ACL of
// every protected topic, delete it from every released one.
func (m *mirrorRun) syncReadOnly(ctx context.Context) error {
	protect, release := m.readOnlyTopics()
	adm := m.e.dstAdm
	if err := m.createReadOnly(ctx, protect); err != nil {
		return err
	}
	if len(release) > 0 {
		results, err := adm.DeleteACLs(ctx, readOnlyACL(release...))
		if err == nil {
			for _, r := range results {
				if r.Err != nil {
					err = r.Err
					break
				}
			}
		}
		if err != nil && !errors.Is(err, kerr.SecurityDisabled) {
			return fmt.Errorf("mirror %s: making stopped topics writable again: %w", m.name, err)
		}
		m.mu.Lock()
		for _, t := range release {
			delete(m.protected, t)
		}
		m.mu.Unlock()
	}
	return nil
}

// createReadOnly creates the DENY WRITE ACL of each topic (creating an ACL
// that exists is a no-op for Kafka).
func (m *mirrorRun) createReadOnly(ctx context.Context, protect []string) error {
	adm := m.e.dstAdm
	if len(protect) > 0 {
		results, err := adm.CreateACLs(ctx, readOnlyACL(protect...))
		if err == nil {
			for _, r := range results {
				if r.Err != nil {
					err = r.Err
					break
				}
			}
		}
		if errors.Is(err, kerr.SecurityDisabled) {
			m.warnOnce("read-only", "the destination has no authorizer: mirror topics are not protected against writes by others (configure an authorizer and make kmirror's destination principal a super user)")
			m.setNote("the destination has no authorizer: mirror topics are writable by anyone")
			return nil
		}
		if err != nil {
			return fmt.Errorf("mirror %s: making mirror topics read-only (DENY WRITE for %s): %w; kmirror's destination principal needs ALTER on the cluster",
				m.name, aclsync.ReadOnlyPrincipal, err)
		}
	}
	return nil
}
