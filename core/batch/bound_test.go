package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/kmirror/kmirror/core/batch"
)

// withSection returns a batch whose records section is section, compressed
// with c, holding count records by its header: the shape of a batch a
// hostile producer can write, since brokers do not decompress to check.
func withSection(t *testing.T, c batch.Compression, section []byte, count int32) batch.Batch {
	t.Helper()
	plain := mustEncode(t, sampleOptions(100, batch.CompressionNone), []batch.Record{{Offset: 100, Value: []byte("x")}})
	b := concat(plain[:61], section)
	binary.BigEndian.PutUint16(b[21:], uint16(c))
	binary.BigEndian.PutUint32(b[23:], uint32(count-1)) // lastOffsetDelta
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	return batch.Batch(reseal(b))
}

// allocated returns the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRecordsWithinRefusesHostileBatchesWithBoundedMemory: batches of a few
// kilobytes that inflate to 64 MiB, in every codec and framing Kafka
// clients write (zstd with and without a declared content size, snappy
// raw and xerial-framed), are refused at a 1 MiB bound, and decoding them
// allocates a small multiple of the bound, not the 64 MiB.
func TestRecordsWithinRefusesHostileBatchesWithBoundedMemory(t *testing.T) {
	// Not parallel: allocated reads the process-wide allocation count.
	const (
		inflated = 64 << 20
		bound    = 1 << 20
		maxAlloc = 20 << 20 // 2 × bound, plus lz4's block buffers (4 MiB blocks)
	)
	zeros := make([]byte, inflated)
	cases := map[string]batch.Batch{
		// A streaming encoder declares no content size: the decoder finds
		// out block by block. With a small window the frame passes the
		// window check and must be stopped by its output; with the 8 MiB
		// window of the usual levels it is refused from its header.
		"zstd without content size":             withSection(t, batch.CompressionZstd, zstdStream(t, zeros, 64<<10), 1),
		"zstd without content size, big window": withSection(t, batch.CompressionZstd, zstdStream(t, zeros, 8<<20), 1),
		"snappy raw":                            withSection(t, batch.CompressionSnappy, s2.EncodeSnappy(nil, zeros), 1),
	}
	for _, c := range []batch.Compression{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd} {
		// One record whose value is the zeros: what Encode (the Java
		// client's framings; zstd with its content size) writes.
		cases[c.String()] = mustEncode(t, sampleOptions(100, c), []batch.Record{{Offset: 100, Value: zeros}})
	}
	zeros = nil
	for name, b := range cases {
		if len(b) > inflated/16 {
			t.Fatalf("%s: the hostile batch has %d bytes; it should be small", name, len(b))
		}
		var err error
		n := allocated(func() { _, err = b.RecordsWithin(bound) })
		if !errors.Is(err, batch.ErrDecompressTooLarge) {
			t.Errorf("%s: RecordsWithin(%d) = %v, want ErrDecompressTooLarge", name, bound, err)
			continue
		}
		if !strings.Contains(err.Error(), "offsets 100 to 100") || !strings.Contains(err.Error(), "1048576") {
			t.Errorf("%s: error %q does not name the offsets and the bound", name, err)
		}
		if n > maxAlloc {
			t.Errorf("%s: refusing the batch allocated %d bytes, want at most %d (the batch inflates to %d)", name, n, maxAlloc, inflated)
		}
		t.Logf("%s: %d bytes compressed, refused after allocating %d bytes", name, len(b), n)
	}
}

// TestRecordsWithinBoundIsTheDecodedSize: a batch decodes within a bound of
// exactly its decompressed section plus its decoded records, and not within
// one byte less, in every codec.
func TestRecordsWithinBoundIsTheDecodedSize(t *testing.T) {
	t.Parallel()
	recs := sampleRecords(10)
	plain := mustEncode(t, sampleOptions(10, batch.CompressionNone), recs)
	section := len(plain) - batch.HeaderSize
	cost := len(recs)*int(unsafe.Sizeof(batch.Record{})) + 3*int(unsafe.Sizeof(batch.Header{})) + len("trace") + len("null")
	for _, c := range codecs {
		b := mustEncode(t, sampleOptions(10, c), recs)
		need := cost
		if c != batch.CompressionNone {
			need += section // the decompressed copy; uncompressed records alias the batch
		}
		if _, err := b.RecordsWithin(need); err != nil {
			t.Errorf("%s: RecordsWithin(%d) = %v, want the records", c, need, err)
		}
		if _, err := b.RecordsWithin(need - 1); !errors.Is(err, batch.ErrDecompressTooLarge) {
			t.Errorf("%s: RecordsWithin(%d) = %v, want ErrDecompressTooLarge", c, need-1, err)
		}
	}
}

// TestRecordsWithinCountsDecodedRecords: tiny records (7 bytes on the wire,
// far more decoded) count against the bound with their decoded size, and
// the record count is checked before anything is decoded.
func TestRecordsWithinCountsDecodedRecords(t *testing.T) {
	// Not parallel: allocated reads the process-wide allocation count.
	tiny := make([]byte, 0, 7*100000)
	for i := 0; i < 100000; i++ {
		tiny = append(tiny, 12, 0, 0, 0, 1, 1, 0) // length 6, attributes, deltas 0, null key, null value, no headers
	}
	b := withSection(t, batch.CompressionZstd, mustZstd(t, tiny), 100000)
	var err error
	n := allocated(func() { _, err = b.RecordsWithin(4 << 20) })
	if !errors.Is(err, batch.ErrDecompressTooLarge) {
		t.Fatalf("100000 records decoded within 4 MiB: %v", err)
	}
	if n > 3<<20 {
		t.Fatalf("refusing 100000 records allocated %d bytes", n)
	}
	recs, err := b.RecordsWithin(100000*int(unsafe.Sizeof(batch.Record{})) + len(tiny))
	if err != nil || len(recs) != 100000 {
		t.Fatalf("within their decoded size: %d records, %v", len(recs), err)
	}
}

func mustZstd(t *testing.T, src []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(src, nil)
}

// zstdStream compresses src as a streaming encoder does, with no declared
// content size.
func zstdStream(t *testing.T, src []byte, window int) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithWindowSize(window))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if h := (zstd.Header{}); h.Decode(out.Bytes()) != nil || h.HasFCS {
		t.Fatalf("the streamed frame declares its content size (%v)", h.Decode(out.Bytes()))
	}
	return out.Bytes()
}
