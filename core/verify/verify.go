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
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/kafkalog"
)

// Entry is one offset of a log: a data record or a control marker.
type Entry = kafkalog.Entry

// Scan, NewReader, Entries and DiffEntry are kafkalog's, for the tests that
// use verify alone.
var (
	Scan      = kafkalog.Scan
	NewReader = kafkalog.NewReader
	Entries   = kafkalog.Entries
	DiffEntry = kafkalog.DiffEntry
)

// Log is a partition's content from its log start to its high watermark.
type Log struct {
	LogStart      int64
	HighWatermark int64
	Entries       []Entry
}

// ReadLog reads topic/partition from its log start to its high watermark.
func ReadLog(ctx context.Context, cl *kgo.Client, topic string, partition int32) (*Log, error) {
	start, hw, err := kafkalog.Bounds(ctx, cl, topic, partition)
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
