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

// Marker is a transaction marker found on a destination partition.
type Marker struct {
	Offset     int64
	ProducerID int64
	Type       batch.ControlType
}

// Markers returns the transaction markers destination partition
// topic/partition holds from offset from to end, in offset order; ok is
// false when anything else lies there (a data record, a gap) or the read
// fails.
func (c *Client) Markers(ctx context.Context, topic string, partition int32, from, end int64) (ms []Marker, ok bool) {
	records, ok := c.fetchFrom(ctx, topic, partition, from)
	if !ok {
		return nil, false
	}
	return markersIn(records, from, end)
}

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
// from offset from to end, only markers of producer pid of control type ct
// (of one type when ct is negative): copies of a marker the destination's
// transaction coordinator wrote again, found where a later append expected
// its own offset. Anything else there, or a read that fails, is not such a
// case (false).
func (c *Client) MarkerCopies(ctx context.Context, topic string, partition int32, pid int64, ct batch.ControlType, from, end int64) bool {
	ms, ok := c.Markers(ctx, topic, partition, from, end)
	return ok && Copies(ms, pid, ct)
}

// Copies reports whether ms holds at least one marker and only markers of
// producer pid of type ct (of one type when ct is negative).
func Copies(ms []Marker, pid int64, ct batch.ControlType) bool {
	if len(ms) == 0 {
		return false
	}
	if ct < 0 {
		ct = ms[0].Type
	}
	for _, m := range ms {
		if m.ProducerID != pid || m.Type != ct {
			return false
		}
	}
	return true
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

// onlyMarkersOf checks records (a fetch answer from offset from) for
// MarkerCopies.
func onlyMarkersOf(records []byte, pid int64, ct batch.ControlType, from, end int64) bool {
	ms, ok := markersIn(records, from, end)
	return ok && Copies(ms, pid, ct)
}

// markersIn returns the markers of records (a fetch answer from offset
// from) at offsets from to end; ok is false when an offset there holds
// anything else or the answer ends before end.
func markersIn(records []byte, from, end int64) ([]Marker, bool) {
	s := batch.NewScanner(records)
	next := from
	var ms []Marker
	for next < end && s.Next() {
		b := s.Batch()
		if b.NextOffset() <= from {
			continue
		}
		if b.BaseOffset() != next || !b.IsControl() {
			return nil, false
		}
		ct, err := batch.ControlRecord(b)
		if err != nil {
			return nil, false
		}
		ms = append(ms, Marker{Offset: next, ProducerID: b.ProducerID(), Type: ct})
		next = b.NextOffset()
	}
	return ms, next == end
}
