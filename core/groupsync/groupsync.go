// Package groupsync owns the consumer-group and share-group offset sync loop of
// one mirror: it copies committed offsets (classic and KIP-848 consumer groups)
// and share-partition start offsets (KIP-932 share groups) of mirrored
// partitions from the source cluster to the destination cluster.
//
// Invariants, each enforced in this package:
//
//   - Only groups that Options.Filter keeps are touched (one call per cycle
//     with every source group), and only partitions that Options.Mirrored
//     reports as mirrored. A filter error means no decision: the cycle
//     changes nothing.
//   - A group that is active on the destination (any state other than Empty or
//     Dead, or a state the broker does not report) is never written; it is
//     reported SkippedActive and retried next cycle.
//   - An offset is never written ahead of the mirrored data: a source offset
//     beyond Mirrored.End is clamped to End (and re-synced next cycle).
//   - A destination offset is never moved backwards unless the source moved it
//     backwards. The last source offset seen per (group, topic, partition) is
//     kept in memory and, with Options.Store, in the state store after every
//     cycle that changed it, so a restarted daemon still sees a source that
//     moved backwards while it was down. Without a store (or before the
//     history could be read) a destination offset that is ahead of the
//     translated source offset is left as it is until the source is seen to
//     move below an offset observed by this process.
//   - Commit metadata is copied as it is. The source leader epoch is not: it
//     means nothing on the destination, so commits carry -1 (unknown).
//   - Every listed group that is not a share group is synced as a consumer
//     group (classic, KIP-848 consumer, or any other type that commits
//     offsets). A destination listing that fails, even partly, fails the
//     cycle: a group missing from it could be an active one.
//   - Every group the filter sees carries LastCommit: the last time this
//     package saw the group's source offsets change (see activity.go), or the
//     time it first saw the group. It is kept with the offset history, so a
//     restart does not make idle groups look fresh. To know it for groups the
//     filter drops, the source offsets of every listed group are read each
//     cycle, before the filter.
//   - Share groups are optional: when either cluster does not advertise the
//     share-group APIs, the share half is skipped, logged once and counted, and
//     consumer groups are still synced.
//
// The package is a library: the engine builds one Syncer per mirror and calls
// Sync from one of its sync loops (the one loop template, core/mirror), every
// mirror.metadata.refresh.interval.ms.
package groupsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.opentelemetry.io/otel/metric"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Kinds of group, as reported in GroupReport.Kind.
const (
	// KindConsumer is a classic or KIP-848 consumer group (committed offsets).
	KindConsumer = "consumer"
	// KindShare is a KIP-932 share group (share-partition start offsets).
	KindShare = "share"
)

// ErrInvalidOptions is returned by New when a required option is missing.
var ErrInvalidOptions = errors.New("groupsync: invalid options")

// Mirrored answers, for a source partition, whether it is actively mirrored
// and up to which source offset its data is on the destination, and
// translates a source offset to the destination.
type Mirrored interface {
	// End returns the next source offset to mirror: every source offset below
	// end is on the destination. ok is false when the partition is not
	// actively mirrored; its offsets are then not synced.
	End(topic string, partition int32) (end int64, ok bool)
	// Translate maps a committed source offset (the next record to read,
	// <= End) to the destination offset of the first mirrored record at or
	// after it. In preserve mode it is the identity.
	Translate(topic string, partition int32, offset int64) (int64, error)
}

// Options configure a Syncer. Source, Destination and Mirrored are required.
type Options struct {
	// Mirror names the mirror in logs, errors and metric attributes.
	Mirror string
	// Source is an admin client of the source cluster.
	Source *kadm.Client
	// Destination is an admin client of the destination cluster.
	Destination *kadm.Client
	// Filter decides which source groups are synced: the built-in
	// mirror.groups.include/exclude rules (core/scope), possibly chained
	// with filter plugins. Only its FilterGroups is called, once per cycle
	// with every group the source lists. Nil syncs every group.
	Filter filter.Filter
	// Mirrored tells which partitions are mirrored and translates offsets.
	Mirrored Mirrored
	// Logger receives one line per change and per error. Nil discards.
	Logger hclog.Logger
	// Meter creates the sync's instruments. Nil records nothing.
	Meter metric.Meter
	// Now is the clock used for GroupReport.At and for the groups'
	// LastCommit. Nil uses time.Now.
	Now func() time.Time
	// Store keeps the never-backwards history and the groups' LastCommit
	// across restarts (key statestore.GroupHistoryKey(Mirror)). Nil keeps
	// them in memory only.
	Store statestore.Store
}

// GroupReport is the result of one cycle for one group.
type GroupReport struct {
	// Group is the group id.
	Group string `json:"group"`
	// Kind is KindConsumer or KindShare.
	Kind string `json:"kind"`
	// Synced counts the partitions whose destination offset was written this
	// cycle.
	Synced int `json:"synced"`
	// Kept counts the partitions left untouched because the destination was
	// ahead and the source had not moved backwards.
	Kept int `json:"kept,omitempty"`
	// Clamped counts the partitions whose source offset was beyond what is
	// mirrored; the mirrored end was written instead.
	Clamped int `json:"clamped,omitempty"`
	// SkippedActive is true when the group is active on the destination and
	// was therefore not written.
	SkippedActive bool `json:"skipped_active,omitempty"`
	// DestinationState is the group's state on the destination ("" when it
	// does not exist there).
	DestinationState string `json:"destination_state,omitempty"`
	// Err describes what failed for this group, if anything.
	Err string `json:"error,omitempty"`
	// At is when the group was examined in this cycle.
	At time.Time `json:"at"`
	// LastSynced is when the group was last found in sync on the destination
	// (written, or nothing to write) by this process; zero if never.
	LastSynced time.Time `json:"last_synced,omitzero"`
	// LastCommit is the group's filter.Group.LastCommit of this cycle: when
	// its source offsets were last seen to change (zero if unknown).
	LastCommit time.Time `json:"last_commit,omitzero"`
}

// Report is the result of one Sync cycle.
type Report struct {
	// Groups has one entry per included consumer group, sorted by group.
	Groups []GroupReport
	// ShareGroups has one entry per included share group, sorted by group.
	ShareGroups []GroupReport
	// Errors counts the groups (of both kinds) that failed this cycle.
	Errors int
	// ShareGroupsUnsupported is true when the source or the destination does
	// not support share groups; share groups were not synced.
	ShareGroupsUnsupported bool
}

// Syncer syncs the group offsets of one mirror. Its methods are safe for
// concurrent use; Sync calls are serialized.
type Syncer struct {
	opts Options
	log  hclog.Logger
	inst instruments

	cycle sync.Mutex // serializes Sync

	mu          sync.Mutex
	last        map[offsetKey]int64    // last source offset seen, see package doc
	activity    map[statusKey]activity // when each listed source group last committed
	histLoaded  bool                   // last and activity hold the stored history (or there is no store)
	histDirty   bool                   // last or activity changed since they were stored
	status      map[statusKey]GroupReport
	unsupported bool // share groups unsupported at the last check

	// unsupportedWhy is why share groups are unsupported, for Notes
	// (guarded by mu).
	unsupportedWhy string
}

type offsetKey struct {
	kind, group, topic string
	partition          int32
}

type statusKey struct{ kind, group string }

// New validates opts and builds a Syncer.
func New(opts Options) (*Syncer, error) {
	var missing []string
	if opts.Source == nil {
		missing = append(missing, "Source")
	}
	if opts.Destination == nil {
		missing = append(missing, "Destination")
	}
	if opts.Mirrored == nil {
		missing = append(missing, "Mirrored")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: mirror %q: %s must be set", ErrInvalidOptions, opts.Mirror, strings.Join(missing, ", "))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	inst, err := newInstruments(opts.Meter, opts.Mirror)
	if err != nil {
		return nil, fmt.Errorf("groupsync: mirror %q: creating metrics: %w", opts.Mirror, err)
	}
	return &Syncer{
		opts:     opts,
		log:      log.With("mirror", opts.Mirror),
		inst:     inst,
		last:     map[offsetKey]int64{},
		activity: map[statusKey]activity{},
		status:   map[statusKey]GroupReport{},
	}, nil
}

// Sync runs one cycle: it lists the source groups, and for every included one
// that is not active on the destination writes the offsets of mirrored
// partitions. It is idempotent. The error is non-nil only when the cycle could
// not run at all (the groups of either cluster could not be listed);
// per-group failures are in the Report.
func (s *Syncer) Sync(ctx context.Context) (Report, error) {
	s.cycle.Lock()
	defer s.cycle.Unlock()
	s.loadHistory(ctx)
	defer s.saveHistory(ctx)

	srcGroups, err := s.opts.Source.ListGroups(ctx)
	if err != nil {
		s.inst.consumerErr(ctx)
		return Report{}, fmt.Errorf("groupsync: mirror %q: listing source groups failed (check the source is reachable and the mirror may DESCRIBE groups): %w", s.opts.Mirror, err)
	}
	dstGroups, err := s.opts.Destination.ListGroups(ctx)
	if err != nil {
		s.inst.consumerErr(ctx)
		return Report{}, fmt.Errorf("groupsync: mirror %q: listing destination groups failed (check the destination is reachable and the mirror may DESCRIBE groups): %w", s.opts.Mirror, err)
	}

	listed := make([]filter.Group, 0, len(srcGroups))
	keys := make([]statusKey, 0, len(srcGroups))
	var consumer, share []string
	for _, g := range srcGroups.Sorted() {
		fg := filter.Group{ID: g.Group, Kind: groupKind(g.GroupType), State: g.State}
		k := statusKey{KindConsumer, fg.ID}
		if fg.Kind == filter.GroupShare {
			k.kind = KindShare
			share = append(share, fg.ID)
		} else {
			consumer = append(consumer, fg.ID)
		}
		listed = append(listed, fg)
		keys = append(keys, k)
	}
	read := s.readSource(ctx, consumer, share)
	lastCommit := s.track(keys, read)
	for i := range listed {
		listed[i].LastCommit = lastCommit[keys[i]]
	}

	kept, err := s.filter(ctx, listed)
	if err != nil {
		s.inst.consumerErr(ctx)
		return Report{}, err
	}
	consumer, share = nil, nil
	for _, g := range kept {
		if g.Kind == filter.GroupShare {
			share = append(share, g.ID)
		} else {
			consumer = append(consumer, g.ID)
		}
	}

	var rep Report
	rep.Groups = s.syncConsumer(ctx, consumer, dstGroups, read.consumer)
	rep.ShareGroups, rep.ShareGroupsUnsupported = s.syncShare(ctx, share, dstGroups, read)
	for _, list := range [][]GroupReport{rep.Groups, rep.ShareGroups} {
		for i := range list {
			list[i].LastCommit = lastCommit[statusKey{list[i].Kind, list[i].Group}]
		}
	}

	synced := map[string]int64{KindConsumer: 0, KindShare: 0}
	for _, list := range [][]GroupReport{rep.Groups, rep.ShareGroups} {
		for _, g := range list {
			switch {
			case g.Err != "":
				rep.Errors++
			case !g.SkippedActive:
				synced[g.Kind]++
			}
		}
	}
	s.inst.groupsSynced(ctx, synced)
	s.remember(&rep)
	return rep, nil
}

// filter returns the source groups (in, sorted by id) that Options.Filter
// keeps, sorted by id.
func (s *Syncer) filter(ctx context.Context, in []filter.Group) ([]filter.Group, error) {
	if s.opts.Filter == nil {
		return in, nil
	}
	out, err := s.opts.Filter.FilterGroups(ctx, s.opts.Mirror, in)
	if err == nil {
		err = filter.VerifyOutput(in, out)
	}
	if err != nil {
		return nil, fmt.Errorf("groupsync: mirror %q: filtering %d source groups made no decision, no group is synced this cycle (retried next cycle): %w", s.opts.Mirror, len(in), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// groupKind returns the filter kind of a group type as ListGroups reports it
// (classic, consumer, share, streams; brokers before ListGroups v5 report no
// type, and have only classic groups).
func groupKind(groupType string) string {
	if groupType == "" {
		return filter.GroupClassic
	}
	return strings.ToLower(groupType)
}

// Notes returns the facts about the mirror's group sync an operator should
// know, for describe: that share groups are not synced because a cluster
// does not support them (an older source, say), and why.
func (s *Syncer) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.unsupported {
		return nil
	}
	return []string{"share groups are not synced (" + s.unsupportedWhy + "); consumer groups are"}
}

// Status returns the last result of every group seen in the last cycle,
// consumer groups first, each kind sorted by group (for describe).
func (s *Syncer) Status() []GroupReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GroupReport, 0, len(s.status))
	for _, r := range s.status {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind == KindConsumer
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// remember fills LastSynced in rep and replaces the status with this cycle's
// groups, so that groups gone from the source (or no longer included)
// disappear from describe, and drops their offset history.
func (s *Syncer) remember(rep *Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[statusKey]bool{}
	next := map[statusKey]GroupReport{}
	for _, list := range [][]GroupReport{rep.Groups, rep.ShareGroups} {
		for i := range list {
			g := &list[i]
			k := statusKey{g.Kind, g.Group}
			if g.Err == "" && !g.SkippedActive {
				g.LastSynced = g.At
			} else {
				g.LastSynced = s.status[k].LastSynced
			}
			seen[k] = true
			next[k] = *g
		}
	}
	if rep.ShareGroupsUnsupported {
		// Share groups were not listed this cycle: keep what describe knew.
		for k, g := range s.status {
			if k.kind == KindShare {
				next[k] = g
				seen[k] = true
			}
		}
	}
	s.status = next
	for k := range s.last {
		if !seen[statusKey{k.kind, k.group}] {
			delete(s.last, k)
			s.histDirty = true
		}
	}
}

// activeOn reports whether a destination group state means members are there.
// An unknown (empty) state counts as active: only groups known to be inactive
// are written.
func activeOn(dst kadm.ListedGroups, group string) (state string, active bool) {
	g, ok := dst[group]
	if !ok {
		return "", false
	}
	switch {
	case strings.EqualFold(g.State, "Empty"), strings.EqualFold(g.State, "Dead"):
		return g.State, false
	case g.State == "":
		return "Unknown", true
	default:
		return g.State, true
	}
}

// target is the decision for one partition.
type target struct {
	write   bool
	kept    bool
	clamped bool
	at      int64 // destination offset to write
	key     offsetKey
	src     int64
}

// observe records src as the last source offset seen for k. It is called once
// the partition's decision took effect (written, or nothing to write), so that
// a failed write of a backwards move is retried next cycle.
func (s *Syncer) observe(t target) {
	s.mu.Lock()
	if prev, ok := s.last[t.key]; !ok || prev != t.src {
		s.last[t.key] = t.src
		s.histDirty = true
	}
	s.mu.Unlock()
}

// history is the value stored under statestore.GroupHistoryKey (format 2):
// the last source offsets and the groups' activity. Format 1, written before
// LastCommit existed, was the bare list of offsets; it is still read (every
// group then counts as first seen).
type history struct {
	Offsets []historyEntry  `json:"offsets"`
	Groups  []activityEntry `json:"groups"`
}

// activityEntry is one stored group activity.
type activityEntry struct {
	Kind       string    `json:"kind"`
	Group      string    `json:"group"`
	Sum        uint64    `json:"offsets_hash"`
	LastCommit time.Time `json:"last_commit"`
}

// historyEntry is one stored last source offset.
type historyEntry struct {
	Kind      string `json:"kind"`
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// loadHistory reads the stored history once. A failure is logged and the
// cycle runs on what this process saw (the safe side: destination offsets
// that are ahead are kept); the next cycle tries again.
func (s *Syncer) loadHistory(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.histLoaded || s.opts.Store == nil {
		s.histLoaded = true
		return
	}
	ent, err := s.opts.Store.Get(ctx, statestore.GroupHistoryKey(s.opts.Mirror))
	if errors.Is(err, statestore.ErrNotFound) {
		s.histLoaded = true
		return
	}
	var h history
	if err == nil {
		if v := bytes.TrimSpace(ent.Value); len(v) > 0 && v[0] == '[' {
			err = json.Unmarshal(v, &h.Offsets) // format 1
		} else {
			err = json.Unmarshal(v, &h)
		}
	}
	if err != nil {
		s.log.Warn("cannot read the group offset history; destination offsets ahead of the source are kept, and groups count as active, until it is read", "error", err)
		return
	}
	for _, e := range h.Offsets {
		k := offsetKey{e.Kind, e.Group, e.Topic, e.Partition}
		if _, seen := s.last[k]; !seen {
			s.last[k] = e.Offset
		}
	}
	for _, e := range h.Groups {
		if y := e.LastCommit.UTC().Year(); y < 0 || y > 9999 {
			// saveHistory stores times in UTC, and JSON cannot hold this
			// one there: keeping it would stop every later save. The
			// group counts as first seen, as in format 1.
			continue
		}
		k := statusKey{e.Kind, e.Group}
		// What this process saw wins, unless it saw the same offsets: then
		// the stored time, older, is when they last changed.
		if a, seen := s.activity[k]; !seen || a.sum == e.Sum {
			s.activity[k] = activity{sum: e.Sum, at: e.LastCommit}
		}
	}
	s.histLoaded = true
}

// saveHistory stores the history when it changed (and was read first, so
// that a partial view never replaces it).
func (s *Syncer) saveHistory(ctx context.Context) {
	s.mu.Lock()
	if s.opts.Store == nil || !s.histLoaded || !s.histDirty {
		s.mu.Unlock()
		return
	}
	list := make([]historyEntry, 0, len(s.last))
	for k, off := range s.last {
		list = append(list, historyEntry{Kind: k.kind, Group: k.group, Topic: k.topic, Partition: k.partition, Offset: off})
	}
	groups := make([]activityEntry, 0, len(s.activity))
	for k, a := range s.activity {
		groups = append(groups, activityEntry{Kind: k.kind, Group: k.group, Sum: a.sum, LastCommit: a.at.UTC()})
	}
	s.histDirty = false
	s.mu.Unlock()
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].Kind != groups[j].Kind {
			return groups[i].Kind < groups[j].Kind
		}
		return groups[i].Group < groups[j].Group
	})
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	b, err := json.Marshal(history{Offsets: list, Groups: groups})
	if err == nil {
		_, err = s.opts.Store.Put(ctx, statestore.GroupHistoryKey(s.opts.Mirror), b, statestore.AnyVersion)
	}
	if err != nil {
		s.log.Warn("cannot store the group offset history; retrying next cycle", "error", err)
		s.mu.Lock()
		s.histDirty = true
		s.mu.Unlock()
	}
}

// decide applies clamp, translation and the never-backwards rule to one
// partition. src is the source offset (next to read), dst the destination's
// current offset or -1 when it has none. ok is false when the partition is
// not mirrored or has no source offset.
func (s *Syncer) decide(kind, group, topic string, partition int32, src, dst int64) (t target, ok bool, err error) {
	if src < 0 {
		return t, false, nil
	}
	end, mirrored := s.opts.Mirrored.End(topic, partition)
	if !mirrored {
		return t, false, nil
	}
	eff := src
	if eff > end {
		eff = end
		t.clamped = true
	}
	at, err := s.opts.Mirrored.Translate(topic, partition, eff)
	if err != nil {
		return t, true, fmt.Errorf("translating source offset %d of %s/%d: %w", eff, topic, partition, err)
	}
	t.key = offsetKey{kind, group, topic, partition}
	t.src = src
	s.mu.Lock()
	prev, seen := s.last[t.key]
	s.mu.Unlock()
	switch {
	case at == dst:
		// Already there: nothing to write.
	case at > dst:
		t.write = true
	case seen && src < prev:
		// The source moved backwards: the destination follows.
		t.write = true
	default:
		t.kept = true
	}
	t.at = at
	return t, true, nil
}
