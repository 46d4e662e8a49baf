package groupsync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// syncConsumer syncs the committed offsets of the given (included, non-share)
// source groups. dst is the destination's group listing of this cycle, and
// srcFetched the source offsets read this cycle.
func (s *Syncer) syncConsumer(ctx context.Context, groups []string, dst kadm.ListedGroups, srcFetched kadm.FetchOffsetsResponses) []GroupReport {
	now := s.opts.Now()
	reports := make([]GroupReport, 0, len(groups))
	var candidates []string
	for _, g := range groups {
		if state, active := activeOn(dst, g); active {
			reports = append(reports, GroupReport{Group: g, Kind: KindConsumer, SkippedActive: true, DestinationState: state, At: now})
			continue
		}
		candidates = append(candidates, g)
	}
	if len(candidates) == 0 {
		return reports
	}
	dstFetched := s.opts.Destination.FetchManyOffsets(ctx, candidates...)
	for _, g := range candidates {
		state, _ := activeOn(dst, g)
		r := GroupReport{Group: g, Kind: KindConsumer, DestinationState: state, At: now}
		src, ok := srcFetched[g]
		if !ok {
			src.Err = errMissing
		}
		if err := s.syncConsumerGroup(ctx, g, src, dstFetched[g], &r); err != nil {
			r.Err = err.Error()
			s.inst.consumerErr(ctx)
			s.log.Warn("consumer group offset sync failed; retrying next cycle", "group", g, "error", err)
		} else if r.Synced > 0 {
			s.log.Debug("consumer group offsets synced", "group", g, "partitions", r.Synced, "clamped", r.Clamped)
		}
		reports = append(reports, r)
	}
	return reports
}

// syncConsumerGroup writes one group's offsets and fills r. Partition-level
// failures do not stop the other partitions; they are joined into the error.
func (s *Syncer) syncConsumerGroup(ctx context.Context, group string, src, dst kadm.FetchOffsetsResponse, r *GroupReport) error {
	if src.Err != nil {
		return fmt.Errorf("fetching committed offsets of group %q on the source: %w", group, src.Err)
	}
	if dst.Err != nil && !errors.Is(dst.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetching committed offsets of group %q on the destination: %w", group, dst.Err)
	}
	var offs []sourceOffset
	for _, o := range src.Fetched.Sorted() {
		so := sourceOffset{topic: o.Topic, partition: o.Partition, at: o.At, cur: -1, metadata: o.Metadata, err: o.Err}
		if d, ok := dst.Fetched.Lookup(o.Topic, o.Partition); ok && d.Err == nil {
			so.cur = d.At
		}
		offs = append(offs, so)
	}
	commit, pending, errs := s.plan(KindConsumer, group, offs, r)
	if len(commit) > 0 {
		resps, err := s.opts.Destination.CommitOffsets(ctx, group, commit)
		if err != nil {
			errs = append(errs, fmt.Errorf("committing offsets of group %q on the destination (a group with members cannot be written; it is retried next cycle): %w", group, err))
		} else {
			for _, o := range resps.Sorted() {
				if o.Err != nil {
					errs = append(errs, fmt.Errorf("committing %s/%d of group %q on the destination: %w", o.Topic, o.Partition, group, o.Err))
					continue
				}
				if t, ok := pending[o.Topic][o.Partition]; ok {
					s.observe(t)
					r.Synced++
				}
			}
		}
	}
	return joinErrs(errs)
}

// sourceOffset is one partition's offset on the source, with the
// destination's current one (-1: none), as both group kinds read them.
type sourceOffset struct {
	topic     string
	partition int32
	at, cur   int64
	metadata  string
	err       error
}

// plan decides, for each source offset of a group, what to write on the
// destination. It returns the offsets to write and, per partition, the
// decision to record once the write succeeds; partitions left as they are
// are recorded at once. Partition-level problems are returned, not fatal.
func (s *Syncer) plan(kind, group string, offs []sourceOffset, r *GroupReport) (kadm.Offsets, map[string]map[int32]target, []error) {
	var errs []error
	write := kadm.Offsets{}
	pending := map[string]map[int32]target{}
	for _, o := range offs {
		if o.err != nil {
			errs = append(errs, fmt.Errorf("source offset of %s/%d: %w", o.topic, o.partition, o.err))
			continue
		}
		t, ok, err := s.decide(kind, group, o.topic, o.partition, o.at, o.cur)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		if t.clamped {
			r.Clamped++
		}
		if t.kept {
			r.Kept++
		}
		if !t.write {
			s.observe(t)
			continue
		}
		// The source leader epoch means nothing on the destination: -1 lets
		// consumers skip epoch validation of the committed position.
		addOffset(write, kadm.Offset{Topic: o.topic, Partition: o.partition, At: t.at, LeaderEpoch: -1, Metadata: o.metadata})
		if pending[o.topic] == nil {
			pending[o.topic] = map[int32]target{}
		}
		pending[o.topic][o.partition] = t
	}
	return write, pending, errs
}

// joinErrs joins errs into one error whose message stays on one line.
func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &multiError{msg: strings.Join(msgs, "; "), errs: errs}
}

type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }

func addOffset(os kadm.Offsets, o kadm.Offset) {
	if os[o.Topic] == nil {
		os[o.Topic] = map[int32]kadm.Offset{}
	}
	os[o.Topic][o.Partition] = o
}
