// Package topicsync owns the topic sync of one mirror: which source topics
// it mirrors, the destination topics that hold them (created with the
// source's partition count and configs minus mirror.topic.properties.exclude,
// expanded when the source grows), their configs kept in line with the
// source's, source topics deleted or recreated (a new topic id), the
// destination's max.message.bytes kept at least the source's, and the
// read-only ACL of mirror topics. docs/design/topicsync.md is the design.
//
// Invariants, each enforced in this package:
//
//   - The source's topics are listed with a Metadata request sent to a
//     broker every round, never from the client's metadata cache, which can
//     keep a deleted topic or miss a new one. Options.Filter decides the
//     scope, once per round with every usable source topic; a filter error
//     means no decision, and the round changes nothing.
//   - A topic is created, expanded or has its partitions started only when
//     this mirror owns it (Engine.Claim), an operator has not stopped it
//     (Engine.WithoutStopped), and its source topic was not recreated.
//   - A topic is taken as deleted only when the source answers
//     UNKNOWN_TOPIC_OR_PARTITION when asked for it by name: an authorizer
//     hides topics from the all-topics listing. The destination topic is
//     never deleted.
//   - A destination topic is created only when the mirror has copied
//     nothing into it: one missing while its partitions have copied records
//     was deleted under the mirror (confirmed by asking a broker by name)
//     and is not created again; its partitions fail, waiting for an
//     operator's reset.
//   - Excluded config keys are never set, changed or deleted on the
//     destination, on creation or in the config rounds.
//   - The read-only ACL has exactly one shape (ReadOnlyBinding), built and
//     recognised here only: ACL sync leaves it alone through
//     ReadOnlyManaged.
//
// The package is a library: the engine (core/mirror) builds one Syncer per
// mirror, implements Engine with its runners, partition records, topic
// claims and operator rules, and calls Sync, SyncConfigs and SyncReadOnly
// from its sync loops every mirror.metadata.refresh.interval.ms. The data
// path asks it about the destination's max.message.bytes (DestLimit,
// Refused). The counters of failed rounds and rejected configs are the
// engine's (KIP-1279 MetadataRefreshError, TopicConfigMetadataSyncError):
// it counts them from Sync's error and ConfigReport.Rejected.
package topicsync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/filter"
)

// ErrInvalidOptions is returned by New when a required option is missing.
var ErrInvalidOptions = errors.New("topicsync: invalid options")

// Reasons given to Engine.Stop for the partitions of a topic.
const (
	// ReasonOutOfScope: the topic left the mirror's scope.
	ReasonOutOfScope = "the topic no longer matches mirror.topics.include, or matches mirror.topics.exclude"
	// ReasonDeleted: the source topic was deleted.
	ReasonDeleted = "the source topic was deleted; the destination topic is kept and is writable"
)

// Topic is a source topic as a topics round sees it.
type Topic struct {
	Name string
	// ID is the source topic id (zero when the source does not report one).
	ID [16]byte
	// Partitions is the source's partition count.
	Partitions int32
}

// Running is a partition the mirror runs, with the source topic id it
// mirrors (zero: not known).
type Running struct {
	Topic     string
	Partition int32
	TopicID   [16]byte
}

// Engine is the mirror a Syncer serves, as its rounds see it: its runners,
// its partition records, the daemon's topic claims and its operators' rules.
// core/mirror implements it. Sync calls it from the goroutine that called
// Sync; SyncConfigs calls only Owns.
type Engine interface {
	// Running returns the partitions that have a runner.
	Running() []Running
	// Known returns the topics of every partition the mirror runs or has
	// recorded in its state store, in any state. An error with no topic
	// means none could be read.
	Known(ctx context.Context) ([]string, error)
	// WithoutStopped returns topics without those an operator stopped
	// (stop, failover), which are neither created nor expanded and whose
	// new partitions do not start; it sees to it that their recorded
	// partitions keep their state.
	WithoutStopped(ctx context.Context, topics []Topic) ([]Topic, error)
	// Claim makes the mirror the owner of each of topics on the
	// destination that no other mirror owns, releases its claim on every
	// topic not listed, and returns, for each listed topic another mirror
	// owns, that mirror's name.
	Claim(topics []string) map[string]string
	// Owns reports whether the mirror owns destination topic.
	Owns(topic string) bool
	// Start starts partitions 0 to partitions-1 of t that have no runner,
	// making t read-only (Syncer.Protect) before any of them mirrors. An
	// error wrapping ErrCannotWrite ends the round: no further topic is
	// created or started.
	Start(ctx context.Context, t Topic, partitions int32) error
	// Recreated tells a running partition that its source topic was
	// recreated: the source now has topic id id.
	Recreated(topic string, partition int32, id [16]byte)
	// Written reports whether a partition of topic, running or recorded,
	// has copied records to the destination. A destination topic missing
	// while this holds was deleted under the mirror: it is not created
	// again (see DestinationDeleted).
	Written(ctx context.Context, topic string) (bool, error)
	// DestinationDeleted fails every partition of topic, running or
	// recorded, for good (non-retryable, waiting for an operator's reset):
	// its destination topic was deleted while it held the mirror's copies.
	DestinationDeleted(ctx context.Context, topic string) error
	// Stop takes every partition of each topic in reasons, running or
	// recorded in the state store (MIRRORING, PAUSED, FAILED, STOPPING),
	// through STOPPING to STOPPED, with the topic's reason.
	Stop(ctx context.Context, reasons map[string]string) error
}

// Options configure a Syncer. Source, Destination, Filter, InScope and
// Engine are required.
type Options struct {
	// Mirror names the mirror in logs and errors.
	Mirror string
	// Source is a client of the source cluster.
	Source *kgo.Client
	// Destination is a client of the destination cluster; its principal
	// must be a super user there (mirror topics carry a DENY WRITE ACL).
	Destination *kgo.Client
	// Filter decides which source topics are mirrored: the built-in
	// mirror.topics.include/exclude rules (core/scope), possibly chained
	// with filter plugins. Only its FilterTopics is called, once per round
	// with every source topic that can be mirrored now.
	Filter filter.Filter
	// InScope reports whether one topic is in the mirror's scope by name
	// (the built-in rules): a topic the mirror knows that is not stops.
	InScope func(topic string) bool
	// PropertiesExclude is mirror.topic.properties.exclude: config keys
	// never copied to, changed or deleted on the destination.
	PropertiesExclude config.RegexList
	// Engine is the mirror's side of the topics round.
	Engine Engine
	// DestinationUser is the SASL user (PLAIN, SCRAM) kmirror authenticates
	// as on the destination, named in the write check's error; "" when the
	// broker derives the principal (OAUTHBEARER, TLS certificates).
	DestinationUser string
	// LimitTTL is how long DestLimit trusts a destination limit it read.
	// Zero: one minute.
	LimitTTL time.Duration
	// Logger receives one line per change and per new problem. Nil discards.
	Logger hclog.Logger
}

// Report is the result of one topics round.
type Report struct {
	// Ready are the topics whose partitions were handed to Engine.Start,
	// sorted by name.
	Ready []string
	// Created are the destination topics created this round.
	Created []string
	// Expanded are the destination topics given more partitions this round.
	Expanded []string
	// Recreated are the source topics found recreated (a new topic id)
	// this round: their running partitions were told, and their new
	// partitions and configs are not synced.
	Recreated []string
	// DestinationDeleted are the topics whose destination topic was found
	// deleted while it held the mirror's copies: not created again, their
	// partitions failed (Engine.DestinationDeleted).
	DestinationDeleted []string
	// Stopped are the topics whose partitions were asked to stop, with
	// the reason (ReasonOutOfScope, ReasonDeleted).
	Stopped map[string]string
}

// Syncer syncs the topics of one mirror. Its methods are safe for
// concurrent use; Sync calls are serialized, and so are SyncConfigs calls.
type Syncer struct {
	opts Options
	log  hclog.Logger
	src  *kadm.Client
	dst  *kadm.Client

	topicsRound  sync.Mutex // serializes Sync
	configsRound sync.Mutex // serializes SyncConfigs

	limits limitCache

	mu        sync.Mutex
	recreated map[string]bool // source topics the last round found recreated
	cfgErrs   []ConfigError   // the last config round's problems
	warned    map[string]bool
	notes     []string
	// protected: topics whose read-only ACL this Syncer created;
	// writeChecked: kmirror was seen allowed to write a read-only topic;
	// noAuthorizer: the destination has no authorizer.
	protected                  map[string]bool
	writeChecked, noAuthorizer bool
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
	if opts.Filter == nil {
		missing = append(missing, "Filter")
	}
	if opts.InScope == nil {
		missing = append(missing, "InScope")
	}
	if opts.Engine == nil {
		missing = append(missing, "Engine")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: mirror %q: %s must be set", ErrInvalidOptions, opts.Mirror, strings.Join(missing, ", "))
	}
	if opts.LimitTTL <= 0 {
		opts.LimitTTL = time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Syncer{
		opts: opts, log: log.With("mirror", opts.Mirror),
		src: kadm.NewClient(opts.Source), dst: kadm.NewClient(opts.Destination),
		warned: map[string]bool{}, protected: map[string]bool{},
	}, nil
}

// Sync runs one topics round. For every in-scope source topic this mirror
// may own, it creates the destination topic with the source's partition
// count and configs, expands its partitions to the source's count, and
// hands it to Engine.Start. Partitions whose source topic was deleted, or
// left the mirror's scope, are handed to Engine.Stop; running partitions
// whose source topic was recreated to Engine.Recreated. It is idempotent: a
// round changes only what differs. The error joins what failed, each naming
// the mirror and the topic; the other topics went on.
func (s *Syncer) Sync(ctx context.Context) (Report, error) {
	s.topicsRound.Lock()
	defer s.topicsRound.Unlock()
	var rep Report
	topics, present, err := s.listSource(ctx)
	if err != nil {
		return rep, fmt.Errorf("mirror %s: %w", s.opts.Mirror, err)
	}
	recreated := s.checkTopicIDs(present)
	for t := range recreated {
		rep.Recreated = append(rep.Recreated, t)
	}
	sort.Strings(rep.Recreated)
	s.mu.Lock()
	s.recreated = recreated
	s.mu.Unlock()
	if topics, err = s.opts.Engine.WithoutStopped(ctx, topics); err != nil {
		return rep, err
	}
	// Claim every in-scope topic the source has, including one without a
	// leader this round, so that another mirror cannot take it meanwhile.
	var claim []string
	for name := range present {
		if s.opts.InScope(name) {
			claim = append(claim, name)
		}
	}
	sort.Strings(claim)
	conflicts := s.opts.Engine.Claim(claim)
	var errs []error
	dstParts := map[string]int32{}
	if len(topics) > 0 {
		names := make([]string, len(topics))
		for i, t := range topics {
			names[i] = t.Name
		}
		details, err := s.dst.ListTopics(ctx, names...)
		if err != nil {
			return rep, fmt.Errorf("mirror %s: describing destination topics: %w", s.opts.Mirror, err)
		}
		for _, d := range details {
			if d.Err == nil {
				dstParts[d.Topic] = int32(len(d.Partitions))
			}
		}
	}
	var missing []string
	for _, t := range topics {
		if _, ok := dstParts[t.Name]; !ok && conflicts[t.Name] == "" {
			missing = append(missing, t.Name)
		}
	}
	srcConfigs, err := topicConfigs(ctx, s.src, missing...)
	if err != nil {
		return rep, fmt.Errorf("mirror %s: describing source topic configs: %w", s.opts.Mirror, err)
	}
	for _, t := range topics {
		if other := conflicts[t.Name]; other != "" {
			errs = append(errs, fmt.Errorf("mirror %s: topic %s is claimed by mirror %s and mirror %s; two mirrors cannot write one destination topic, "+
				"so mirror %s does not start its partitions: narrow mirror.topics.include or mirror.topics.exclude of one of them", s.opts.Mirror, t.Name, other, s.opts.Mirror, s.opts.Mirror))
			continue
		}
		if recreated[t.Name] {
			continue // its partitions fail; a new partition of the new topic must not start mirroring into the old one
		}
		have := dstParts[t.Name]
		if have == 0 {
			deleted, err := s.destinationDeleted(ctx, t.Name)
			if err != nil {
				errs = append(errs, fmt.Errorf("mirror %s: %w", s.opts.Mirror, err))
				continue
			}
			if deleted {
				rep.DestinationDeleted = append(rep.DestinationDeleted, t.Name)
				continue
			}
		}
		n, err := s.ensureDestinationTopic(ctx, t, have, srcConfigs[t.Name])
		switch {
		case have == 0 && n > 0:
			rep.Created = append(rep.Created, t.Name)
		case have > 0 && n > have:
			rep.Expanded = append(rep.Expanded, t.Name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("mirror %s: %w", s.opts.Mirror, err))
			if n == 0 {
				continue
			}
		}
		if n > t.Partitions {
			s.warnOnce("topic "+t.Name+" has more partitions on the destination", "the destination topic has more partitions than the source; the extra ones are not mirrored", "topic", t.Name, "source", t.Partitions, "destination", n)
		}
		rep.Ready = append(rep.Ready, t.Name)
		if err := s.opts.Engine.Start(ctx, t, min(n, t.Partitions)); err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrCannotWrite) {
				break // kmirror may not write mirror topics: start nothing
			}
		}
	}
	stopped, err := s.stopGone(ctx, present)
	rep.Stopped = stopped
	if err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// listSource returns the in-scope topics of the source that can be mirrored
// now, sorted by name, and the id of every topic the source has (in scope or
// not, usable or not): a topic missing from present was deleted, whereas one
// with a metadata error (no leader yet) merely waits.
//
// It asks a broker every time: kadm's Metadata answers from the client's
// metadata cache, which can keep a deleted topic or miss a new one.
func (s *Syncer) listSource(ctx context.Context) (topics []Topic, present map[string][16]byte, err error) {
	req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
	resp, err := req.RequestWith(ctx, s.opts.Source)
	if err != nil {
		return nil, nil, fmt.Errorf("listing source topics: %w", err)
	}
	present = make(map[string][16]byte, len(resp.Topics))
	usable := map[string]Topic{}
	var cands []filter.Topic
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			continue
		}
		present[name] = t.TopicID
		if err != nil {
			continue
		}
		if _, dup := usable[name]; dup {
			continue
		}
		st := Topic{Name: name, ID: t.TopicID, Partitions: int32(len(t.Partitions))}
		usable[name] = st
		cands = append(cands, filter.Topic{Name: name, Partitions: st.Partitions, Internal: t.IsInternal})
	}
	// One call with every usable source topic. Configs are not read here:
	// the built-in rules decide on names and the internal flag alone.
	kept, err := s.opts.Filter.FilterTopics(ctx, s.opts.Mirror, cands)
	if err == nil {
		err = filter.VerifyOutput(cands, kept)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("filtering %d source topics made no decision; topics are not synced this round: %w", len(cands), err)
	}
	for _, t := range kept {
		topics = append(topics, usable[t.Name])
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	return topics, present, nil
}

// checkTopicIDs compares the topic id each running partition mirrors
// against the source's current one, tells the partitions of a recreated
// topic (same name, new id), and returns the names of recreated topics.
func (s *Syncer) checkTopicIDs(present map[string][16]byte) map[string]bool {
	out := map[string]bool{}
	for _, r := range s.opts.Engine.Running() {
		id, ok := present[r.Topic]
		if !ok || r.TopicID == ([16]byte{}) || id == ([16]byte{}) || id == r.TopicID {
			continue
		}
		out[r.Topic] = true
		s.opts.Engine.Recreated(r.Topic, r.Partition, id)
	}
	return out
}

// isRecreated reports whether the last topics round found topic recreated.
func (s *Syncer) isRecreated(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recreated[topic]
}

// stopGone hands to Engine.Stop every topic the mirror knows that no
// longer matches its scope, or was deleted on the source (missing from
// present), and returns them with their reasons.
func (s *Syncer) stopGone(ctx context.Context, present map[string][16]byte) (map[string]string, error) {
	known, err := s.opts.Engine.Known(ctx)
	if err != nil {
		return nil, err
	}
	// A topic missing from the all-topics listing may only be hidden (an
	// authorizer omits topics the principal may not describe): ask for the
	// missing ones by name, and take as deleted only those the source
	// answers UNKNOWN_TOPIC_OR_PARTITION for.
	missing := map[string]bool{}
	for _, t := range known {
		if _, ok := present[t]; !ok && s.opts.InScope(t) {
			missing[t] = true
		}
	}
	gone, err := confirmDeleted(ctx, s.opts.Source, missing)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: %w", s.opts.Mirror, err)
	}
	reasons := map[string]string{}
	for _, t := range known {
		switch {
		case !s.opts.InScope(t):
			reasons[t] = ReasonOutOfScope
		case gone[t]:
			reasons[t] = ReasonDeleted
		}
	}
	if len(reasons) == 0 {
		return nil, nil
	}
	return reasons, s.opts.Engine.Stop(ctx, reasons)
}

// confirmDeleted asks the source for the named topics and returns those it
// does not know (UNKNOWN_TOPIC_OR_PARTITION): deleted. A topic answered with
// any other error (not authorized, no leader) is not taken as deleted.
func confirmDeleted(ctx context.Context, cl *kgo.Client, names map[string]bool) (map[string]bool, error) {
	gone := map[string]bool{}
	if len(names) == 0 {
		return gone, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // asking about a deleted topic must never create it again
	for name := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("checking whether topics were deleted: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.UnknownTopicOrPartition) {
			gone[*t.Topic] = true
		}
	}
	return gone, nil
}

// destinationDeleted reports whether the destination topic of a topic the
// round found missing there was deleted under the mirror: the mirror's
// partitions of it copied records to it (Engine.Written), and a second
// look, asking a broker directly, confirms it is gone. Such a topic is not
// created again: an append retrying against it would land at offset 0 of
// the new topic, not at its source offset. Its partitions are failed for
// good instead (Engine.DestinationDeleted), once per round, which is
// idempotent; the log says it once.
func (s *Syncer) destinationDeleted(ctx context.Context, topic string) (bool, error) {
	written, err := s.opts.Engine.Written(ctx, topic)
	if err != nil || !written {
		return false, err
	}
	gone, err := confirmDeleted(ctx, s.opts.Destination, map[string]bool{topic: true})
	if err != nil {
		return false, fmt.Errorf("topic %s: %w", topic, err)
	}
	if !gone[topic] {
		return false, nil // the first answer was stale: the next round looks again
	}
	s.warnOnce("destination topic "+topic+" deleted", "the destination topic was deleted while the mirror had copied records into it; it is not created again and its partitions fail: reset them to mirror the topic again from the source's log start",
		"topic", topic)
	if err := s.opts.Engine.DestinationDeleted(ctx, topic); err != nil {
		return true, fmt.Errorf("topic %s: failing the partitions of a deleted destination topic: %w", topic, err)
	}
	return true, nil
}

// ensureDestinationTopic makes the destination topic exist with at least the
// source's partition count and returns its partition count. dstParts is the
// destination's current count (0: the topic is missing). A missing topic is
// created with the source's partition count and dynamic configs minus the
// excluded ones, and the destination's default replication factor; if the
// destination rejects the configs, it is created with those it accepts one
// by one (or, if it refuses even those together, without any) and the
// config sync reports each rejected key. Its max.message.bytes is then raised to the
// source's limit if the destination's brokers allow less (ensureDestLimit);
// a failure there is returned with the partition count, so that the
// partitions still start. A destination with fewer partitions is expanded
// (CreatePartitions) to the source's count.
func (s *Syncer) ensureDestinationTopic(ctx context.Context, t Topic, dstParts int32, src topicConfig) (int32, error) {
	adm, exclude := s.dst, s.opts.PropertiesExclude
	var limitErr error
	switch {
	case dstParts == 0:
		configs := mirroredConfigs(src.Dynamic, exclude)
		first := min(t.Partitions, MaxPartitionsPerRequest)
		resp, err := adm.CreateTopic(ctx, first, -1, configs, t.Name)
		if err == nil {
			err = resp.Err
		}
		if isConfigRejection(err) && len(configs) > 0 {
			// Create it with the configs the destination takes (a Kafka 4
			// destination refuses keys it removed that an older source
			// still has, such as message.format.version), so that
			// retention and cleanup hold from the first record; without
			// any if even those are refused together.
			if ok := acceptedConfigs(ctx, adm, t.Name, first, configs); len(ok) > 0 && len(ok) < len(configs) {
				resp, err = adm.CreateTopic(ctx, first, -1, ok, t.Name)
				if err == nil {
					err = resp.Err
				}
			}
		}
		if isConfigRejection(err) && len(configs) > 0 {
			resp, err = adm.CreateTopic(ctx, first, -1, nil, t.Name)
			if err == nil {
				err = resp.Err
			}
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, fmt.Errorf("creating destination topic %s with %d partitions: %w", t.Name, first, err)
		}
		if err == nil && first < t.Partitions { // (a topic created by someone else is expanded by the next round)
			if n, err := addPartitions(ctx, adm, t.Name, first, t.Partitions); err != nil {
				return n, err
			}
		}
		limitErr = ensureDestLimit(ctx, adm, t.Name, src, exclude)
	case dstParts < t.Partitions:
		if n, err := addPartitions(ctx, adm, t.Name, dstParts, t.Partitions); err != nil {
			return n, err
		}
	default:
		return dstParts, nil
	}
	// New partitions take a moment to get leaders; wait for them so that
	// they do not start with a spurious failure.
	// Bounded: a broker that cannot open the new partitions' logs (out of
	// file descriptors, say) leaves the client retrying for ever, and the
	// partitions must start anyway and fail with the reason.
	rctx, cancel := context.WithTimeout(ctx, ReadyWait)
	defer cancel()
	for i := 0; i < 50 && rctx.Err() == nil; i++ {
		ends, err := adm.ListEndOffsets(rctx, t.Name)
		ready := err == nil
		for p := int32(0); ready && p < t.Partitions; p++ {
			o, ok := ends.Lookup(t.Name, p)
			ready = ok && o.Err == nil
		}
		if ready || backoff.Sleep(rctx, 100*time.Millisecond) != nil {
			break
		}
	}
	return t.Partitions, limitErr
}

// ReadyWait bounds the wait for a created or expanded topic's partitions to
// serve; after it they start anyway (a variable for tests).
var ReadyWait = 30 * time.Second

// MaxPartitionsPerRequest is the most partitions one CreateTopics or
// CreatePartitions request creates. A KRaft controller refuses a user
// operation that would write more than 10,000 metadata records
// (POLICY_VIOLATION), and a new partition is one record: a topic with more
// partitions is created with this many, then grown in steps of this many.
var MaxPartitionsPerRequest int32 = 5000

// addPartitions grows destination topic name from `from` to `to`
// partitions, at most MaxPartitionsPerRequest per request, and returns the
// count it reached.
func addPartitions(ctx context.Context, adm *kadm.Client, name string, from, to int32) (int32, error) {
	for from < to {
		next := min(to, from+MaxPartitionsPerRequest)
		resp, err := adm.UpdatePartitions(ctx, int(next), name)
		if err == nil {
			if r, ok := resp[name]; ok && r.Err != nil {
				err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
			}
		}
		if err != nil {
			return from, fmt.Errorf("adding partitions to destination topic %s (from %d to %d, on the way to the source's %d): %w", name, from, next, to, err)
		}
		from = next
	}
	return to, nil
}

// acceptedConfigs returns the configs the destination accepts one by one
// for a new topic (CreateTopics with validate_only, one request per key);
// the config sync reports the others.
func acceptedConfigs(ctx context.Context, adm *kadm.Client, name string, partitions int32, configs map[string]*string) map[string]*string {
	ok := map[string]*string{}
	for k, v := range configs {
		resp, err := adm.ValidateCreateTopics(ctx, partitions, -1, map[string]*string{k: v}, name)
		if err == nil {
			if r, found := resp[name]; found {
				err = r.Err
			}
		}
		if err == nil {
			ok[k] = v
		}
	}
	return ok
}

// isConfigRejection reports whether a CreateTopics error is about the
// configs it carried.
func isConfigRejection(err error) bool {
	return errors.Is(err, kerr.InvalidConfig) || errors.Is(err, kerr.PolicyViolation) || errors.Is(err, kerr.InvalidRequest)
}

// warnOnce logs msg the first time key is seen.
func (s *Syncer) warnOnce(key, msg string, args ...any) {
	s.mu.Lock()
	seen := s.warned[key]
	s.warned[key] = true
	s.mu.Unlock()
	if !seen {
		s.log.Warn(msg, args...)
	}
}

// note adds a fact for the mirror's describe output, once.
func (s *Syncer) note(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.notes {
		if have == n {
			return
		}
	}
	s.notes = append(s.notes, n)
}

// Notes returns the facts about the mirror's topics an operator should know
// (for example that the destination has no authorizer), for describe.
func (s *Syncer) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}
