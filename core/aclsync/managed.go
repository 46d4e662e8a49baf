package aclsync

import (
	"strings"

	"github.com/kmirror/kmirror/core/aclrule"
)

// ReadOnlyPrincipal is the principal of the read-only ACL kmirror puts on
// each mirror topic of the destination: a DENY for User:* binds every
// principal that is not a super user (docs/design/contract.md §1.7).
const ReadOnlyPrincipal = "User:*"

// ReadOnlyManaged returns an Options.Managed function that reports the
// read-only ACLs kmirror manages on mirror topics: resource type TOPIC,
// pattern type LITERAL, principal User:*, host *, operation WRITE, permission
// DENY, on a topic for which isMirrorTopic returns true (nil: any topic).
// Enum fields are compared ignoring case.
//
// isMirrorTopic is called during Sync; it must be safe for concurrent use
// and must not block. Passing the mirror's set of topics that are currently
// read-only (PREPARING through PAUSED) keeps a user's own DENY WRITE for
// User:* on another topic inside the sync's scope.
func ReadOnlyManaged(isMirrorTopic func(topic string) bool) func(aclrule.Binding) bool {
	return func(b aclrule.Binding) bool {
		return strings.EqualFold(b.ResourceType, "TOPIC") &&
			strings.EqualFold(b.PatternType, "LITERAL") &&
			b.Principal == ReadOnlyPrincipal &&
			b.Host == "*" &&
			strings.EqualFold(b.Operation, "WRITE") &&
			strings.EqualFold(b.Permission, "DENY") &&
			(isMirrorTopic == nil || isMirrorTopic(b.ResourceName))
	}
}
