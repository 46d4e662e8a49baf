// Package kafkalog reads a partition's log raw, the way the engine and the
// tests need it: its bounds (log start, high watermark), its leader, its
// batches from one offset to another in bounded memory (Reader, Scan), the
// batch holding an offset (FirstBatchAt), and the entries (records or
// marker) of one batch with their comparison (Entries, DiffEntry). It is the
// one place that hand-writes these Fetch, ListOffsets and Metadata requests;
// core/mirror, core/verify and the end-to-end tests use it.
package kafkalog

import (
	"time"

	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/core/internal/coalesce"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
)

// Entry is one offset of a log: a data record or a control marker.
type Entry struct {
	Offset    int64
	Control   bool
	Marker    batch.ControlType // for control entries
	Txn       bool              // written inside a transaction
	Visible   bool              // seen by a read_committed consumer
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []batch.Header
}

// Scan reads topic/partition raw (read_uncommitted, control batches
// included) from offset from up to offset to (exclusive), calling fn with
// every batch that holds an offset in that range, in order. The first batch
// may start before from (brokers answer with the batch holding the fetch
// offset). to must not be beyond the high watermark.
func Scan(ctx context.Context, cl *kgo.Client, topic string, partition int32, from, to int64, fn func(batch.Batch) error) error {
	r := NewReader(cl, topic, partition, from, to)
	for {
		b, ok, err := r.Next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := fn(b); err != nil {
			return fmt.Errorf("%s[%d]: %w", topic, partition, err)
		}
	}
}

// Reader reads a partition raw, batch by batch, from one offset up to
// another (exclusive), fetching as it goes: it holds one fetch response at a
// time, so a long stretch is read in bounded memory. Scan is its callback
// form.
type Reader struct {
	cl        *kgo.Client
	topic     string
	partition int32
	offset    int64 // next offset to deliver
	to        int64
	leader    int32 // -1: look it up
	topicID   [16]byte
	pending   []batch.Batch
	leaders   *LeaderBatcher // nil: one Metadata request per lookup
}

// NewReader returns a Reader of topic/partition over [from, to). to must not
// be beyond the high watermark.
func NewReader(cl *kgo.Client, topic string, partition int32, from, to int64) *Reader {
	return &Reader{cl: cl, topic: topic, partition: partition, offset: from, to: to, leader: -1}
}

// WithLeaders makes r look its partition's leader up through b, which
// gathers the lookups of many partitions of a topic into one Metadata
// request, and returns r.
func (r *Reader) WithLeaders(b *LeaderBatcher) *Reader {
	r.leaders = b
	return r
}

// Next returns the next batch holding an offset in the range (the first one
// may start before it), or ok false at the end of the range.
func (r *Reader) Next(ctx context.Context) (b batch.Batch, ok bool, err error) {
	for {
		if r.offset >= r.to {
			return nil, false, nil
		}
		for len(r.pending) > 0 {
			b, r.pending = r.pending[0], r.pending[1:]
			if b.NextOffset() <= r.offset {
				continue
			}
			r.offset = b.NextOffset()
			return b, true, nil
		}
		if err := r.fetch(ctx); err != nil {
			return nil, false, err
		}
	}
}

func (r *Reader) fetch(ctx context.Context) error {
	topic, partition, offset := r.topic, r.partition, r.offset
	if r.leader < 0 {
		lookup := Leader
		if r.leaders != nil {
			lookup = func(ctx context.Context, _ *kgo.Client, topic string, partition int32) (int32, [16]byte, error) {
				return r.leaders.Leader(ctx, topic, partition)
			}
		}
		leader, topicID, err := lookup(ctx, r.cl, topic, partition)
		if err != nil {
			return err
		}
		r.leader, r.topicID = leader, topicID
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 16 << 20
	req.IsolationLevel = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = r.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 8 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl.Broker(int(r.leader)))
	if err != nil {
		r.leader = -1
		return fmt.Errorf("fetching %s[%d] at %d: %w", topic, partition, offset, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetching %s[%d] at %d: %w", topic, partition, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("fetching %s[%d]: unexpected response shape", topic, partition)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		r.leader = -1
		return fmt.Errorf("fetching %s[%d] at %d: %w", topic, partition, offset, err)
	}
	batches, _, err := batch.Split(p.RecordBatches)
	if err != nil {
		return fmt.Errorf("%s[%d] at %d: %w", topic, partition, offset, err)
	}
	if len(batches) == 0 {
		return fmt.Errorf("%s[%d]: no batch at offset %d below offset %d", topic, partition, offset, r.to)
	}
	r.pending = batches
	return nil
}

// Leader returns the leader of topic/partition and the topic id, from
// Metadata.
func Leader(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int32, [16]byte, error) {
	leaders, err := topicLeaders(ctx, cl, topic, []int32{partition})
	if err != nil {
		return 0, [16]byte{}, err
	}
	l := leaders[partition]
	return l.Value.leader, l.Value.topicID, l.Err
}

type leaderOf struct {
	leader  int32
	topicID [16]byte
}

// topicLeaders reads the leaders of parts of topic from one Metadata
// request for the topic. A partition without a leader, or missing from the
// answer, gets an error.
func topicLeaders(ctx context.Context, cl *kgo.Client, topic string, parts []int32) (map[int32]coalesce.Result[leaderOf], error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	out := make(map[int32]coalesce.Result[leaderOf], len(parts))
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return nil, fmt.Errorf("metadata for %s: %w", topic, err)
		}
		for _, p := range rt.Partitions {
			out[p.Partition] = coalesce.Result[leaderOf]{Value: leaderOf{p.Leader, rt.TopicID}}
		}
	}
	asked := make(map[int32]coalesce.Result[leaderOf], len(parts))
	for _, p := range parts {
		r, ok := out[p]
		switch {
		case !ok:
			r.Err = fmt.Errorf("%s[%d] not found in metadata", topic, p)
		case r.Value.leader < 0:
			r.Err = fmt.Errorf("%s[%d] has no leader", topic, p)
		}
		asked[p] = r
	}
	return asked, nil
}

// LeaderBatcher answers Leader for many partitions of a cluster at once:
// the lookups for partitions of one topic that arrive together are
// gathered into one Metadata request for the topic, instead of one each.
// A lookup per partition costs a Metadata response of the whole topic:
// with 10,000 partitions stopping at once that is 10,000 responses of
// 10,000 partitions each, which no broker answers in time. An answer
// always comes from a request sent after it was asked for: nothing is
// cached.
type LeaderBatcher struct {
	g *coalesce.Group[string, int32, leaderOf]
}

// NewLeaderBatcher returns a LeaderBatcher over cl that gathers each batch
// for window (BoundsWindow suits it).
func NewLeaderBatcher(cl *kgo.Client, window time.Duration) *LeaderBatcher {
	return &LeaderBatcher{g: coalesce.New(window, func(ctx context.Context, topic string, parts []int32) (map[int32]coalesce.Result[leaderOf], error) {
		return topicLeaders(ctx, cl, topic, parts)
	})}
}

// Leader returns the leader of topic/partition and the topic id, as Leader
// does, from a Metadata request sent after the call.
func (b *LeaderBatcher) Leader(ctx context.Context, topic string, partition int32) (int32, [16]byte, error) {
	v, err := b.g.Get(ctx, topic, partition)
	if err != nil {
		return 0, [16]byte{}, err
	}
	return v.leader, v.topicID, nil
}

// Batches returns how many Metadata requests the LeaderBatcher sent.
func (b *LeaderBatcher) Batches() int64 { return b.g.Calls() }

// errNoOffset is returned when ListOffsets answers without the partition.
var errNoOffset = errors.New("no offset in ListOffsets response")

// Bounds returns the log start offset and the high watermark of
// topic/partition (ListOffsets, routed to the leader by the client).
func Bounds(ctx context.Context, cl *kgo.Client, topic string, partition int32) (start, hw int64, err error) {
	get := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = partition
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.Partition == partition {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return 0, err
					}
					return p.Offset, nil
				}
			}
		}
		return 0, errNoOffset
	}
	if start, err = get(-2); err != nil {
		return 0, 0, fmt.Errorf("log start of %s[%d]: %w", topic, partition, err)
	}
	if hw, err = get(-1); err != nil {
		return 0, 0, fmt.Errorf("high watermark of %s[%d]: %w", topic, partition, err)
	}
	return start, hw, nil
}

// Entries decodes one raw batch into entries (records, or its marker), with
// their offsets. Visible is left false: visibility depends on the markers
// that follow, which one batch does not show.
func Entries(b batch.Batch) ([]Entry, error) {
	if b.IsControl() {
		t, err := batch.ControlRecord(b)
		if errors.Is(err, batch.ErrNoControlRecord) {
			return nil, nil // compaction removed the marker's record
		}
		if err != nil {
			return nil, err
		}
		return []Entry{{Offset: b.BaseOffset(), Control: true, Marker: t, Txn: true, Timestamp: b.MaxTimestamp()}}, nil
	}
	recs, err := b.Records()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(recs))
	for i, r := range recs {
		out[i] = Entry{Offset: r.Offset, Txn: b.IsTransactional(), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	return out, nil
}

// DiffEntry compares two entries and says how they differ, or "" when they
// do not; with offsets false, their offsets may differ (map mode).
func DiffEntry(s, d Entry, offsets bool) string {
	at := fmt.Sprintf("source offset %d", s.Offset)
	switch {
	case offsets && s.Offset != d.Offset:
		return fmt.Sprintf("%s: destination has offset %d", at, d.Offset)
	case s.Control != d.Control || s.Marker != d.Marker:
		return fmt.Sprintf("%s: control %v/%v marker %v/%v", at, s.Control, d.Control, s.Marker, d.Marker)
	case s.Control:
		return ""
	case s.Txn != d.Txn:
		return fmt.Sprintf("%s: transactional %v, destination %v", at, s.Txn, d.Txn)
	case s.Visible != d.Visible:
		return fmt.Sprintf("%s: read_committed visibility %v, destination %v", at, s.Visible, d.Visible)
	case s.Timestamp != d.Timestamp:
		return fmt.Sprintf("%s: timestamp %d, destination %d", at, s.Timestamp, d.Timestamp)
	case !bytes.Equal(s.Key, d.Key) || (s.Key == nil) != (d.Key == nil):
		return fmt.Sprintf("%s: key %q, destination %q", at, s.Key, d.Key)
	case !bytes.Equal(s.Value, d.Value) || (s.Value == nil) != (d.Value == nil):
		return fmt.Sprintf("%s: value differs (%d bytes, destination %d bytes)", at, len(s.Value), len(d.Value))
	case len(s.Headers) != len(d.Headers):
		return fmt.Sprintf("%s: %d headers, destination %d", at, len(s.Headers), len(d.Headers))
	}
	for i := range s.Headers {
		if s.Headers[i].Key != d.Headers[i].Key || !bytes.Equal(s.Headers[i].Value, d.Headers[i].Value) {
			return fmt.Sprintf("%s: header %d differs", at, i)
		}
	}
	return ""
}

// FirstBatchAt returns the base offset of the batch of topic/partition that
// holds offset (a log start may fall inside a batch); offset itself when it
// is at or beyond end (the high watermark).
func FirstBatchAt(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset, end int64) (int64, error) {
	if offset >= end {
		return offset, nil
	}
	b, ok, err := NewReader(cl, topic, partition, offset, end).Next(ctx)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%s[%d]: no batch at offset %d below the high watermark %d", topic, partition, offset, end)
	}
	return b.BaseOffset(), nil
}
