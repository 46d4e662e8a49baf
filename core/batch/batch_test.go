package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/kmirror/kmirror/core/batch"
)

var codecs = []batch.Compression{
	batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy,
	batch.CompressionLZ4, batch.CompressionZstd,
}

// sampleRecords covers the shapes a round trip must keep apart: null and
// empty keys and values, headers with null and empty values, timestamps
// below the first one, and a value large enough to span several xerial
// snappy blocks.
func sampleRecords(base int64) []batch.Record {
	const ts = 1_700_000_000_000
	return []batch.Record{
		{Offset: base, Timestamp: ts, Key: []byte("k0"), Value: []byte("v0")},
		{Offset: base + 1, Timestamp: ts + 5, Key: nil, Value: []byte("null key")},
		{Offset: base + 2, Timestamp: ts - 10, Key: []byte{}, Value: nil},
		{Offset: base + 3, Timestamp: ts + 7, Key: []byte("h"), Value: []byte{}, Headers: []batch.Header{
			{Key: "trace", Value: []byte("abc")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}},
		}},
		{Offset: base + 4, Timestamp: ts + 1_000_000, Key: []byte("big"), Value: bytes.Repeat([]byte("kmirror mirrors offsets "), 4000)},
	}
}

func sampleOptions(base int64, c batch.Compression) batch.EncodeOptions {
	return batch.EncodeOptions{
		BaseOffset: base, PartitionLeaderEpoch: 5, Compression: c,
		ProducerID: 4242, ProducerEpoch: 3, BaseSequence: 17,
	}
}

func mustEncode(t testing.TB, opts batch.EncodeOptions, recs []batch.Record) batch.Batch {
	t.Helper()
	b, err := batch.Encode(opts, recs)
	if err != nil {
		t.Fatalf("Encode(%s): %v", opts.Compression, err)
	}
	return b
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// reseal rewrites the length field to match len(b) and recomputes the CRC
// with hash/crc32 directly (not the package under test), for hand-damaged
// fixtures that must still pass the CRC check.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestRoundTripEachCodec(t *testing.T) {
	t.Parallel()
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			var batches [][]byte
			var want [][]batch.Record
			for i := range 3 {
				base := int64(1000 + 10*i)
				recs := sampleRecords(base)
				batches = append(batches, mustEncode(t, sampleOptions(base, c), recs))
				want = append(want, recs)
			}
			partial := mustEncode(t, sampleOptions(1030, c), sampleRecords(1030))
			partial = partial[:len(partial)/2]
			fetched := concat(batches[0], batches[1], batches[2], partial)
			before := bytes.Clone(fetched)

			got, rest, err := batch.Split(fetched)
			if err != nil {
				t.Fatalf("Split: %v", err)
			}
			if len(got) != 3 {
				t.Fatalf("Split returned %d batches, want 3", len(got))
			}
			if !bytes.Equal(rest, partial) {
				t.Fatalf("rest is %d bytes, want the %d-byte partial batch", len(rest), len(partial))
			}
			for i, b := range got {
				if !bytes.Equal(b, batches[i]) {
					t.Fatalf("batch %d differs from the encoded one", i)
				}
				if &b[0] != &fetched[len(concat(batches[:i]...))] {
					t.Fatalf("batch %d is a copy, want a view into the fetched bytes", i)
				}
				if err := b.Verify(); err != nil {
					t.Fatalf("Verify batch %d: %v", i, err)
				}
				checkHeader(t, b, 1000+10*int64(i), c)

				b.Restamp(987654321, 12, 3000+int32(i))
				if err := b.Verify(); err != nil {
					t.Fatalf("Verify after Restamp, batch %d: %v", i, err)
				}
				if b.ProducerID() != 987654321 || b.ProducerEpoch() != 12 || b.BaseSequence() != 3000+int32(i) {
					t.Fatalf("after Restamp: producer %d epoch %d seq %d", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
				}
				recs, err := b.Records()
				if err != nil {
					t.Fatalf("Records batch %d: %v", i, err)
				}
				if !reflect.DeepEqual(recs, want[i]) {
					t.Fatalf("Records batch %d:\n got %s\nwant %s", i, describe(recs), describe(want[i]))
				}
			}
			assertOnlyProducerFieldsChanged(t, before, fetched, len(batches[0]), len(batches[1]), len(batches[2]))
		})
	}
}

// checkHeader asserts every accessor of a batch built by sampleOptions.
func checkHeader(t *testing.T, b batch.Batch, base int64, c batch.Compression) {
	t.Helper()
	recs := sampleRecords(base)
	checks := []struct {
		name      string
		got, want any
	}{
		{"BaseOffset", b.BaseOffset(), base},
		{"LastOffsetDelta", b.LastOffsetDelta(), int32(4)},
		{"LastOffset", b.LastOffset(), base + 4},
		{"NextOffset", b.NextOffset(), base + 5},
		{"Length", b.Length(), int32(len(b) - 12)},
		{"PartitionLeaderEpoch", b.PartitionLeaderEpoch(), int32(5)},
		{"Magic", b.Magic(), int8(2)},
		{"CRC", b.CRC(), crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))},
		{"Attributes", b.Attributes(), int16(c)},
		{"Compression", b.Compression(), c},
		{"TimestampType", b.TimestampType(), batch.CreateTime},
		{"IsTransactional", b.IsTransactional(), false},
		{"IsControl", b.IsControl(), false},
		{"HasDeleteHorizon", b.HasDeleteHorizon(), false},
		{"BaseTimestamp", b.BaseTimestamp(), recs[0].Timestamp},
		{"MaxTimestamp", b.MaxTimestamp(), recs[4].Timestamp},
		{"ProducerID", b.ProducerID(), int64(4242)},
		{"ProducerEpoch", b.ProducerEpoch(), int16(3)},
		{"BaseSequence", b.BaseSequence(), int32(17)},
		{"LastSequence", b.LastSequence(), int32(21)},
		{"RecordCount", b.RecordCount(), int32(5)},
		{"Dense", b.Dense(), true},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// assertOnlyProducerFieldsChanged compares the fetched buffer before and
// after re-stamping its batches (of the given sizes): only the CRC (bytes
// 17-20) and producerId/producerEpoch/baseSequence (bytes 43-56) of each
// batch may differ, and the trailing partial batch must be untouched.
func assertOnlyProducerFieldsChanged(t *testing.T, before, after []byte, sizes ...int) {
	t.Helper()
	mutable := make([]bool, len(before))
	at := 0
	for _, n := range sizes {
		for i := 17; i < 21; i++ {
			mutable[at+i] = true
		}
		for i := 43; i < 57; i++ {
			mutable[at+i] = true
		}
		at += n
	}
	for i := range before {
		if !mutable[i] && before[i] != after[i] {
			t.Fatalf("Restamp changed byte %d (%#02x -> %#02x), outside the CRC and producer fields", i, before[i], after[i])
		}
	}
}

func describe(recs []batch.Record) string {
	var sb strings.Builder
	for _, r := range recs {
		v := r.Value
		if len(v) > 16 {
			v = v[:16]
		}
		fmt.Fprintf(&sb, "\n  {off %d ts %d attrs %d key %q(nil=%t) value %q…(len %d nil=%t) headers %+v}",
			r.Offset, r.Timestamp, r.Attributes, r.Key, r.Key == nil, v, len(r.Value), r.Value == nil, r.Headers)
	}
	return sb.String()
}

func TestSplitTrailingPartialAtEveryCut(t *testing.T) {
	t.Parallel()
	whole := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0)[:2])
	next := mustEncode(t, sampleOptions(2, batch.CompressionNone), sampleRecords(2)[:2])
	for cut := 0; cut < len(next); cut++ {
		got, rest, err := batch.Split(concat(whole, next[:cut]))
		if err != nil {
			t.Fatalf("cut %d: Split: %v", cut, err)
		}
		if len(got) != 1 || !bytes.Equal(got[0], whole) {
			t.Fatalf("cut %d: got %d batches, want the 1 whole one", cut, len(got))
		}
		if !bytes.Equal(rest, next[:cut]) {
			t.Fatalf("cut %d: rest is %d bytes, want %d", cut, len(rest), cut)
		}
	}
}

func TestSplitEmptyInput(t *testing.T) {
	t.Parallel()
	got, rest, err := batch.Split(nil)
	if err != nil || len(got) != 0 || len(rest) != 0 {
		t.Fatalf("Split(nil) = %d batches, %d rest bytes, %v; want nothing", len(got), len(rest), err)
	}
}

func TestSplitBatchesCannotGrowIntoNeighbours(t *testing.T) {
	t.Parallel()
	a := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0)[:1])
	b := mustEncode(t, sampleOptions(1, batch.CompressionNone), sampleRecords(1)[:1])
	fetched := concat(a, b)
	got, _, err := batch.Split(fetched)
	if err != nil || len(got) != 2 {
		t.Fatalf("Split: %d batches, %v", len(got), err)
	}
	_ = append(got[0], 0xFF) // must reallocate, not overwrite batch 1
	if !bytes.Equal(got[1], b) {
		t.Fatal("appending to batch 0 overwrote batch 1: batches must have their capacity capped")
	}
}

func TestSplitCorruptCRC(t *testing.T) {
	t.Parallel()
	good := mustEncode(t, sampleOptions(0, batch.CompressionZstd), sampleRecords(0))
	bad := bytes.Clone(mustEncode(t, sampleOptions(5, batch.CompressionZstd), sampleRecords(5)))
	bad[len(bad)-3] ^= 0x40 // inside the compressed records
	fetched := concat(good, bad)

	got, rest, err := batch.Split(fetched)
	if !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("Split error = %v, want ErrCorruptBatch", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", len(good))) || !strings.Contains(err.Error(), "CRC") {
		t.Errorf("error %q should name the byte position %d and the CRC", err, len(good))
	}
	if len(got) != 1 || !bytes.Equal(got[0], good) {
		t.Fatalf("got %d batches, want the valid one before the corrupt batch", len(got))
	}
	if !bytes.Equal(rest, bad) {
		t.Fatal("rest should start at the corrupt batch")
	}
	if err := batch.Batch(bad).Verify(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("Verify of the corrupt batch = %v, want ErrCorruptBatch", err)
	}
	if _, err := batch.Parse(bad); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("Parse of the corrupt batch = %v, want ErrCorruptBatch", err)
	}
}

// Every byte the CRC covers must be checked; the fields before it must not.
func TestCRCCoverage(t *testing.T) {
	t.Parallel()
	orig := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0)[:2])
	for i := range orig {
		b := batch.Batch(bytes.Clone(orig))
		b[i] ^= 0x01
		err := b.Verify()
		switch {
		case i < 8 || (i >= 12 && i < 16): // baseOffset, partitionLeaderEpoch
			if err != nil {
				t.Fatalf("flipping byte %d (outside the CRC) broke Verify: %v", i, err)
			}
		case i < 12: // batchLength
			if !errors.Is(err, batch.ErrCorruptBatch) {
				t.Fatalf("flipping length byte %d: Verify = %v, want ErrCorruptBatch", i, err)
			}
		case i == 16: // magic
			if !errors.Is(err, batch.ErrUnsupportedMagic) {
				t.Fatalf("flipping the magic: Verify = %v, want ErrUnsupportedMagic", err)
			}
		default:
			if !errors.Is(err, batch.ErrCorruptBatch) {
				t.Fatalf("flipping byte %d (inside the CRC): Verify = %v, want ErrCorruptBatch", i, err)
			}
		}
	}
}

func TestSetBaseOffsetAndLeaderEpochKeepCRC(t *testing.T) {
	t.Parallel()
	b := mustEncode(t, sampleOptions(500, batch.CompressionLZ4), sampleRecords(500))
	crc := b.CRC()
	b.SetBaseOffset(0)
	b.SetPartitionLeaderEpoch(-1)
	if b.BaseOffset() != 0 || b.PartitionLeaderEpoch() != -1 {
		t.Fatalf("BaseOffset %d, PartitionLeaderEpoch %d; want 0, -1", b.BaseOffset(), b.PartitionLeaderEpoch())
	}
	if b.CRC() != crc {
		t.Fatal("the CRC field changed, but baseOffset and partitionLeaderEpoch are outside the CRC")
	}
	if err := b.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	recs, err := b.Records()
	if err != nil || recs[0].Offset != 0 || recs[4].Offset != 4 {
		t.Fatalf("records after SetBaseOffset(0): %v %s", err, describe(recs))
	}
}

// legacyMessage builds a message-format v0/v1 entry: offset, size, crc,
// magic, attributes, [timestamp,] key, value.
func legacyMessage(magic byte, offset int64) []byte {
	body := []byte{magic, 0}
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, 1_700_000_000_000)
	}
	body = binary.BigEndian.AppendUint32(body, math.MaxUint32) // null key
	body = binary.BigEndian.AppendUint32(body, 5)
	body = append(body, "hello"...)
	msg := binary.BigEndian.AppendUint64(nil, uint64(offset))
	msg = binary.BigEndian.AppendUint32(msg, uint32(4+len(body)))
	msg = binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(body))
	return append(msg, body...)
}

func TestSplitRejectsMessageFormatV0V1(t *testing.T) {
	t.Parallel()
	good := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0)[:1])
	for _, magic := range []byte{0, 1} {
		legacy := legacyMessage(magic, 1)
		for _, in := range [][]byte{legacy, legacy[:20]} { // whole, and cut by the fetch limit
			got, rest, err := batch.Split(concat(good, in))
			if !errors.Is(err, batch.ErrUnsupportedMagic) {
				t.Fatalf("magic %d (%d bytes): Split error = %v, want ErrUnsupportedMagic", magic, len(in), err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("magic %d", magic)) || !strings.Contains(err.Error(), "v2") {
				t.Errorf("error %q should name the magic and say only v2 is supported", err)
			}
			if len(got) != 1 || !bytes.Equal(rest, in) {
				t.Fatalf("magic %d: got %d batches and %d rest bytes, want 1 and %d", magic, len(got), len(rest), len(in))
			}
		}
	}
}

func TestSplitRejectsBadLengths(t *testing.T) {
	t.Parallel()
	orig := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0)[:1])
	for _, length := range []int32{-1, math.MinInt32, 0, 48} {
		b := bytes.Clone(orig)
		binary.BigEndian.PutUint32(b[8:], uint32(length))
		_, rest, err := batch.Split(b)
		if !errors.Is(err, batch.ErrCorruptBatch) {
			t.Fatalf("batchLength %d: Split error = %v, want ErrCorruptBatch", length, err)
		}
		if len(rest) != len(b) {
			t.Fatalf("batchLength %d: rest should hold the bad batch", length)
		}
		// The length is checked before the rest of the header arrives.
		if _, _, err := batch.Split(b[:12]); !errors.Is(err, batch.ErrCorruptBatch) {
			t.Fatalf("batchLength %d, 12 bytes: Split error = %v, want ErrCorruptBatch", length, err)
		}
	}
	// A batch shorter than its length says is truncated, not corrupt.
	if got, rest, err := batch.Split(orig[:len(orig)-1]); err != nil || len(got) != 0 || len(rest) != len(orig)-1 {
		t.Fatalf("truncated batch: %d batches, %d rest bytes, %v; want it all in rest", len(got), len(rest), err)
	}
	// But Verify and Parse need one whole batch.
	if err := batch.Batch(orig[:len(orig)-1]).Verify(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("Verify of a truncated batch = %v, want ErrCorruptBatch", err)
	}
	if err := batch.Batch(concat(orig, []byte{0})).Verify(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("Verify with a trailing byte = %v, want ErrCorruptBatch", err)
	}
	if err := batch.Batch(orig[:5]).Verify(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("Verify of 5 bytes = %v, want ErrCorruptBatch", err)
	}
}

func TestScannerAllocatesNothing(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside a
	// parallel test, whose allocations it would count.
	var fetched []byte
	for i := range 8 {
		fetched = append(fetched, mustEncode(t, sampleOptions(int64(5*i), batch.CompressionZstd), sampleRecords(int64(5*i)))...)
	}
	allocs := testing.AllocsPerRun(50, func() {
		s := batch.NewScanner(fetched)
		for s.Next() {
			s.Batch().Restamp(1, 2, 3)
		}
		if s.Err() != nil || len(s.Rest()) != 0 {
			t.Fatalf("scan: %v, %d rest bytes", s.Err(), len(s.Rest()))
		}
	})
	if allocs != 0 {
		t.Fatalf("Scanner + Restamp allocated %.1f times per fetch, want 0", allocs)
	}
}

func TestControlRecords(t *testing.T) {
	t.Parallel()
	for _, typ := range []batch.ControlType{batch.ControlAbort, batch.ControlCommit} {
		opts := batch.EncodeOptions{BaseOffset: 77, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 55}
		b, err := batch.EncodeControl(opts, typ, 4, 1_700_000_000_000)
		if err != nil {
			t.Fatalf("EncodeControl(%s): %v", typ, err)
		}
		if !b.IsControl() || !b.IsTransactional() || b.RecordCount() != 1 || b.BaseSequence() != -1 {
			t.Fatalf("%s marker: control %t transactional %t count %d seq %d", typ,
				b.IsControl(), b.IsTransactional(), b.RecordCount(), b.BaseSequence())
		}
		got, err := batch.ControlRecord(b)
		if err != nil || got != typ {
			t.Fatalf("ControlRecord = %s, %v; want %s", got, err, typ)
		}
		// The marker survives a restamp.
		b.Restamp(100, 1, -1)
		if got, err := batch.ControlRecord(b); err != nil || got != typ {
			t.Fatalf("ControlRecord after Restamp = %s, %v; want %s", got, err, typ)
		}
	}
	if s := batch.ControlType(7).String(); s != "UNKNOWN(7)" {
		t.Errorf("ControlType(7).String() = %q", s)
	}
}

func TestControlRecordErrors(t *testing.T) {
	t.Parallel()
	data := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0)[:1])
	if _, err := batch.ControlRecord(data); !errors.Is(err, batch.ErrNotControl) {
		t.Fatalf("data batch: %v, want ErrNotControl", err)
	}

	marker, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 3, ProducerID: 1}, batch.ControlCommit, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Compaction leaves an empty control batch once the marker is removed.
	empty := bytes.Clone(marker[:61])
	binary.BigEndian.PutUint32(empty[57:], 0)
	if _, err := batch.ControlRecord(batch.Batch(reseal(empty))); !errors.Is(err, batch.ErrNoControlRecord) {
		t.Fatalf("empty control batch: %v, want ErrNoControlRecord", err)
	}

	compressed := bytes.Clone(marker)
	binary.BigEndian.PutUint16(compressed[21:], binary.BigEndian.Uint16(compressed[21:])|uint16(batch.CompressionGzip))
	if _, err := batch.ControlRecord(batch.Batch(reseal(compressed))); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("compressed control batch: %v, want ErrCorruptBatch", err)
	}

	// A control record whose key is too short to hold version and type.
	shortKey, err := batch.Encode(batch.EncodeOptions{}, []batch.Record{{Key: []byte{0, 0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint16(shortKey[21:], 0x30) // control | transactional
	if _, err := batch.ControlRecord(batch.Batch(reseal(shortKey))); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("3-byte control key: %v, want ErrCorruptBatch", err)
	}
}

func TestRecordsRejectsMiscountedRecords(t *testing.T) {
	t.Parallel()
	orig := mustEncode(t, sampleOptions(0, batch.CompressionNone), sampleRecords(0))
	for _, count := range []uint32{4, 6, math.MaxUint32} {
		b := bytes.Clone(orig)
		binary.BigEndian.PutUint32(b[57:], count)
		if _, err := batch.Batch(reseal(b)).Records(); !errors.Is(err, batch.ErrCorruptBatch) {
			t.Fatalf("record count %d for 5 records: %v, want ErrCorruptBatch", int32(count), err)
		}
	}
	// A record that claims to be longer than the data left.
	b := bytes.Clone(orig)
	b[61] = 0x7E // varint 63 where the first record is shorter
	if _, err := batch.Batch(reseal(b)).Records(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("overlong first record: %v, want ErrCorruptBatch", err)
	}
	// Damaged compressed data is corrupt, not a panic.
	z := bytes.Clone(mustEncode(t, sampleOptions(0, batch.CompressionGzip), sampleRecords(0)))
	for i := 61; i < len(z); i += 7 {
		z[i] ^= 0xA5
	}
	if _, err := batch.Batch(reseal(z)).Records(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("damaged gzip records: %v, want ErrCorruptBatch", err)
	}
	// Codec 5 is not one Kafka defines.
	u := bytes.Clone(orig)
	binary.BigEndian.PutUint16(u[21:], 5)
	if _, err := batch.Batch(reseal(u)).Records(); !errors.Is(err, batch.ErrCorruptBatch) {
		t.Fatalf("codec 5: %v, want ErrCorruptBatch", err)
	}
}

// Clients other than the Java one write snappy as one raw block.
func TestRecordsRawSnappy(t *testing.T) {
	t.Parallel()
	recs := sampleRecords(10)
	plain := mustEncode(t, sampleOptions(10, batch.CompressionNone), recs)
	raw := s2.EncodeSnappy(nil, plain[61:])
	b := concat(plain[:61], raw)
	binary.BigEndian.PutUint16(b[21:], uint16(batch.CompressionSnappy))
	got, err := batch.Batch(reseal(b)).Records()
	if err != nil {
		t.Fatalf("Records of raw snappy: %v", err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("raw snappy records:\n got %s\nwant %s", describe(got), describe(recs))
	}
}

func TestCompactedAndLogAppendTimeBatches(t *testing.T) {
	t.Parallel()
	recs := []batch.Record{
		{Offset: 100, Timestamp: 10, Value: []byte("a")},
		{Offset: 103, Timestamp: 30, Value: []byte("b")},
	}
	opts := batch.EncodeOptions{BaseOffset: 100, LastOffsetDelta: 6, LogAppendTime: 99, DeleteHorizon: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b := mustEncode(t, opts, recs)
	if b.Dense() || b.RecordCount() != 2 || b.LastOffset() != 106 || b.NextOffset() != 107 {
		t.Fatalf("compacted batch: dense %t count %d last %d next %d", b.Dense(), b.RecordCount(), b.LastOffset(), b.NextOffset())
	}
	if b.TimestampType() != batch.LogAppendTime || !b.HasDeleteHorizon() || b.BaseTimestamp() != 5 || b.MaxTimestamp() != 99 {
		t.Fatalf("timestamps: type %s horizon %t base %d max %d", b.TimestampType(), b.HasDeleteHorizon(), b.BaseTimestamp(), b.MaxTimestamp())
	}
	if b.LastSequence() != -1 {
		t.Fatalf("LastSequence without a producer = %d, want -1", b.LastSequence())
	}
	got, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Offset != 100 || got[1].Offset != 103 || got[0].Timestamp != 99 || got[1].Timestamp != 99 {
		t.Fatalf("records: %s; want offsets 100, 103 with the LogAppendTime 99", describe(got))
	}
	// Without LogAppendTime, record timestamps are relative to the delete horizon.
	opts.LogAppendTime = 0
	got, err = mustEncode(t, opts, recs).Records()
	if err != nil || got[0].Timestamp != 10 || got[1].Timestamp != 30 {
		t.Fatalf("records with a delete horizon: %v %s; want timestamps 10, 30", err, describe(got))
	}

	if _, err := batch.Encode(batch.EncodeOptions{BaseOffset: 100, LastOffsetDelta: 2}, recs); err == nil {
		t.Fatal("Encode accepted LastOffsetDelta 2 below the last record's delta 3")
	}
	if _, err := batch.Encode(batch.EncodeOptions{}, []batch.Record{{Offset: 1}, {Offset: 1}}); err == nil {
		t.Fatal("Encode accepted two records at one offset")
	}
}

func TestIncrementSequence(t *testing.T) {
	t.Parallel()
	cases := []struct{ seq, n, want int32 }{
		{0, 1, 1},
		{17, 4, 21},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
	}
	for _, c := range cases {
		if got := batch.IncrementSequence(c.seq, c.n); got != c.want {
			t.Errorf("IncrementSequence(%d, %d) = %d, want %d", c.seq, c.n, got, c.want)
		}
	}
	b := mustEncode(t, batch.EncodeOptions{BaseSequence: math.MaxInt32 - 1}, sampleRecords(0))
	if got := b.LastSequence(); got != 2 {
		t.Fatalf("LastSequence of 5 records from MaxInt32-1 = %d, want 2 (wrapped)", got)
	}
}

func TestStrings(t *testing.T) {
	t.Parallel()
	for c, want := range map[batch.Compression]string{
		batch.CompressionNone: "none", batch.CompressionGzip: "gzip", batch.CompressionSnappy: "snappy",
		batch.CompressionLZ4: "lz4", batch.CompressionZstd: "zstd", 6: "unknown(6)",
	} {
		if c.String() != want {
			t.Errorf("Compression(%d).String() = %q, want %q", int8(c), c.String(), want)
		}
	}
	if batch.LogAppendTime.String() != "LogAppendTime" || batch.CreateTime.String() != "CreateTime" {
		t.Error("TimestampType names differ from Kafka's")
	}
}

// The zstd encoder and decoder are shared package-wide; concurrent use must
// be safe (run with -race).
func TestRecordsConcurrentZstd(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			base := int64(100 * g)
			b, err := batch.Encode(sampleOptions(base, batch.CompressionZstd), sampleRecords(base))
			if err != nil {
				errs <- err
				return
			}
			recs, err := b.Records()
			if err == nil && !reflect.DeepEqual(recs, sampleRecords(base)) {
				err = fmt.Errorf("goroutine %d decoded different records", g)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
