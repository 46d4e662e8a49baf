package cluster

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
)

// fetchVersion is the highest Fetch version that names topics (v13 uses
// topic ids).
const fetchVersion int16 = 12

// DuplicateMarkers reports whether destination partition topic/partition holds, from
// offset marker to end, only markers of producer pid of one control type:
// the marker a replay asked for, written again by the destination's
// transaction coordinator after it failed over (the writer package's ErrDuplicateMarker).
// Anything else there — a data record, another producer's marker, a marker
// of the other type — or a read that fails is not such a case (false).
func (c *Client) DuplicateMarkers(ctx context.Context, topic string, partition int32, pid, marker, end int64) bool {
	return c.MarkerCopies(ctx, topic, partition, pid, -1, marker, end)
}

// MarkerCopies reports whether destination partition topic/partition holds,
// from offset from to end, only markers of producer pid of one control
// type, ct (any type when ct is negative: the type of the first): copies of
// a marker the destination's transaction coordinator wrote again, found
// where a later append expected its own offset. Anything else there, or a
// read that fails, is not such a case (false).
func (c *Client) MarkerCopies(ctx context.Context, topic string, partition int32, pid int64, ct batch.ControlType, from, end int64) bool {
	records, ok := c.fetchFrom(ctx, topic, partition, from)
	return ok && onlyMarkersOf(records, pid, ct, from, end)
}

// fetchFrom reads destination partition topic/partition from offset from
// (read_uncommitted, up to 1 MiB) on its leader.
func (c *Client) fetchFrom(ctx context.Context, topic string, partition int32, from int64) ([]byte, bool) {
	leader, err := c.Leader(ctx, topic, partition, true)
	if err != nil {
		return nil, false
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = from
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.Request(ctx, leader, &Pinned{Request: req, Max: fetchVersion})
	if err != nil {
		return nil, false
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, fp := range t.Partitions {
			if t.Topic != topic || fp.Partition != partition || kerr.ErrorForCode(fp.ErrorCode) != nil {
				continue
			}
			return fp.RecordBatches, true
		}
	}
	return nil, false
}

// onlyMarkers checks records (a fetch answer from offset marker) for
// DuplicateMarkers: every offset from marker to end is a marker of pid, all
// of one type.
func onlyMarkers(records []byte, pid, marker, end int64) bool {
	return onlyMarkersOf(records, pid, -1, marker, end)
}

// onlyMarkersOf checks records (a fetch answer from offset marker) for
// MarkerCopies: every offset from marker to end is a marker of pid, all of
// type ct (of one type when ct is negative).
func onlyMarkersOf(records []byte, pid int64, ct batch.ControlType, marker, end int64) bool {
	s := batch.NewScanner(records)
	next := marker
	first := ct
	for next < end && s.Next() {
		b := s.Batch()
		if b.NextOffset() <= marker {
			continue
		}
		if b.BaseOffset() != next || !b.IsControl() || b.ProducerID() != pid {
			return false
		}
		got, err := batch.ControlRecord(b)
		if err != nil {
			return false
		}
		if first < 0 {
			first = got
		} else if got != first {
			return false
		}
		next = b.NextOffset()
	}
	return next == end
}
