package topicsync

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/aclrule"
)

// Read-only mirror topics (docs/design/topicsync.md). Where the destination
// has an authorizer, every topic the mirror owns carries a DENY WRITE ACL
// for User:* (literal, any host) while any of its partitions is not
// STOPPED, so that nobody but kmirror writes to it; kmirror's own
// destination principal must be a super user (super users bypass ACLs). The
// ACL is removed once every partition of the topic is STOPPED (failover
// done, source topic deleted, or topic out of scope). This file is the one
// owner of the binding's shape: it builds it (ReadOnlyBinding, readOnlyACL)
// and recognises it (ReadOnlyManaged, which ACL sync is given so that it
// never creates or deletes it).
//
// Start-up write check: a DENY for User:* binds kmirror too unless its
// destination principal is a super user, and then every append would be
// refused. So the first time a Syncer makes a topic read-only, it asks the
// destination (Metadata with IncludeTopicAuthorizedOperations) which
// operations its own principal may perform on that topic. Without WRITE,
// Protect fails with ErrCannotWrite, the mirror starts no partition (nothing
// is appended, nothing spins) and its error says what to configure; every
// topics round checks again.

// ErrCannotWrite means kmirror's destination principal may not write to a
// read-only mirror topic: it is not a super user of the destination.
var ErrCannotWrite = errors.New("kmirror's destination principal cannot write to mirror topics")

// The read-only ACL's shape: resource TOPIC named after the mirror topic,
// pattern LITERAL, principal ReadOnlyPrincipal, host *, operation WRITE,
// permission DENY.
const (
	// ReadOnlyPrincipal is the principal of the read-only ACL: a DENY for
	// User:* binds every principal that is not a super user.
	ReadOnlyPrincipal = "User:*"
	readOnlyHost      = "*"
	readOnlyPattern   = kmsg.ACLResourcePatternTypeLiteral
	readOnlyOperation = kmsg.ACLOperationWrite
)

// ReadOnlyBinding returns the read-only ACL kmirror puts on mirror topic
// topic of the destination.
func ReadOnlyBinding(topic string) aclrule.Binding {
	return aclrule.Binding{
		ResourceType: kmsg.ACLResourceTypeTopic.String(),
		ResourceName: topic,
		PatternType:  readOnlyPattern.String(),
		Principal:    ReadOnlyPrincipal,
		Host:         readOnlyHost,
		Operation:    readOnlyOperation.String(),
		Permission:   kmsg.ACLPermissionTypeDeny.String(),
	}
}

// readOnlyACL builds the requests that create or delete ReadOnlyBinding of
// each topic.
func readOnlyACL(topics ...string) *kadm.ACLBuilder {
	return kadm.NewACLs().Topics(topics...).ResourcePatternType(readOnlyPattern).
		Deny(ReadOnlyPrincipal).DenyHosts(readOnlyHost).Operations(readOnlyOperation)
}

// ReadOnlyManaged returns a function, for aclsync.Options.Managed, that
// reports the read-only ACLs kmirror manages on mirror topics: exactly
// ReadOnlyBinding of a topic for which isMirrorTopic returns true (nil: any
// topic). Enum fields are compared ignoring case.
//
// isMirrorTopic is called during ACL sync; it must be safe for concurrent
// use and must not block. Passing the mirror's set of topics that are
// currently read-only (PREPARING through PAUSED) keeps a user's own DENY
// WRITE for User:* on another topic inside the ACL sync's scope.
func ReadOnlyManaged(isMirrorTopic func(topic string) bool) func(aclrule.Binding) bool {
	return func(b aclrule.Binding) bool {
		want := ReadOnlyBinding(b.ResourceName)
		return strings.EqualFold(b.ResourceType, want.ResourceType) &&
			strings.EqualFold(b.PatternType, want.PatternType) &&
			b.Principal == want.Principal &&
			b.Host == want.Host &&
			strings.EqualFold(b.Operation, want.Operation) &&
			strings.EqualFold(b.Permission, want.Permission) &&
			(isMirrorTopic == nil || isMirrorTopic(b.ResourceName))
	}
}

// Protect makes topic read-only once per Syncer, before its partitions
// start (SyncReadOnly keeps it so afterwards). The first time it does so on
// a destination with an authorizer, it checks that kmirror may still write
// the topic; the error wraps ErrCannotWrite if not.
func (s *Syncer) Protect(ctx context.Context, topic string) error {
	s.mu.Lock()
	done := s.protected[topic]
	s.mu.Unlock()
	if done {
		return nil
	}
	if err := s.createReadOnly(ctx, []string{topic}); err != nil {
		return err
	}
	s.mu.Lock()
	check := !s.writeChecked && !s.noAuthorizer
	s.mu.Unlock()
	if check {
		if err := s.checkWrite(ctx, topic); err != nil {
			return err
		}
		s.mu.Lock()
		s.writeChecked = true
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.protected[topic] = true
	s.mu.Unlock()
	return nil
}

// checkWrite asks the destination whether kmirror's own principal may write
// topic, which carries the DENY WRITE ACL for User:*. A broker that does not
// report authorized operations (before Kafka 2.3) is not checked: appends
// would then fail with a message saying the same.
func (s *Syncer) checkWrite(ctx context.Context, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, s.opts.Destination)
	if err != nil {
		return fmt.Errorf("mirror %s: checking that kmirror may write to mirror topic %s: %w", s.opts.Mirror, topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("mirror %s: checking that kmirror may write to mirror topic %s: %w", s.opts.Mirror, topic, err)
		}
		if t.AuthorizedOperations == math.MinInt32 {
			s.log.Debug("the destination does not report authorized operations; kmirror's write permission is not checked", "topic", topic)
			return nil
		}
		if slices.Contains(kadm.DecodeACLOperations(t.AuthorizedOperations), kadm.OpWrite) {
			return nil
		}
		name, superUsers := "the principal kmirror's destination credentials authenticate as", "that principal (User:<name>)"
		if u := s.opts.DestinationUser; u != "" {
			name, superUsers = "User:"+u, "User:"+u
		}
		return fmt.Errorf("mirror %s: %w: %s may not write to mirror topic %s, which carries kmirror's DENY WRITE ACL for %s (mirror topics are read-only while mirroring); "+
			"a DENY binds every principal that is not a super user, so make it one: add %s to super.users in the destination brokers' configuration and restart them. "+
			"No partition of this mirror starts until then",
			s.opts.Mirror, ErrCannotWrite, name, topic, ReadOnlyPrincipal, superUsers)
	}
	return fmt.Errorf("mirror %s: checking that kmirror may write to mirror topic %s: the destination did not describe the topic", s.opts.Mirror, topic)
}

// SyncReadOnly is the read-only loop's round: it creates the read-only ACL
// of every topic in protect and deletes it from every topic in release
// (topics whose partitions are all STOPPED, so that they are writable).
func (s *Syncer) SyncReadOnly(ctx context.Context, protect, release []string) error {
	if err := s.createReadOnly(ctx, protect); err != nil {
		return err
	}
	if len(release) == 0 {
		return nil
	}
	results, err := s.dst.DeleteACLs(ctx, readOnlyACL(release...))
	if err == nil {
		for _, r := range results {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err != nil && !errors.Is(err, kerr.SecurityDisabled) {
		return fmt.Errorf("mirror %s: making stopped topics writable again: %w", s.opts.Mirror, err)
	}
	s.mu.Lock()
	for _, t := range release {
		delete(s.protected, t)
	}
	s.mu.Unlock()
	return nil
}

// createReadOnly creates the read-only ACL of each topic (creating an ACL
// that exists is a no-op for Kafka).
func (s *Syncer) createReadOnly(ctx context.Context, protect []string) error {
	if len(protect) == 0 {
		return nil
	}
	results, err := s.dst.CreateACLs(ctx, readOnlyACL(protect...))
	if err == nil {
		for _, r := range results {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if errors.Is(err, kerr.SecurityDisabled) {
		s.mu.Lock()
		s.noAuthorizer = true
		s.mu.Unlock()
		s.warnOnce("read-only", "the destination has no authorizer: mirror topics are not protected against writes by others (configure an authorizer and make kmirror's destination principal a super user)")
		s.note("the destination has no authorizer: mirror topics are writable by anyone")
		return nil
	}
	if err != nil {
		hint := ""
		if errors.Is(err, kerr.ClusterAuthorizationFailed) {
			hint = "; kmirror's destination principal needs ALTER on the cluster"
		}
		return fmt.Errorf("mirror %s: making mirror topics read-only (DENY WRITE for %s): %w%s",
			s.opts.Mirror, ReadOnlyPrincipal, err, hint)
	}
	return nil
}
