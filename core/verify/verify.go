// Package verify compares a mirrored partition's destination log with its
// source log, record by record: offset, key, value, headers, timestamp,
// control markers and transactional visibility (what a read_committed consumer
// would see). The embedded demo and the end-to-end tests use it; operators can
// use it through the demo's summary.
//
// It reads both logs raw (Fetch at read_uncommitted, batches decoded with
// core/batch), so control batches and aborted records are compared too.
package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"

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

// Log is a partition's content from its log start to its high watermark.
type Log struct {
	LogStart      int64
	HighWatermark int64
	Entries       []Entry
}

// ReadLog reads topic/partition from its log start to its high watermark.
func ReadLog(ctx context.Context, cl *kgo.Client, topic string, partition int32) (*Log, error) {
	start, hw, err := bounds(ctx, cl, topic, partition)
	if err != nil {
		return nil, err
	}
	log := &Log{LogStart: start, HighWatermark: hw}
	open := map[int64][]int{} // producer id → indexes of its pending transactional records
	err = Scan(ctx, cl, topic, partition, start, hw, func(b batch.Batch) error {
		return log.add(b, open, start, hw)
	})
	if err != nil {
		return nil, err
	}
	return log, nil
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
}

// NewReader returns a Reader of topic/partition over [from, to). to must not
// be beyond the high watermark.
func NewReader(cl *kgo.Client, topic string, partition int32, from, to int64) *Reader {
	return &Reader{cl: cl, topic: topic, partition: partition, offset: from, to: to, leader: -1}
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
		leader, topicID, err := leaderOf(ctx, r.cl, topic, partition)
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

func (l *Log) add(b batch.Batch, open map[int64][]int, from, hw int64) error {
	pid := b.ProducerID()
	if b.IsControl() {
		t, err := batch.ControlRecord(b)
		if err != nil {
			return err
		}
		l.Entries = append(l.Entries, Entry{Offset: b.BaseOffset(), Control: true, Marker: t, Txn: true, Timestamp: b.MaxTimestamp()})
		for _, i := range open[pid] {
			l.Entries[i].Visible = t == batch.ControlCommit
		}
		delete(open, pid)
		return nil
	}
	recs, err := b.Records()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Offset < from || r.Offset >= hw {
			continue
		}
		e := Entry{Offset: r.Offset, Txn: b.IsTransactional(), Visible: !b.IsTransactional(), Timestamp: r.Timestamp,
			Key: clone(r.Key), Value: clone(r.Value), Headers: cloneHeaders(r.Headers)}
		if e.Txn {
			open[pid] = append(open[pid], len(l.Entries))
		}
		l.Entries = append(l.Entries, e)
	}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneHeaders(hs []batch.Header) []batch.Header {
	out := make([]batch.Header, len(hs))
	for i, h := range hs {
		out[i] = batch.Header{Key: h.Key, Value: clone(h.Value)}
	}
	return out
}

// Diff compares two logs entry by entry (preserve mode: offsets must be equal)
// and returns a description of the first difference, or "" when identical.
func Diff(src, dst *Log) string {
	if src.LogStart != dst.LogStart {
		return fmt.Sprintf("log start offset: source %d, destination %d", src.LogStart, dst.LogStart)
	}
	if src.HighWatermark != dst.HighWatermark {
		return fmt.Sprintf("high watermark: source %d, destination %d", src.HighWatermark, dst.HighWatermark)
	}
	if len(src.Entries) != len(dst.Entries) {
		return fmt.Sprintf("entries: source %d, destination %d", len(src.Entries), len(dst.Entries))
	}
	for i := range src.Entries {
		if d := DiffEntry(src.Entries[i], dst.Entries[i], true); d != "" {
			return d
		}
	}
	return ""
}

// DiffEntry compares two entries; with offsets false, their offsets may differ
// (map mode).
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

// DiffMapped compares a partition mirrored in map mode: every source entry
// with the destination entry at the offset lookup gives (an offset map's
// Lookup), offsets aside. It returns "" when every entry is mapped and
// matches, else the first difference.
func DiffMapped(src, dst *Log, lookup func(src int64) (int64, bool)) string {
	at := make(map[int64]Entry, len(dst.Entries))
	for _, e := range dst.Entries {
		at[e.Offset] = e
	}
	for _, se := range src.Entries {
		do, ok := lookup(se.Offset)
		if !ok {
			return fmt.Sprintf("source offset %d is not in the offset map", se.Offset)
		}
		de, ok := at[do]
		if !ok {
			return fmt.Sprintf("source offset %d maps to destination offset %d, which holds nothing", se.Offset, do)
		}
		if diff := DiffEntry(se, de, false); diff != "" {
			return fmt.Sprintf("source offset %d, destination offset %d: %s", se.Offset, do, diff)
		}
	}
	return ""
}

// Partition reads the same partition on both clusters and compares them.
func Partition(ctx context.Context, src, dst *kgo.Client, topic string, partition int32) (srcLog *Log, diff string, err error) {
	s, err := ReadLog(ctx, src, topic, partition)
	if err != nil {
		return nil, "", fmt.Errorf("source: %w", err)
	}
	d, err := ReadLog(ctx, dst, topic, partition)
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	return s, Diff(s, d), nil
}

func leaderOf(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int32, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, [16]byte{}, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return 0, [16]byte{}, fmt.Errorf("metadata for %s: %w", topic, err)
		}
		for _, p := range rt.Partitions {
			if p.Partition == partition {
				if p.Leader < 0 {
					return 0, [16]byte{}, fmt.Errorf("%s[%d] has no leader", topic, partition)
				}
				return p.Leader, rt.TopicID, nil
			}
		}
	}
	return 0, [16]byte{}, fmt.Errorf("%s[%d] not found in metadata", topic, partition)
}

// errNoOffset is returned when ListOffsets answers without the partition.
var errNoOffset = errors.New("no offset in ListOffsets response")

func bounds(ctx context.Context, cl *kgo.Client, topic string, partition int32) (start, hw int64, err error) {
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
