package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/kafkalog"
)

// Field names one field of a v2 record batch, or its records section, in a
// raw batch comparison.
type Field string

// The fields DiffBatch compares, in wire order. FieldCoordinatorEpoch is the
// one part of a control record that is compared on its own (see DiffBatch).
const (
	FieldBaseOffset           Field = "base offset"
	FieldLength               Field = "batch length"
	FieldPartitionLeaderEpoch Field = "partition leader epoch"
	FieldMagic                Field = "magic"
	FieldCRC                  Field = "crc"
	FieldAttributes           Field = "attributes"
	FieldLastOffsetDelta      Field = "last offset delta"
	FieldBaseTimestamp        Field = "first timestamp"
	FieldMaxTimestamp         Field = "max timestamp"
	FieldProducerID           Field = "producer id"
	FieldProducerEpoch        Field = "producer epoch"
	FieldBaseSequence         Field = "base sequence"
	FieldRecordCount          Field = "record count"
	FieldRecords              Field = "records"
	FieldCoordinatorEpoch     Field = "coordinator epoch"
)

// Restamped are the fields a forwarded batch may change: kmirror writes its
// destination writer's producer id, epoch and base sequence (so the CRC is
// recomputed), and the destination leader stamps its own partition leader
// epoch. Every other field and the records section stay as the source has
// them.
var Restamped = []Field{FieldPartitionLeaderEpoch, FieldCRC, FieldProducerID, FieldProducerEpoch, FieldBaseSequence}

// MarkerRestamped are the fields of a transaction marker that the
// destination's transaction coordinator writes itself, beyond Restamped: the
// marker's time (a control batch's timestamps) and the coordinator's epoch.
// kmirror replays a marker with EndTxn; it never forwards the source's bytes.
var MarkerRestamped = []Field{FieldBaseTimestamp, FieldMaxTimestamp, FieldCoordinatorEpoch}

// BatchDiff is how one destination batch differs from the source batch at
// the same position of the log.
type BatchDiff struct {
	Source, Destination batch.Batch
	// Fields are the differing fields in wire order; empty when the two
	// batches are byte for byte identical.
	Fields []Field
}

// Unexpected returns the differing fields that a faithful mirror does not
// change: all but Restamped, and for a control batch also all but
// MarkerRestamped.
func (d BatchDiff) Unexpected() []Field {
	var out []Field
	for _, f := range d.Fields {
		if slices.Contains(Restamped, f) || d.Source.IsControl() && slices.Contains(MarkerRestamped, f) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// String describes the pair: the source batch and the fields that differ.
func (d BatchDiff) String() string {
	s := d.Source
	kind := "data"
	if s.IsControl() {
		kind = "control"
	}
	var fs []string
	for _, f := range d.Fields {
		fs = append(fs, string(f))
	}
	return fmt.Sprintf("source batch at offset %d (%s, %s, transactional %v, %s, %d records): differs in [%s]",
		s.BaseOffset(), kind, s.Compression(), s.IsTransactional(), s.TimestampType(), s.RecordCount(), strings.Join(fs, ", "))
}

// DiffBatch compares two batches field by field and returns the fields that
// differ, in wire order. The records section is compared byte for byte
// (compressed, as stored). For a control batch the coordinator epoch inside
// its control record is reported as FieldCoordinatorEpoch rather than as a
// records difference, so that a marker written by another coordinator
// still proves its control record (version, type) equal.
func DiffBatch(src, dst batch.Batch) []Field {
	var out []Field
	add := func(differ bool, f Field) {
		if differ {
			out = append(out, f)
		}
	}
	add(src.BaseOffset() != dst.BaseOffset(), FieldBaseOffset)
	add(src.Length() != dst.Length(), FieldLength)
	add(src.PartitionLeaderEpoch() != dst.PartitionLeaderEpoch(), FieldPartitionLeaderEpoch)
	add(src.Magic() != dst.Magic(), FieldMagic)
	add(src.CRC() != dst.CRC(), FieldCRC)
	add(src.Attributes() != dst.Attributes(), FieldAttributes)
	add(src.LastOffsetDelta() != dst.LastOffsetDelta(), FieldLastOffsetDelta)
	add(src.BaseTimestamp() != dst.BaseTimestamp(), FieldBaseTimestamp)
	add(src.MaxTimestamp() != dst.MaxTimestamp(), FieldMaxTimestamp)
	add(src.ProducerID() != dst.ProducerID(), FieldProducerID)
	add(src.ProducerEpoch() != dst.ProducerEpoch(), FieldProducerEpoch)
	add(src.BaseSequence() != dst.BaseSequence(), FieldBaseSequence)
	add(src.RecordCount() != dst.RecordCount(), FieldRecordCount)
	sr, dr := src.RecordsSection(), dst.RecordsSection()
	if src.IsControl() && dst.IsControl() {
		if se, de, ok := coordinatorEpochs(src, dst); ok {
			add(se != de, FieldCoordinatorEpoch)
			sr, dr = withoutCoordinatorEpoch(sr), withoutCoordinatorEpoch(dr)
		}
	}
	add(!bytes.Equal(sr, dr), FieldRecords)
	return out
}

// A control record's value is a version int16 and the coordinator epoch
// int32; it is followed by the record's header count, a one-byte varint 0.
// So in a control batch's records section (one uncompressed record) the
// epoch is the 4 bytes before the last one.
const coordinatorEpochFromEnd = 5

// coordinatorEpochs returns the coordinator epochs of two control batches,
// ok only when both records have the layout coordinatorEpochFromEnd assumes
// (checked against the decoded record, never guessed).
func coordinatorEpochs(src, dst batch.Batch) (se, de int32, ok bool) {
	epoch := func(b batch.Batch) (int32, bool) {
		recs, err := b.Records()
		if err != nil || len(recs) != 1 || len(recs[0].Value) != 6 || len(recs[0].Headers) != 0 {
			return 0, false
		}
		sec := b.RecordsSection()
		at := len(sec) - coordinatorEpochFromEnd
		if at < 2 || sec[len(sec)-1] != 0 || !bytes.Equal(sec[at-2:at+4], recs[0].Value) {
			return 0, false
		}
		return int32(binary.BigEndian.Uint32(sec[at:])), true
	}
	se, sok := epoch(src)
	de, dok := epoch(dst)
	return se, de, sok && dok
}

// withoutCoordinatorEpoch returns a copy of a control batch's records
// section with the coordinator epoch zeroed.
func withoutCoordinatorEpoch(sec []byte) []byte {
	out := bytes.Clone(sec)
	at := len(out) - coordinatorEpochFromEnd
	clear(out[at : at+4])
	return out
}

// ReadBatches reads topic/partition raw from its log start to its high
// watermark and returns copies of its batches in order (the first may start
// before the log start, when that falls inside a batch).
func ReadBatches(ctx context.Context, cl *kgo.Client, topic string, partition int32) (start, hw int64, batches []batch.Batch, err error) {
	start, hw, err = kafkalog.Bounds(ctx, cl, topic, partition)
	if err != nil {
		return 0, 0, nil, err
	}
	err = Scan(ctx, cl, topic, partition, start, hw, func(b batch.Batch) error {
		batches = append(batches, batch.Batch(bytes.Clone(b)))
		return nil
	})
	if err != nil {
		return 0, 0, nil, err
	}
	return start, hw, batches, nil
}

// DiffBatches pairs the batches of two logs in order and compares each pair
// (DiffBatch). It returns one BatchDiff per pair, or an error when the logs
// do not pair up: different numbers of batches.
func DiffBatches(src, dst []batch.Batch) ([]BatchDiff, error) {
	if len(src) != len(dst) {
		return nil, fmt.Errorf("source has %d batches, destination %d", len(src), len(dst))
	}
	out := make([]BatchDiff, len(src))
	for i := range src {
		out[i] = BatchDiff{Source: src[i], Destination: dst[i], Fields: DiffBatch(src[i], dst[i])}
	}
	return out, nil
}

// PartitionBatches reads the same partition raw on both clusters, from each
// log start to each high watermark, and compares it batch by batch: one
// BatchDiff per source batch. The log starts and high watermarks must match.
func PartitionBatches(ctx context.Context, src, dst *kgo.Client, topic string, partition int32) ([]BatchDiff, error) {
	ss, sh, sb, err := ReadBatches(ctx, src, topic, partition)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	ds, dh, db, err := ReadBatches(ctx, dst, topic, partition)
	if err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	if ss != ds || sh != dh {
		return nil, fmt.Errorf("%s[%d]: source log %d–%d, destination %d–%d", topic, partition, ss, sh, ds, dh)
	}
	diffs, err := DiffBatches(sb, db)
	if err != nil {
		return nil, fmt.Errorf("%s[%d]: %w", topic, partition, err)
	}
	return diffs, nil
}
