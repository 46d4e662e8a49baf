// Package batch owns the bytes of Kafka record batches (message format v2,
// magic 2) on kmirror's offset-preserving data path.
//
// kmirror forwards the source cluster's record batches to the destination as
// they are: records are never decompressed or re-encoded. A [Batch] is a view
// over the fetch response's own bytes; [Split] and [Scanner] cut a partition's
// Records field into whole batches without copying, verifying each one's
// CRC-32C, and hand back the trailing partial batch a broker leaves when it
// cuts a response at the fetch size limit. [Batch.Restamp] then writes the
// destination writer's producer id, producer epoch and base sequence in
// place and recomputes the CRC. The forward path allocates nothing per batch.
//
// # Wire layout (all integers big-endian)
//
//	offset size field
//	     0    8 baseOffset            \ outside the CRC: a broker rewrites
//	     8    4 batchLength           | these when it appends a batch, so
//	    12    4 partitionLeaderEpoch  | SetBaseOffset and
//	    16    1 magic (= 2)           | SetPartitionLeaderEpoch need no
//	    17    4 crc                   / CRC update
//	    21    2 attributes            \
//	    23    4 lastOffsetDelta       |
//	    27    8 baseTimestamp         |
//	    35    8 maxTimestamp          | CRC-32C (Castagnoli) covers
//	    43    8 producerId            | byte 21 to the end of the batch
//	    51    2 producerEpoch         |
//	    53    4 baseSequence          |
//	    57    4 recordCount           |
//	    61    … records               /
//
// batchLength counts the bytes after itself, so a batch is batchLength+12
// bytes long. Attribute bits: 0-2 compression codec, 3 timestamp type
// (1 = LogAppendTime), 4 transactional, 5 control, 6 delete horizon set
// (baseTimestamp then holds the delete horizon of a compacted batch).
//
// Message formats v0 and v1 (magic 0 and 1, Kafka before 0.11) are not
// supported: they carry no producer id or sequence, so they cannot be
// re-stamped for an idempotent destination writer. Split reports them with
// [ErrUnsupportedMagic].
//
// Record-level decoding ([Batch.Records], [ControlRecord]) is for
// verification, offset maps and transaction markers, never for the forward
// path; it decompresses gzip, snappy (raw or xerial-framed), lz4 (frame
// format) and zstd. [Batch.RecordsWithin] decodes within a memory bound the
// caller sets (decompressed bytes plus decoded records), stopping a batch
// that inflates past it before it is allocated. [Encode] and [EncodeControl] build batches for tests and
// benchmarks without a broker, and map mode's re-encoded batches.
//
// # Codecs: franz-go's where they do the same job
//
// Encode compresses gzip, lz4 and zstd with franz-go's exported compressors
// (kgo.DefaultCompressor). Snappy is framed here, as the Java client writes
// it (xerial blocks), because franz-go's exported compressor writes one raw
// block instead. Decompression is this package's own: it is bounded by the
// caller ([Batch.RecordsWithin]), while franz-go's exported decompressor
// (kgo.DefaultDecompressor) bounds its output at math.MaxInt32 only. See
// docs/design/datapath.md ("Whose codecs").
package batch
