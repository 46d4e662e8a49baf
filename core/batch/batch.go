package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Sentinel errors. Every error this package returns about a batch's bytes
// wraps exactly one of them, so callers can branch with errors.Is.
var (
	// ErrCorruptBatch: the bytes are not a well-formed v2 record batch (bad
	// length, CRC mismatch, malformed records). Refetching may help if the
	// damage happened in transit; otherwise the source log is damaged at
	// that offset.
	ErrCorruptBatch = errors.New("corrupt record batch")

	// ErrUnsupportedMagic: the batch uses message format v0 or v1 (magic 0
	// or 1, written by Kafka before 0.11 or with an old
	// log.message.format.version), or an unknown future magic. kmirror
	// forwards only v2 batches.
	ErrUnsupportedMagic = errors.New("unsupported record batch magic: kmirror mirrors only message format v2 (Kafka 0.11+)")
)

// Byte offsets of the v2 batch header fields (see the package doc).
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of a v2 batch header, records excluded: the
	// smallest possible batch (one holding no record).
	HeaderSize = 61

	// LogOverhead is the size of baseOffset plus batchLength, the prefix
	// every message format shares; batchLength counts the bytes after it.
	LogOverhead = 12

	// crcStart is where the CRC-32C coverage begins (the attributes field).
	crcStart = offAttributes
)

// Magic is the only message format version this package handles.
const Magic = 2

// castagnoli is the CRC-32C table, built once. hash/crc32 recognises this
// table and uses the CPU's CRC32 instruction where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Attribute bits.
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 1 << 3
	attrTransactional   = 1 << 4
	attrControl         = 1 << 5
	attrDeleteHorizon   = 1 << 6
)

// Compression is the codec of a batch's records (attribute bits 0-2).
type Compression int8

// Codecs Kafka defines. Values 5-7 are not defined; Records rejects them.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// String returns Kafka's name for the codec (the compression.type value).
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// TimestampType says who set the records' timestamps (attribute bit 3).
type TimestampType int8

const (
	// CreateTime: each record carries the producer's timestamp.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker's append time, stored once as the batch's
	// MaxTimestamp, applies to every record.
	LogAppendTime TimestampType = 1
)

// String returns Kafka's name for the timestamp type.
func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// Batch is one whole v2 record batch: a view over bytes it does not own
// (normally a fetch response's). Its length is exactly Length()+12.
//
// Batches come from Split, Scanner, Parse or Encode, which guarantee at least
// HeaderSize bytes and a consistent length; the accessors read fixed offsets
// and panic on a shorter slice. Restamp, SetBaseOffset and
// SetPartitionLeaderEpoch write into the underlying bytes.
type Batch []byte

// Parse checks that b is exactly one whole, intact v2 batch (length, magic
// and CRC) and returns it as a Batch. It does not copy.
func Parse(b []byte) (Batch, error) {
	if err := Batch(b).Verify(); err != nil {
		return nil, err
	}
	return Batch(b), nil
}

// BaseOffset is the offset of the batch's first record. Brokers assign it on
// append; producers send 0.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// LastOffsetDelta is LastOffset minus BaseOffset. Compaction keeps it even
// when it removes the batch's last records.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}

// LastOffset is the offset of the batch's last record as originally written
// (BaseOffset + LastOffsetDelta). After compaction no record may sit there.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset the next batch of the log starts at.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// Length is the batchLength field: the byte count after it, so len(b)-12.
func (b Batch) Length() int32 { return int32(binary.BigEndian.Uint32(b[offLength:])) }

// PartitionLeaderEpoch is the leader epoch of the broker that appended the
// batch. Producers send -1.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}

// Magic is the message format version (2 for every Batch Verify accepts).
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored CRC-32C of bytes 21 to the end.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// Attributes is the raw attributes field.
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }

// Compression is the codec of the records.
func (b Batch) Compression() Compression {
	return Compression(b.Attributes() & attrCompressionMask)
}

// TimestampType says whether record timestamps are CreateTime or
// LogAppendTime.
func (b Batch) TimestampType() TimestampType {
	if b.Attributes()&attrTimestampType != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports whether the batch belongs to a transaction.
func (b Batch) IsTransactional() bool { return b.Attributes()&attrTransactional != 0 }

// IsControl reports whether the batch holds a control record (a
// transaction marker) rather than data.
func (b Batch) IsControl() bool { return b.Attributes()&attrControl != 0 }

// HasDeleteHorizon reports whether the log cleaner set a delete horizon, in
// which case BaseTimestamp holds it.
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&attrDeleteHorizon != 0 }

// BaseTimestamp is the timestamp record timestamp deltas are relative to.
func (b Batch) BaseTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
}

// MaxTimestamp is the largest record timestamp, or the broker's append time
// for LogAppendTime batches.
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the id of the producer that wrote the batch, -1 for a
// producer that is neither idempotent nor transactional.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }

// ProducerEpoch is the epoch of ProducerID, -1 when there is none.
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
}

// BaseSequence is the sequence number of the batch's first record, -1 when
// the producer is not idempotent.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// LastSequence is the sequence number the broker records for this batch:
// BaseSequence advanced by LastOffsetDelta, wrapping past MaxInt32 to 0 as
// Kafka's sequences do. -1 when BaseSequence is -1.
func (b Batch) LastSequence() int32 {
	if b.BaseSequence() < 0 {
		return -1
	}
	return IncrementSequence(b.BaseSequence(), b.LastOffsetDelta())
}

// RecordCount is the number of records the batch holds. It is smaller than
// LastOffsetDelta+1 when compaction removed records from the batch.
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// RecordsSection is the batch's records as stored: the bytes after the
// header, compressed with Compression. It aliases b. Forwarding a batch
// keeps this section byte for byte; only header fields change.
func (b Batch) RecordsSection() []byte { return b[HeaderSize:] }

// Dense reports whether the batch holds a record at every offset from
// BaseOffset to LastOffset: true unless compaction removed records. It reads
// only the header (RecordCount == LastOffsetDelta+1).
func (b Batch) Dense() bool { return int64(b.RecordCount()) == int64(b.LastOffsetDelta())+1 }

// IncrementSequence returns seq advanced by n the way Kafka advances producer
// sequence numbers: modulo 2^31, wrapping from MaxInt32 to 0. A writer's
// next base sequence after a batch b is IncrementSequence(b.LastSequence(), 1).
func IncrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// ComputeCRC returns the CRC-32C of the bytes the CRC field covers, whatever
// the field holds.
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[crcStart:], castagnoli) }

// Verify checks that b is one whole v2 batch: batchLength matching len(b),
// magic 2 and a stored CRC equal to the computed one. Errors wrap
// ErrCorruptBatch or ErrUnsupportedMagic.
func (b Batch) Verify() error {
	if len(b) < LogOverhead {
		return fmt.Errorf("%d bytes are shorter than a record batch header: %w", len(b), ErrCorruptBatch)
	}
	size, err := frame(b)
	if err != nil {
		return err
	}
	if size != int64(len(b)) {
		return fmt.Errorf("base offset %d: batchLength %d says the batch is %d bytes but it is %d: %w",
			b.BaseOffset(), b.Length(), size, len(b), ErrCorruptBatch)
	}
	if stored, computed := b.CRC(), b.ComputeCRC(); stored != computed {
		return fmt.Errorf("base offset %d: stored CRC-32C %#08x, computed %#08x: %w",
			b.BaseOffset(), stored, computed, ErrCorruptBatch)
	}
	return nil
}

// frame returns the total size of the batch starting at b, which holds at
// least LogOverhead bytes of it. It checks what the available bytes allow:
// the magic, readable from byte 17 on (where every message format keeps it),
// and batchLength, which must cover a v2 header. The size may exceed len(b).
func frame(b []byte) (size int64, err error) {
	base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	if len(b) > offMagic {
		if m := int8(b[offMagic]); m != Magic {
			return 0, fmt.Errorf("base offset %d has magic %d (message format v%d): %w", base, m, m, ErrUnsupportedMagic)
		}
	}
	n := int32(binary.BigEndian.Uint32(b[offLength:]))
	if n < HeaderSize-LogOverhead {
		return 0, fmt.Errorf("base offset %d: batchLength %d is below the v2 minimum %d: %w",
			base, n, HeaderSize-LogOverhead, ErrCorruptBatch)
	}
	return int64(n) + LogOverhead, nil
}

// Restamp writes the destination writer's producer id, epoch and base
// sequence into the batch in place and recomputes the CRC. Nothing else
// changes: records stay compressed and byte-identical.
//
// Restamp trusts the batch: recomputing the CRC over damaged bytes would make
// them look intact. Call it only on batches Split, Scanner, Parse or Verify
// accepted, and do not modify them in between.
func (b Batch) Restamp(producerID int64, epoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC())
}

// SetBaseOffset writes the baseOffset field. Producers send 0 and the broker
// assigns the real offset; the field is outside the CRC, so no CRC update is
// needed.
func (b Batch) SetBaseOffset(offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch writes the partitionLeaderEpoch field (producers
// send -1). It is outside the CRC, so no CRC update is needed.
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}
