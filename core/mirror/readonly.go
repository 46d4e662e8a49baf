package mirror

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/aclsync"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/partition"
)

// Read-only mirror topics (docs/design/contract.md §1.7). Where the destination has an
// authorizer, every topic the mirror owns carries a DENY WRITE ACL for
// User:* (literal, any host) while any of its partitions is not STOPPED, so
// that nobody but kmirror writes to it; kmirror's own destination principal
// must be a super user (super users bypass ACLs). The ACL is removed once every
// partition of the topic is STOPPED (failover done, source topic deleted, or
// topic out of scope). The shape is exactly the one aclsync.ReadOnlyManaged
// recognises, so ACL sync never deletes it.
//
// Start-up write check: a DENY for User:* binds kmirror too unless its
// destination principal is a super user, and then every append would be
// refused. So the first time a mirror run makes a topic read-only, it asks
// the destination (Metadata with IncludeTopicAuthorizedOperations) which
// operations its own principal may perform on that topic. Without WRITE,
// the mirror starts no partition (nothing is appended, nothing spins) and
// its error says what to configure; every topics round checks again.

// ErrCannotWrite means kmirror's destination principal may not write to a
// read-only mirror topic: it is not a super user of the destination.
var ErrCannotWrite = errors.New("kmirror's destination principal cannot write to mirror topics")

// readOnlyTopics returns the topics whose partitions the mirror runs, split
// into those that must be read-only (some partition not STOPPED) and those
// that must be writable (every partition STOPPED).
func (m *mirrorRun) readOnlyTopics() (protect, release []string) {
	m.mu.Lock()
	running := map[string]bool{}
	for tp, r := range m.runners {
		st := r.Record().State
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
// start (the read-only loop keeps it so afterwards). The first time in a run
// that it does so on a destination with an authorizer, it checks that
// kmirror may still write the topic; the error wraps ErrCannotWrite if not.
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
	check := !m.writeChecked && !m.noAuthorizer
	m.mu.Unlock()
	if check {
		if err := m.checkWrite(ctx, topic); err != nil {
			return err
		}
		m.mu.Lock()
		m.writeChecked = true
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.protected[topic] = true
	m.mu.Unlock()
	return nil
}

// checkWrite asks the destination whether kmirror's own principal may write
// topic, which carries the DENY WRITE ACL for User:*. A broker that does not
// report authorized operations (before Kafka 2.3) is not checked: appends
// would then fail with a message saying the same.
func (m *mirrorRun) checkWrite(ctx context.Context, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, m.dst)
	if err != nil {
		return fmt.Errorf("mirror %s: checking that kmirror may write to mirror topic %s: %w", m.name, topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("mirror %s: checking that kmirror may write to mirror topic %s: %w", m.name, topic, err)
		}
		if t.AuthorizedOperations == math.MinInt32 {
			m.log.Debug("the destination does not report authorized operations; kmirror's write permission is not checked", "topic", topic)
			return nil
		}
		if slices.Contains(kadm.DecodeACLOperations(t.AuthorizedOperations), kadm.OpWrite) {
			return nil
		}
		dc := &m.dcfg.Destination
		if m.dstCfg != nil {
			dc = m.dstCfg
		}
		p := destinationPrincipal(dc)
		return fmt.Errorf("mirror %s: %w: %s may not write to mirror topic %s, which carries kmirror's DENY WRITE ACL for %s (mirror topics are read-only while mirroring); "+
			"a DENY binds every principal that is not a super user, so make it one: add %s to super.users in the destination brokers' configuration and restart them. "+
			"No partition of this mirror starts until then",
			m.name, ErrCannotWrite, p.name, topic, aclsync.ReadOnlyPrincipal, p.superUsers)
	}
	return fmt.Errorf("mirror %s: checking that kmirror may write to mirror topic %s: the destination did not describe the topic", m.name, topic)
}

// principalHint names kmirror's destination principal for the write check's
// error: name for the sentence, superUsers for the super.users entry.
type principalHint struct{ name, superUsers string }

// destinationPrincipal names kmirror's destination principal as far as the
// configuration tells (a SASL PLAIN or SCRAM user name); for other
// mechanisms (OAUTHBEARER, TLS client certificates) the broker derives it.
func destinationPrincipal(c *config.Cluster) principalHint {
	if s, err := c.SASL(); err == nil && s.Username != "" {
		return principalHint{name: "User:" + s.Username, superUsers: "User:" + s.Username}
	}
	return principalHint{name: "the principal kmirror's destination credentials authenticate as", superUsers: "that principal (User:<name>)"}
}

// syncReadOnly is the read-only loop's round: create the DENY WRITE ACL of
// every protected topic, delete it from every released one.
func (m *mirrorRun) syncReadOnly(ctx context.Context) error {
	protect, release := m.readOnlyTopics()
	adm := m.dstAdm
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
	adm := m.dstAdm
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
			m.mu.Lock()
			m.noAuthorizer = true
			m.mu.Unlock()
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
