package aclsync

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/aclrule"
)

// acl is one ACL binding in the protocol's own types. Every field takes part
// in equality, so acl values compare (and key maps) exactly.
type acl struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Binding returns a in the string form the include rules and Options.Managed
// see: Kafka's upper-case enum names, for example ResourceType "TOPIC",
// PatternType "LITERAL" or "PREFIXED", Operation "WRITE", Permission "DENY".
func (a acl) Binding() aclrule.Binding {
	return aclrule.Binding{
		ResourceType: a.ResourceType.String(),
		ResourceName: a.ResourceName,
		PatternType:  a.PatternType.String(),
		Principal:    a.Principal,
		Host:         a.Host,
		Operation:    a.Operation.String(),
		Permission:   a.Permission.String(),
	}
}

// String renders a in the order of kafka-acls.sh output, for logs and errors.
func (a acl) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from host %s, %s %s)",
		a.ResourceType, a.PatternType, a.ResourceName, a.Principal, a.Host, a.Permission, a.Operation)
}

// sortACLs orders acls by every field, so that a cycle's requests and logs are
// deterministic.
func sortACLs(acls []acl) {
	sort.Slice(acls, func(i, j int) bool {
		x, y := acls[i], acls[j]
		switch {
		case x.ResourceType != y.ResourceType:
			return x.ResourceType < y.ResourceType
		case x.ResourceName != y.ResourceName:
			return x.ResourceName < y.ResourceName
		case x.PatternType != y.PatternType:
			return x.PatternType < y.PatternType
		case x.Principal != y.Principal:
			return x.Principal < y.Principal
		case x.Host != y.Host:
			return x.Host < y.Host
		case x.Operation != y.Operation:
			return x.Operation < y.Operation
		}
		return x.Permission < y.Permission
	})
}
