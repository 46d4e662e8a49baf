package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Record is one decoded record of a batch. Key, Value and header values are
// nil for a null field and non-nil (possibly empty) otherwise.
type Record struct {
	// Offset is the record's absolute offset (BaseOffset + offset delta).
	Offset int64
	// Timestamp is BaseTimestamp + the record's delta, or the batch's
	// MaxTimestamp for LogAppendTime batches (as Kafka consumers report).
	Timestamp int64
	// Attributes is the record-level attributes byte (unused by Kafka
	// today, kept so a round trip is exact).
	Attributes int8
	Key        []byte
	Value      []byte
	Headers    []Header
}

// Header is one record header. Kafka allows a null value but not a null key.
type Header struct {
	Key   string
	Value []byte
}

// minRecordSize is the smallest encoded record: one byte each for length,
// attributes, timestamp delta, offset delta, key length, value length and
// header count.
const minRecordSize = 7

// Records decodes every record of b, decompressing the records section when
// needed. It is for verification, offset maps and tests, not the forward
// path. Key, Value and header values alias b for uncompressed batches and a
// fresh decompressed buffer otherwise.
//
// The record count must match RecordCount and the records must fill the
// section exactly. Errors wrap ErrCorruptBatch or ErrDecompressTooLarge.
// The records section may decompress to MaxDecompressedBytes; callers that
// know a tighter bound use RecordsWithin.
func (b Batch) Records() ([]Record, error) { return b.AppendRecords(nil) }

// RecordsWithin is Records within a memory bound of limit bytes (at most
// MaxDecompressedBytes): the decompressed records section plus the Record
// and Header values decoded from it. A batch that needs more is an error
// wrapping ErrDecompressTooLarge, found before more than a small multiple of
// limit is allocated, however small the compressed batch: decompression
// stops at the bound, and the record count (from the header) is checked
// against it before any record is decoded.
func (b Batch) RecordsWithin(limit int) ([]Record, error) {
	return b.AppendRecordsWithin(nil, limit)
}

// AppendRecords is Records appending to dst, so a caller can reuse a slice.
func (b Batch) AppendRecords(dst []Record) ([]Record, error) {
	return b.AppendRecordsWithin(dst, MaxDecompressedBytes)
}

// Sizes charged against a decoding bound for each decoded record and
// header: a small record (7 bytes on the wire) takes far more decoded.
const (
	recordCost = int64(unsafe.Sizeof(Record{}))
	headerCost = int64(unsafe.Sizeof(Header{}))
)

// AppendRecordsWithin is RecordsWithin appending to dst.
func (b Batch) AppendRecordsWithin(dst []Record, limit int) ([]Record, error) {
	limit = min(max(limit, 0), MaxDecompressedBytes)
	data, err := decompress(b.Compression(), b.RecordsSection(), limit)
	if err != nil {
		if errors.Is(err, ErrDecompressTooLarge) {
			return dst, fmt.Errorf("offsets %d to %d: %s records section of %d bytes decompresses past %d bytes: %w",
				b.BaseOffset(), b.LastOffset(), b.Compression(), len(b)-HeaderSize, limit, err)
		}
		return dst, fmt.Errorf("base offset %d: decompressing %s records: %v: %w",
			b.BaseOffset(), b.Compression(), err, ErrCorruptBatch)
	}
	count := b.RecordCount()
	if count < 0 || int64(count) > int64(len(data)/minRecordSize) {
		return dst, fmt.Errorf("base offset %d: record count %d does not fit %d bytes of records: %w",
			b.BaseOffset(), count, len(data), ErrCorruptBatch)
	}
	// budget is what the decoded records may still take.
	budget := int64(limit) - int64(count)*recordCost
	if b.Compression() != CompressionNone {
		budget -= int64(len(data))
	}
	tooLarge := func() error {
		return fmt.Errorf("offsets %d to %d: %d records decode past %d bytes (%d bytes of records, %d bytes per decoded record and %d per header): %w",
			b.BaseOffset(), b.LastOffset(), count, limit, len(data), recordCost, headerCost, ErrDecompressTooLarge)
	}
	if budget < 0 {
		return dst, tooLarge()
	}
	var (
		base          = b.BaseOffset()
		baseTimestamp = b.BaseTimestamp()
		appendTime    = b.TimestampType() == LogAppendTime
		headers       []Header // one backing array for the batch's headers
	)
	dst = growRecords(dst, int(count))
	for i := range int(count) {
		r := reader{src: data}
		length := r.varint32()
		if r.bad || length < 0 || int64(length) > int64(len(r.src)) {
			return dst, b.recordErr(i, "record length is missing or beyond the data")
		}
		r.src, data = r.src[:length], r.src[length:]

		rec := Record{Attributes: int8(r.byte())}
		tsDelta := r.varint64()
		rec.Offset = base + int64(r.varint32())
		rec.Timestamp = baseTimestamp + tsDelta
		if appendTime {
			rec.Timestamp = b.MaxTimestamp()
		}
		rec.Key = r.nullableBytes()
		rec.Value = r.nullableBytes()
		n := r.varint32()
		if n < 0 || int64(n) > int64(len(r.src)) {
			return dst, b.recordErr(i, fmt.Sprintf("header count %d is negative or beyond the record", n))
		}
		if n > 0 {
			if cap(headers)-len(headers) < int(n) {
				c := max(int(n), 2*cap(headers))
				if budget -= int64(c) * headerCost; budget < 0 {
					return dst, tooLarge()
				}
				headers = make([]Header, 0, c)
			}
			start := len(headers)
			for range int(n) {
				key := r.nullableBytes()
				if key == nil && !r.bad {
					return dst, b.recordErr(i, "header key is null")
				}
				if budget -= int64(len(key)); budget < 0 {
					return dst, tooLarge()
				}
				headers = append(headers, Header{Key: string(key), Value: r.nullableBytes()})
			}
			rec.Headers = headers[start:len(headers):len(headers)]
		}
		if r.bad {
			return dst, b.recordErr(i, "record is truncated or has an invalid varint")
		}
		if len(r.src) != 0 {
			return dst, b.recordErr(i, fmt.Sprintf("%d bytes left inside the record after its last header", len(r.src)))
		}
		dst = append(dst, rec)
	}
	if len(data) != 0 {
		return dst, fmt.Errorf("base offset %d: %d bytes follow the %d records the header counts: %w",
			b.BaseOffset(), len(data), count, ErrCorruptBatch)
	}
	return dst, nil
}

func (b Batch) recordErr(i int, what string) error {
	return fmt.Errorf("base offset %d, record %d of %d: %s: %w", b.BaseOffset(), i, b.RecordCount(), what, ErrCorruptBatch)
}

// growRecords makes room for n more records.
func growRecords(dst []Record, n int) []Record {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	grown := make([]Record, len(dst), len(dst)+n)
	copy(grown, dst)
	return grown
}

// reader decodes Kafka's record fields. A failed read sets bad and yields
// zero values, so a record is checked once at its end.
type reader struct {
	src []byte
	bad bool
}

func (r *reader) byte() byte {
	if len(r.src) == 0 {
		r.bad = true
		return 0
	}
	v := r.src[0]
	r.src = r.src[1:]
	return v
}

// varint64 reads a zig-zag varint (Kafka's varlong).
func (r *reader) varint64() int64 {
	v, n := binary.Varint(r.src)
	if n <= 0 {
		r.bad = true
		r.src = nil
		return 0
	}
	r.src = r.src[n:]
	return v
}

// varint32 reads a zig-zag varint that Kafka defines as an int32.
func (r *reader) varint32() int32 {
	v := r.varint64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.bad = true
		return 0
	}
	return int32(v)
}

// nullableBytes reads a varint length (-1 for null) and that many bytes.
func (r *reader) nullableBytes() []byte {
	n := r.varint32()
	switch {
	case r.bad:
		return nil
	case n == -1:
		return nil
	case n < -1 || int64(n) > int64(len(r.src)):
		r.bad = true
		return nil
	}
	v := r.src[:n:n]
	r.src = r.src[n:]
	return v
}

// ControlType is the type of a control record (a transaction marker on a
// data partition).
type ControlType int16

const (
	// ControlAbort marks the end of an aborted transaction.
	ControlAbort ControlType = 0
	// ControlCommit marks the end of a committed transaction.
	ControlCommit ControlType = 1
)

// String names the control type as Kafka does.
func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// ErrNotControl: ControlRecord was given a data batch.
var ErrNotControl = errors.New("record batch is not a control batch")

// ErrNoControlRecord: a control batch holds no record. The log cleaner leaves
// such empty batches behind after removing a transaction marker (to keep the
// producer's state); there is no marker to replay.
var ErrNoControlRecord = errors.New("control batch holds no control record (removed by compaction)")

// ControlRecord returns the type of the control record of a control batch.
// A control record's key is a version int16 and a type int16 (0 ABORT, 1
// COMMIT; other types exist only on KRaft metadata logs and are returned as
// they are for the caller to reject). Control batches are never compressed
// and hold one record. Errors wrap ErrNotControl, ErrNoControlRecord or
// ErrCorruptBatch.
func ControlRecord(b Batch) (ControlType, error) {
	if !b.IsControl() {
		return 0, fmt.Errorf("base offset %d: %w", b.BaseOffset(), ErrNotControl)
	}
	if b.RecordCount() == 0 {
		return 0, fmt.Errorf("base offset %d: %w", b.BaseOffset(), ErrNoControlRecord)
	}
	if b.Compression() != CompressionNone || b.RecordCount() != 1 {
		return 0, fmt.Errorf("base offset %d: control batch with %s compression and %d records; Kafka writes one uncompressed record: %w",
			b.BaseOffset(), b.Compression(), b.RecordCount(), ErrCorruptBatch)
	}
	var one [1]Record
	recs, err := b.AppendRecords(one[:0])
	if err != nil {
		return 0, err
	}
	key := recs[0].Key
	if len(key) < 4 {
		return 0, fmt.Errorf("base offset %d: control record key has %d bytes, need 4 (version, type): %w",
			b.BaseOffset(), len(key), ErrCorruptBatch)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, fmt.Errorf("base offset %d: control record key version %d is negative: %w",
			b.BaseOffset(), v, ErrCorruptBatch)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}
