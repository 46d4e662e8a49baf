// Package aclsync owns the ACL sync loop of one mirror (KIP-1279
// mirror.acl.include): it describes the source cluster's ACL bindings, keeps
// those some include rule matches, creates the missing ones on the
// destination, and deletes the destination bindings inside the same scope that
// the source no longer has.
//
// Invariants, each enforced in this package:
//
//   - The scope of a cycle is the set of bindings that Options.Managed does
//     not report and Options.Filter keeps (the mirror.acl.include rules,
//     core/scope); the filter is called once for the source's bindings and
//     once for the destination's. Nothing outside the scope is ever
//     created or deleted on the destination; in particular the read-only
//     DENY WRITE ACLs kmirror itself puts on mirror topics
//     (topicsync.ReadOnlyManaged) are left alone.
//   - Bindings are compared exactly: resource type, resource name, pattern
//     type, principal, host, operation and permission. Pattern types
//     (LITERAL, PREFIXED) and hosts are copied as they are.
//   - A deletion names one binding with every field set to its value and the
//     pattern type exact; no ANY or MATCH filter is ever sent, so a deletion
//     cannot reach a binding the sync did not decide to remove.
//   - Nothing is deleted unless both clusters' complete ACL lists were read
//     and filtered in this cycle: a failed describe, or a filter that makes no
//     decision, aborts the cycle before any change.
//   - A failed creation or deletion does not stop the others; it is reported,
//     logged and counted, and retried at the next cycle (Sync is idempotent).
//
// The package is a library: the engine builds one Syncer per mirror and calls
// Sync from one of its sync loops (the one loop template, core/mirror), every
// mirror.metadata.refresh.interval.ms.
package aclsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/metric"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/sdk/filter"
)

// ErrInvalidOptions is returned by New when a required option is missing.
var ErrInvalidOptions = errors.New("aclsync: invalid options")

// ErrNoAuthorizer is wrapped by Sync's error when a cluster answers that it
// has no authorizer configured (SECURITY_DISABLED): there are no ACLs to read
// or write there. The kerr.SecurityDisabled error is wrapped too.
var ErrNoAuthorizer = errors.New("cluster has no authorizer")

// batchSize bounds the creations or deletions sent in one request.
const batchSize = 500

// Options configure a Syncer. Source and Destination are required.
//
// The clients are kgo clients rather than kadm clients on purpose: the sync
// sends one exact creation or deletion per binding, batched in one request,
// for every resource type. kadm's ACL builder expands cross products of
// resources, principals, hosts and operations and has no USER resource type,
// so it cannot express "exactly these bindings".
type Options struct {
	// Mirror names the mirror in logs, errors and metric attributes.
	Mirror string
	// Source is a client of the source cluster. Its principal needs DESCRIBE
	// on the CLUSTER resource.
	Source *kgo.Client
	// Destination is a client of the destination cluster. Its principal needs
	// DESCRIBE and ALTER on the CLUSTER resource.
	Destination *kgo.Client
	// Filter decides which bindings are in scope: the built-in
	// mirror.acl.include rules (core/scope), possibly chained with filter
	// plugins. Only its FilterACLs is called. Nil: no binding is in scope,
	// Sync does nothing and contacts no cluster (the engine passes nil when
	// mirror.acl.include is empty).
	Filter filter.Filter
	// Managed reports bindings kmirror itself manages on the destination
	// (the read-only DENY WRITE ACLs of mirror topics, whose shape
	// core/topicsync owns: topicsync.ReadOnlyManaged); they are never
	// created or deleted by the sync, even when a rule matches them. Nil:
	// none.
	Managed func(aclrule.Binding) bool
	// Logger receives one line per change and per error. Nil discards.
	Logger hclog.Logger
	// Meter creates the sync's instruments (acl.sync.error, acls.synced,
	// acl.sync.created, acl.sync.deleted). Nil records nothing.
	Meter metric.Meter
}

// Report is the result of one Sync cycle.
type Report struct {
	// InScope counts the source bindings inside the scope (matched by a rule,
	// not managed): the bindings the destination should hold.
	InScope int `json:"in_scope"`
	// Created counts the bindings created on the destination this cycle.
	Created int `json:"created"`
	// Deleted counts the destination bindings deleted this cycle.
	Deleted int `json:"deleted"`
	// Errors describes each creation or deletion that failed this cycle (a
	// failed request counts once). They are retried at the next cycle.
	Errors []string `json:"errors,omitempty"`
}

// Syncer syncs the ACLs of one mirror. Its methods are safe for concurrent
// use; Sync calls are serialized.
type Syncer struct {
	opts Options
	log  hclog.Logger
	inst instruments

	cycle sync.Mutex // serializes Sync
}

// New validates opts and builds a Syncer.
func New(opts Options) (*Syncer, error) {
	var missing []string
	if opts.Source == nil {
		missing = append(missing, "Source")
	}
	if opts.Destination == nil {
		missing = append(missing, "Destination")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: mirror %q: %s must be set", ErrInvalidOptions, opts.Mirror, strings.Join(missing, ", "))
	}
	if opts.Managed == nil {
		opts.Managed = func(aclrule.Binding) bool { return false }
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	inst, err := newInstruments(opts.Meter, opts.Mirror)
	if err != nil {
		return nil, fmt.Errorf("aclsync: mirror %q: creating metrics: %w", opts.Mirror, err)
	}
	return &Syncer{opts: opts, log: log.With("mirror", opts.Mirror), inst: inst}, nil
}

// Sync runs one cycle: it reads the ACLs of both clusters, creates the
// in-scope source bindings the destination lacks and deletes the in-scope
// destination bindings the source lacks. It is idempotent. The error is
// non-nil only when the cycle could not run at all (the ACLs of either
// cluster could not be read); nothing was changed then. Failures of single
// bindings are in Report.Errors.
func (s *Syncer) Sync(ctx context.Context) (Report, error) {
	s.cycle.Lock()
	defer s.cycle.Unlock()

	if s.opts.Filter == nil {
		return Report{}, nil
	}
	src, err := describeAll(ctx, s.opts.Source)
	if err != nil {
		s.inst.errors(ctx, 1)
		return Report{}, fmt.Errorf("aclsync: mirror %q: describing the source ACLs failed%s; nothing was changed: %w", s.opts.Mirror, describeHint("source", err), err)
	}
	dst, err := describeAll(ctx, s.opts.Destination)
	if err != nil {
		s.inst.errors(ctx, 1)
		return Report{}, fmt.Errorf("aclsync: mirror %q: describing the destination ACLs failed%s; nothing was changed: %w", s.opts.Mirror, describeHint("destination", err), err)
	}

	want, err := s.scope(ctx, "source", src)
	if err != nil {
		s.inst.errors(ctx, 1)
		return Report{}, err
	}
	have, err := s.scope(ctx, "destination", dst)
	if err != nil {
		s.inst.errors(ctx, 1)
		return Report{}, err
	}
	var create, remove []acl
	for a := range want {
		if _, ok := have[a]; !ok {
			create = append(create, a)
		}
	}
	for a := range have {
		if _, ok := want[a]; !ok {
			remove = append(remove, a)
		}
	}
	sortACLs(create)
	sortACLs(remove)

	rep := Report{InScope: len(want)}
	failedCreates := 0
	for chunk := range chunks(create) {
		n, failed, errs := s.create(ctx, chunk)
		rep.Created += n
		failedCreates += failed
		rep.Errors = append(rep.Errors, errs...)
	}
	for chunk := range chunks(remove) {
		n, errs := s.delete(ctx, chunk)
		rep.Deleted += n
		rep.Errors = append(rep.Errors, errs...)
	}
	s.inst.cycle(ctx, rep, int64(rep.InScope-failedCreates))
	if rep.Created > 0 || rep.Deleted > 0 || len(rep.Errors) > 0 {
		s.log.Info("ACL sync cycle", "in_scope", rep.InScope, "created", rep.Created, "deleted", rep.Deleted, "errors", len(rep.Errors))
	}
	return rep, nil
}

// scope returns the bindings of acls (read from side) inside the sync's
// scope: not managed by kmirror, and kept by the filter in one call.
func (s *Syncer) scope(ctx context.Context, side string, acls []acl) (map[acl]struct{}, error) {
	cands := make([]filter.ACLBinding, 0, len(acls))
	byBinding := make(map[filter.ACLBinding]acl, len(acls))
	for _, a := range acls {
		b := a.Binding()
		if s.opts.Managed(b) {
			continue
		}
		fb := filter.ACLBinding(b)
		if _, dup := byBinding[fb]; dup {
			continue // a cluster lists each binding once; never ask twice
		}
		byBinding[fb] = a
		cands = append(cands, fb)
	}
	kept, err := s.opts.Filter.FilterACLs(ctx, s.opts.Mirror, cands)
	if err == nil {
		err = filter.VerifyOutput(cands, kept)
	}
	if err != nil {
		return nil, fmt.Errorf("aclsync: mirror %q: filtering the %d %s ACLs made no decision; nothing was changed (retried next cycle): %w", s.opts.Mirror, len(cands), side, err)
	}
	in := make(map[acl]struct{}, len(kept))
	for _, b := range kept {
		in[byBinding[b]] = struct{}{}
	}
	return in, nil
}

// create creates the bindings of chunk on the destination in one request. It
// returns how many were created, how many failed, and the errors.
func (s *Syncer) create(ctx context.Context, chunk []acl) (created, failed int, errs []string) {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range chunk {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
		c.Principal, c.Host = a.Principal, a.Host
		c.Operation, c.PermissionType = a.Operation, a.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, s.opts.Destination)
	if err == nil && len(resp.Results) != len(chunk) {
		err = fmt.Errorf("the broker answered %d results for %d creations", len(resp.Results), len(chunk))
	}
	if err != nil {
		msg := fmt.Sprintf("creating %d ACLs on the destination failed (retried next cycle): %v", len(chunk), err)
		s.log.Warn("ACL creation request failed; retrying next cycle", "acls", len(chunk), "error", err)
		s.inst.errors(ctx, 1)
		return 0, len(chunk), []string{msg}
	}
	for i, r := range resp.Results {
		a := chunk[i]
		if err := codeErr(r.ErrorCode, r.ErrorMessage); err != nil {
			failed++
			errs = append(errs, fmt.Sprintf("creating ACL %s on the destination failed (check the mirror's destination principal has ALTER on the cluster resource; retried next cycle): %v", a, err))
			s.log.Warn("ACL creation failed; retrying next cycle", "acl", a.String(), "error", err)
			s.inst.errors(ctx, 1)
			continue
		}
		created++
		s.log.Info("ACL created on the destination", "acl", a.String())
	}
	return created, failed, errs
}

// delete deletes the bindings of chunk from the destination in one request,
// one exact filter per binding. It returns how many were deleted and the
// errors.
func (s *Syncer) delete(ctx context.Context, chunk []acl) (deleted int, errs []string) {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, a := range chunk {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = a.ResourceType, kmsg.StringPtr(a.ResourceName), a.PatternType
		f.Principal, f.Host = kmsg.StringPtr(a.Principal), kmsg.StringPtr(a.Host)
		f.Operation, f.PermissionType = a.Operation, a.Permission
		req.Filters = append(req.Filters, f)
	}
	resp, err := req.RequestWith(ctx, s.opts.Destination)
	if err == nil && len(resp.Results) != len(chunk) {
		err = fmt.Errorf("the broker answered %d results for %d deletions", len(resp.Results), len(chunk))
	}
	if err != nil {
		s.log.Warn("ACL deletion request failed; retrying next cycle", "acls", len(chunk), "error", err)
		s.inst.errors(ctx, 1)
		return 0, []string{fmt.Sprintf("deleting %d ACLs from the destination failed (retried next cycle): %v", len(chunk), err)}
	}
	fail := func(a acl, err error) {
		errs = append(errs, fmt.Sprintf("deleting ACL %s from the destination failed (check the mirror's destination principal has ALTER on the cluster resource; retried next cycle): %v", a, err))
		s.log.Warn("ACL deletion failed; retrying next cycle", "acl", a.String(), "error", err)
		s.inst.errors(ctx, 1)
	}
	for i, r := range resp.Results {
		a := chunk[i]
		if err := codeErr(r.ErrorCode, r.ErrorMessage); err != nil {
			fail(a, err)
			continue
		}
		for _, m := range r.MatchingACLs {
			got := acl{
				ResourceType: m.ResourceType, ResourceName: m.ResourceName, PatternType: m.ResourcePatternType,
				Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType,
			}
			if err := codeErr(m.ErrorCode, m.ErrorMessage); err != nil {
				fail(got, err)
				continue
			}
			if got != a {
				// An exact filter cannot match another binding on a
				// conformant broker; say so loudly if one ever did.
				fail(got, fmt.Errorf("the broker deleted it for the exact filter of %s", a))
				continue
			}
			deleted++
			s.log.Info("ACL deleted from the destination (no longer on the source)", "acl", a.String())
		}
	}
	return deleted, errs
}

// describeAll reads every ACL binding of a cluster.
func describeAll(ctx context.Context, cl *kgo.Client) ([]acl, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := codeErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		if errors.Is(err, kerr.SecurityDisabled) {
			return nil, fmt.Errorf("%w (set authorizer.class.name on its brokers, or remove mirror.acl.include): %w", ErrNoAuthorizer, err)
		}
		return nil, err
	}
	var out []acl
	for _, r := range resp.Resources {
		for _, b := range r.ACLs {
			out = append(out, acl{
				ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
				Principal: b.Principal, Host: b.Host, Operation: b.Operation, Permission: b.PermissionType,
			})
		}
	}
	return out, nil
}

// describeHint is the hint for a failed DescribeAcls on the cluster of
// side: the missing permission only when the cluster said so; a
// connection refused or a timeout is no matter of ACLs.
func describeHint(side string, err error) string {
	if errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return " (the mirror's " + side + " principal needs DESCRIBE on the cluster resource)"
	}
	return ""
}

// codeErr turns a Kafka error code and message into an error, nil for 0.
func codeErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// chunks yields acls in slices of at most batchSize.
func chunks(acls []acl) func(func([]acl) bool) {
	return func(yield func([]acl) bool) {
		for len(acls) > 0 {
			n := min(len(acls), batchSize)
			if !yield(acls[:n]) {
				return
			}
			acls = acls[n:]
		}
	}
}
