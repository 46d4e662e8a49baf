package groupsync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrShareGroupsUnsupported is wrapped by the reason share groups are not
// synced: a cluster does not advertise the KIP-932 admin APIs.
var ErrShareGroupsUnsupported = errors.New("share groups unsupported")

// shareKeys are the request keys each side must advertise.
var (
	sourceShareKeys      = []int16{kmsg.DescribeShareGroupOffsets.Int16()}
	destinationShareKeys = []int16{kmsg.DescribeShareGroupOffsets.Int16(), kmsg.AlterShareGroupOffsets.Int16()}
)

// syncShare syncs the share-partition start offsets of the given (included)
// source share groups, from the source start offsets read this cycle. The
// bool is true when either cluster does not support share groups; nothing is
// synced then.
func (s *Syncer) syncShare(ctx context.Context, groups []string, dst kadm.ListedGroups, read sourceRead) ([]GroupReport, bool) {
	err := read.shareSupport
	switch {
	case errors.Is(err, ErrShareGroupsUnsupported):
		s.mu.Lock()
		first := !s.unsupported
		s.unsupported, s.unsupportedWhy = true, err.Error()
		s.mu.Unlock()
		if first {
			s.inst.shareErr(ctx)
			s.log.Info("share groups are not synced: a cluster does not advertise the KIP-932 share-group admin APIs; consumer groups are still synced", "reason", err)
		}
		return nil, true
	case err != nil:
		s.inst.shareErr(ctx)
		s.log.Warn("share group offset sync skipped this cycle; retrying next cycle", "error", err)
		return nil, false
	}
	s.mu.Lock()
	if s.unsupported {
		s.log.Info("share groups are supported again by both clusters; syncing them")
	}
	s.unsupported = false
	s.mu.Unlock()

	now := s.opts.Now()
	reports := make([]GroupReport, 0, len(groups))
	var candidates []string
	for _, g := range groups {
		if state, active := activeOn(dst, g); active {
			reports = append(reports, GroupReport{Group: g, Kind: KindShare, SkippedActive: true, DestinationState: state, At: now})
			continue
		}
		candidates = append(candidates, g)
	}
	if len(candidates) == 0 {
		return reports, false
	}
	// Shard errors leave the groups they concern missing from the maps; those
	// are reported per group below.
	srcDesc, srcErr := read.share, read.shareErr
	dstDesc, dstErr := s.opts.Destination.DescribeShareGroupOffsets(ctx, candidates...)
	for _, g := range candidates {
		state, _ := activeOn(dst, g)
		r := GroupReport{Group: g, Kind: KindShare, DestinationState: state, At: now}
		src, srcOK := srcDesc[g]
		d, dstOK := dstDesc[g]
		var err error
		switch {
		case !srcOK:
			err = fmt.Errorf("describing share group %q offsets on the source: %w", g, orMissing(srcErr))
		case !dstOK:
			err = fmt.Errorf("describing share group %q offsets on the destination: %w", g, orMissing(dstErr))
		default:
			err = s.syncShareGroup(ctx, g, src, d, &r)
		}
		if err != nil {
			r.Err = err.Error()
			s.inst.shareErr(ctx)
			s.log.Warn("share group offset sync failed; retrying next cycle", "group", g, "error", err)
		} else if r.Synced > 0 {
			s.log.Debug("share group start offsets synced", "group", g, "partitions", r.Synced, "clamped", r.Clamped)
		}
		reports = append(reports, r)
	}
	return reports, false
}

var errMissing = errors.New("group missing from the response")

func orMissing(err error) error {
	if err != nil {
		return err
	}
	return errMissing
}

// syncShareGroup writes one share group's start offsets and fills r.
func (s *Syncer) syncShareGroup(ctx context.Context, group string, src, dst kadm.DescribedShareGroupOffsets, r *GroupReport) error {
	if src.Err != nil {
		return fmt.Errorf("describing share group %q offsets on the source: %w", group, src.Err)
	}
	if dst.Err != nil && !errors.Is(dst.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("describing share group %q offsets on the destination: %w", group, dst.Err)
	}
	var offs []sourceOffset
	for _, o := range src.Offsets.Sorted() {
		so := sourceOffset{topic: o.Topic, partition: o.Partition, at: o.StartOffset, cur: -1, err: o.Err}
		if d, ok := dst.Offsets.Lookup(o.Topic, o.Partition); ok && d.Err == nil {
			so.cur = d.StartOffset
		}
		offs = append(offs, so)
	}
	alter, pending, errs := s.plan(KindShare, group, offs, r)
	if len(alter) > 0 {
		resps, err := s.opts.Destination.AlterShareGroupOffsets(ctx, group, alter)
		if err != nil {
			errs = append(errs, fmt.Errorf("altering start offsets of share group %q on the destination (a group with members cannot be written; it is retried next cycle): %w", group, err))
		} else {
			for topic, ps := range pending {
				for p, t := range ps {
					perr, ok := resps.Lookup(topic, p)
					switch {
					case !ok:
						errs = append(errs, fmt.Errorf("altering %s/%d of share group %q on the destination: partition missing from the response", topic, p, group))
					case perr != nil:
						errs = append(errs, fmt.Errorf("altering %s/%d of share group %q on the destination: %w", topic, p, group, perr))
					default:
						s.observe(t)
						r.Synced++
					}
				}
			}
		}
	}
	return joinErrs(errs)
}

// shareSupported checks that every broker of both clusters advertises the
// share-group admin APIs. It wraps ErrShareGroupsUnsupported when one does
// not.
func (s *Syncer) shareSupported(ctx context.Context) error {
	if err := supports(ctx, s.opts.Source, "source", sourceShareKeys); err != nil {
		return err
	}
	return supports(ctx, s.opts.Destination, "destination", destinationShareKeys)
}

func supports(ctx context.Context, cl *kadm.Client, side string, keys []int16) error {
	vs, err := cl.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("reading the %s's API versions: %w", side, err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("reading the API versions of %s broker %d: %w", side, v.NodeID, v.Err)
		}
		var missing []string
		for _, k := range keys {
			if _, ok := v.KeyMaxVersion(k); !ok {
				missing = append(missing, kmsg.NameForKey(k))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: %s broker %d does not advertise %s", ErrShareGroupsUnsupported, side, v.NodeID, strings.Join(missing, ", "))
		}
	}
	return nil
}
