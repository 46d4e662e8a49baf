package groupsync

import (
	"context"
	"encoding/binary"
	"hash"
	"hash/fnv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// activity is what the Syncer knows of when a source group last committed.
// Kafka does not record when offsets were committed (OffsetFetch returns
// offsets, not times), so the Syncer compares each cycle's source offsets
// with the previous cycle's: sum is a hash of the group's source offsets
// (every partition, mirrored or not), at the last time sum was seen to
// change — or the first time the group was seen.
type activity struct {
	sum uint64
	at  time.Time
}

// sourceRead is every source group's offsets as read once per cycle, before
// the filter: the filter needs LastCommit for every group, and the groups it
// keeps are then synced from the same read.
type sourceRead struct {
	consumer kadm.FetchOffsetsResponses
	// share holds the share groups' start offsets; shareErr is the error of
	// describing them (shard errors leave groups missing from share), and
	// shareSupport the reason share groups are not synced this cycle, if any.
	share        kadm.DescribedShareGroupsOffsets
	shareErr     error
	shareSupport error
}

// readSource reads the committed offsets of every listed consumer group and,
// when both clusters support share groups, the start offsets of every listed
// share group.
func (s *Syncer) readSource(ctx context.Context, consumer, share []string) sourceRead {
	var r sourceRead
	r.consumer = s.opts.Source.FetchManyOffsets(ctx, consumer...)
	r.shareSupport = s.shareSupported(ctx)
	if r.shareSupport == nil && len(share) > 0 {
		r.share, r.shareErr = s.opts.Source.DescribeShareGroupOffsets(ctx, share...)
	}
	return r
}

// offsetsSum hashes a group's offsets, added as (topic, partition, offset)
// in a fixed order. Partitions whose offset could not be read are left out.
type offsetsSum struct{ h hash.Hash64 }

func newOffsetsSum() offsetsSum { return offsetsSum{fnv.New64a()} }

func (o offsetsSum) add(topic string, partition int32, offset int64) {
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], uint32(partition))
	binary.BigEndian.PutUint64(b[4:], uint64(offset))
	_, _ = o.h.Write([]byte(topic))
	_, _ = o.h.Write([]byte{0})
	_, _ = o.h.Write(b[:])
}

func (o offsetsSum) sum() uint64 { return o.h.Sum64() }

// sums returns the offset hash of every group whose offsets were read this
// cycle; a group missing from the result could not be read.
func (r sourceRead) sums() map[statusKey]uint64 {
	out := map[statusKey]uint64{}
	for g, resp := range r.consumer {
		if resp.Err != nil {
			continue
		}
		sum := newOffsetsSum()
		for _, o := range resp.Fetched.Sorted() {
			if o.Err == nil {
				sum.add(o.Topic, o.Partition, o.At)
			}
		}
		out[statusKey{KindConsumer, g}] = sum.sum()
	}
	if r.shareSupport == nil {
		for g, d := range r.share {
			if d.Err != nil {
				continue
			}
			sum := newOffsetsSum()
			for _, o := range d.Offsets.Sorted() {
				if o.Err == nil {
					sum.add(o.Topic, o.Partition, o.StartOffset)
				}
			}
			out[statusKey{KindShare, g}] = sum.sum()
		}
	}
	return out
}

// track updates the activity of every listed group from this cycle's read
// and returns each group's LastCommit (zero when unknown: never read). A
// group seen for the first time counts as having committed now. Activity of
// groups no longer listed is dropped; share groups are kept as they were
// while share groups are unsupported (they are not read then).
func (s *Syncer) track(listed []statusKey, read sourceRead) map[statusKey]time.Time {
	now := s.opts.Now()
	sums := read.sums()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[statusKey]time.Time, len(listed))
	seen := make(map[statusKey]bool, len(listed))
	for _, k := range listed {
		seen[k] = true
		a, known := s.activity[k]
		sum, read := sums[k]
		switch {
		case !read:
			// Unreadable this cycle: what was known stands.
		case !known || a.sum != sum:
			a = activity{sum: sum, at: now}
			s.activity[k] = a
			s.histDirty = true
		}
		out[k] = a.at // zero when neither known nor read
	}
	for k := range s.activity {
		if !seen[k] {
			delete(s.activity, k)
			s.histDirty = true
		}
	}
	return out
}
