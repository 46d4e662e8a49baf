package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// EncodeOptions are the batch-level fields of Encode and EncodeControl.
// The zero value is a non-transactional, uncompressed CreateTime batch at
// offset 0 with partition leader epoch 0 and producer fields 0; set
// ProducerID, ProducerEpoch and BaseSequence to -1 for a batch from a
// producer that is not idempotent.
type EncodeOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Compression          Compression
	Transactional        bool
	// LogAppendTime sets the LogAppendTime timestamp type with this time as
	// MaxTimestamp. Zero leaves the batch CreateTime.
	LogAppendTime int64
	// DeleteHorizon sets the delete-horizon attribute with this time as
	// BaseTimestamp (record timestamps are then relative to it), as the log
	// cleaner does. Zero leaves it unset.
	DeleteHorizon int64
	// LastOffsetDelta overrides the derived one (last record offset minus
	// BaseOffset) to build batches compaction emptied or trimmed at the
	// end; it must not be below the derived value.
	LastOffsetDelta int32
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
}

// Encode builds a v2 batch holding records, for tests and benchmarks.
// Record offsets are absolute: each must be at least opts.BaseOffset and
// above the previous one (gaps model compaction). BaseTimestamp is the first
// record's timestamp and MaxTimestamp the largest, as producers write them.
// Records with nil Key/Value encode nulls.
func Encode(opts EncodeOptions, records []Record) (Batch, error) {
	return encode(opts, 0, records)
}

// EncodeControl builds a control batch holding one transaction marker of
// type t, as a transaction coordinator writes it: transactional and control
// attributes set, uncompressed, BaseSequence -1 regardless of opts, the
// marker at opts.BaseOffset with the given timestamp.
func EncodeControl(opts EncodeOptions, t ControlType, coordinatorEpoch int32, timestamp int64) (Batch, error) {
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0) // version 0
	key = binary.BigEndian.AppendUint16(key, uint16(t))
	value := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0) // version 0
	value = binary.BigEndian.AppendUint32(value, uint32(coordinatorEpoch))
	opts.Compression = CompressionNone
	opts.Transactional = true
	opts.BaseSequence = -1
	return encode(opts, attrControl, []Record{{Offset: opts.BaseOffset, Timestamp: timestamp, Key: key, Value: value}})
}

func encode(opts EncodeOptions, extraAttrs int16, records []Record) (Batch, error) {
	if opts.Compression < CompressionNone || opts.Compression > CompressionZstd {
		return nil, fmt.Errorf("encoding a batch: compression %d is not one Kafka defines", int8(opts.Compression))
	}
	attrs := int16(opts.Compression) | extraAttrs
	if opts.Transactional {
		attrs |= attrTransactional
	}
	var baseTimestamp, maxTimestamp int64 = -1, -1
	if len(records) > 0 {
		baseTimestamp, maxTimestamp = records[0].Timestamp, records[0].Timestamp
	}
	var lastDelta int32
	prev := opts.BaseOffset - 1
	for i, r := range records {
		if r.Offset <= prev {
			return nil, fmt.Errorf("encoding a batch: record %d has offset %d, not above %d", i, r.Offset, prev)
		}
		if d := r.Offset - opts.BaseOffset; d > math.MaxInt32 {
			return nil, fmt.Errorf("encoding a batch: record %d is %d offsets past the base, beyond an int32 delta", i, d)
		}
		prev, lastDelta = r.Offset, int32(r.Offset-opts.BaseOffset)
		maxTimestamp = max(maxTimestamp, r.Timestamp)
	}
	if opts.LastOffsetDelta != 0 {
		if opts.LastOffsetDelta < lastDelta {
			return nil, fmt.Errorf("encoding a batch: LastOffsetDelta %d is below the last record's delta %d", opts.LastOffsetDelta, lastDelta)
		}
		lastDelta = opts.LastOffsetDelta
	}
	if opts.DeleteHorizon != 0 {
		attrs |= attrDeleteHorizon
		baseTimestamp = opts.DeleteHorizon
	}
	if opts.LogAppendTime != 0 {
		attrs |= attrTimestampType
		maxTimestamp = opts.LogAppendTime
	}

	var raw []byte
	for _, r := range records {
		raw = appendRecord(raw, r, r.Offset-opts.BaseOffset, r.Timestamp-baseTimestamp)
	}

	b := make([]byte, HeaderSize, HeaderSize+len(raw)+64)
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(opts.BaseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(opts.PartitionLeaderEpoch))
	b[offMagic] = Magic
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTimestamp))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTimestamp))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(opts.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(opts.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(opts.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(records)))
	b, err := compress(b, opts.Compression, raw)
	if err != nil {
		return nil, fmt.Errorf("encoding a batch: %w", err)
	}
	if len(b)-LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("encoding a batch: %d bytes exceed the int32 batch length", len(b))
	}
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	out := Batch(b)
	binary.BigEndian.PutUint32(out[offCRC:], out.ComputeCRC())
	return out, nil
}

// appendRecord appends one record in the v2 wire form: a varint length,
// then attributes, timestamp delta, offset delta, key, value and headers.
func appendRecord(dst []byte, r Record, offsetDelta, timestampDelta int64) []byte {
	var body [binary.MaxVarintLen64*2 + 1]byte
	body[0] = byte(r.Attributes)
	n := 1
	n += binary.PutVarint(body[n:], timestampDelta)
	n += binary.PutVarint(body[n:], offsetDelta)
	size := n + nullableSize(r.Key) + nullableSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintSize(int64(len(h.Key))) + len(h.Key) + nullableSize(h.Value)
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, body[:n]...)
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullable(dst, h.Value)
	}
	return dst
}

func appendNullable(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(v))), v...)
}

func nullableSize(v []byte) int {
	if v == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(v))) + len(v)
}

func varintSize(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}
