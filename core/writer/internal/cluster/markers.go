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
	leader, err := c.Leader(ctx, topic, partition, true)
	if err != nil {
		return false
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
	rp.FetchOffset = marker
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.Request(ctx, leader, &Pinned{Request: req, Max: fetchVersion})
	if err != nil {
		return false
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, fp := range t.Partitions {
			if t.Topic != topic || fp.Partition != partition || kerr.ErrorForCode(fp.ErrorCode) != nil {
				continue
			}
			return onlyMarkers(fp.RecordBatches, pid, marker, end)
		}
	}
	return false
}

// onlyMarkers checks records (a fetch answer from offset marker) for
// DuplicateMarkers: every offset from marker to end is a marker of pid, all
// of one type.
func onlyMarkers(records []byte, pid, marker, end int64) bool {
	s := batch.NewScanner(records)
	next := marker
	var first batch.ControlType
	for next < end && s.Next() {
		b := s.Batch()
		if b.NextOffset() <= marker {
			continue
		}
		if b.BaseOffset() != next || !b.IsControl() || b.ProducerID() != pid {
			return false
		}
		ct, err := batch.ControlRecord(b)
		if err != nil {
			return false
		}
		if next == marker {
			first = ct
		} else if ct != first {
			return false
		}
		next = b.NextOffset()
	}
	return next == end
}
