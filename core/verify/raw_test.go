package verify

import (
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/batch"
)

func encode(t *testing.T, opts batch.EncodeOptions, c batch.Compression) batch.Batch {
	t.Helper()
	opts.Compression = c
	recs := []batch.Record{
		{Offset: opts.BaseOffset, Timestamp: 1_700_000_000_000, Key: []byte("k0"), Value: []byte("v0"), Headers: []batch.Header{{Key: "h", Value: []byte("x")}}},
		{Offset: opts.BaseOffset + 1, Timestamp: 1_700_000_000_005, Key: []byte("k1")},
	}
	b, err := batch.Encode(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func control(t *testing.T, typ batch.ControlType, coordinatorEpoch int32, ts int64) batch.Batch {
	t.Helper()
	b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 7, ProducerID: 40, ProducerEpoch: 2}, typ, coordinatorEpoch, ts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var sourceOpts = batch.EncodeOptions{BaseOffset: 100, PartitionLeaderEpoch: 3, Transactional: true, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 17}

func TestRestampedBatchDiffersOnlyInProducerFieldsCRCAndLeaderEpoch(t *testing.T) {
	t.Parallel()
	src := encode(t, sourceOpts, batch.CompressionZstd)
	dst := batch.Batch(slices.Clone(src))
	if f := DiffBatch(src, dst); len(f) != 0 {
		t.Fatalf("identical batches differ in %v", f)
	}
	dst.Restamp(9000, 0, 0)
	dst.SetPartitionLeaderEpoch(0)
	d := BatchDiff{Source: src, Destination: dst, Fields: DiffBatch(src, dst)}
	want := []Field{FieldPartitionLeaderEpoch, FieldCRC, FieldProducerID, FieldProducerEpoch, FieldBaseSequence}
	if !slices.Equal(d.Fields, want) {
		t.Fatalf("fields = %v, want %v", d.Fields, want)
	}
	if u := d.Unexpected(); len(u) != 0 {
		t.Fatalf("unexpected = %v, want none", u)
	}
	if !slices.Equal(src.RecordsSection(), dst.RecordsSection()) || len(src.RecordsSection()) != len(src)-batch.HeaderSize {
		t.Fatal("RecordsSection is not the bytes after the header, unchanged by Restamp")
	}
}

func TestRecompressedBatchIsUnexpected(t *testing.T) {
	t.Parallel()
	src := encode(t, sourceOpts, batch.CompressionGzip)
	// The same records, offsets and timestamps, compressed another way
	// (here: none), as a broker that rebuilds a batch would store them.
	other := encode(t, sourceOpts, batch.CompressionNone)
	d := BatchDiff{Source: src, Destination: other, Fields: DiffBatch(src, other)}
	if u := d.Unexpected(); !slices.Equal(u, []Field{FieldLength, FieldAttributes, FieldRecords}) {
		t.Fatalf("unexpected = %v, want batch length, attributes, records", u)
	}
	// One byte of the records changed, CRC recomputed: records.
	flipped := batch.Batch(slices.Clone(src))
	flipped.RecordsSection()[3] ^= 0xff
	flipped.Restamp(flipped.ProducerID(), flipped.ProducerEpoch(), flipped.BaseSequence())
	d = BatchDiff{Source: src, Destination: flipped, Fields: DiffBatch(src, flipped)}
	if !slices.Equal(d.Fields, []Field{FieldCRC, FieldRecords}) || !slices.Equal(d.Unexpected(), []Field{FieldRecords}) {
		t.Fatalf("fields = %v, unexpected = %v; want crc, records and records", d.Fields, d.Unexpected())
	}
	if !strings.Contains(d.String(), "source batch at offset 100 (data, gzip, transactional true, CreateTime, 2 records): differs in [crc, records]") {
		t.Fatalf("String() = %q", d.String())
	}
	// Another base offset is never a restamp.
	moved := encode(t, batch.EncodeOptions{BaseOffset: 101, PartitionLeaderEpoch: 3, Transactional: true, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 17}, batch.CompressionGzip)
	d = BatchDiff{Source: src, Destination: moved, Fields: DiffBatch(src, moved)}
	if !slices.Equal(d.Unexpected(), []Field{FieldBaseOffset}) {
		t.Fatalf("unexpected = %v, want base offset", d.Unexpected())
	}
}

func TestMarkerFromAnotherCoordinatorKeepsItsControlRecord(t *testing.T) {
	t.Parallel()
	src := control(t, batch.ControlCommit, 4, 1_700_000_000_000)
	dst := control(t, batch.ControlCommit, 0, 1_700_000_009_999)
	dst.Restamp(9000, 0, -1)
	d := BatchDiff{Source: src, Destination: dst, Fields: DiffBatch(src, dst)}
	want := []Field{FieldCRC, FieldBaseTimestamp, FieldMaxTimestamp, FieldProducerID, FieldProducerEpoch, FieldCoordinatorEpoch}
	if !slices.Equal(d.Fields, want) {
		t.Fatalf("fields = %v, want %v", d.Fields, want)
	}
	if u := d.Unexpected(); len(u) != 0 {
		t.Fatalf("unexpected = %v, want none", u)
	}
	// ABORT where the source has COMMIT: the control record differs.
	abort := control(t, batch.ControlAbort, 4, 1_700_000_000_000)
	d = BatchDiff{Source: src, Destination: abort, Fields: DiffBatch(src, abort)}
	if !slices.Equal(d.Fields, []Field{FieldCRC, FieldRecords}) || !slices.Equal(d.Unexpected(), []Field{FieldRecords}) {
		t.Fatalf("fields = %v, unexpected = %v; want crc, records and records", d.Fields, d.Unexpected())
	}
	// The same fields are not excused on a data batch.
	lat := sourceOpts
	lat.LogAppendTime = 1_700_000_000_100
	data := encode(t, lat, batch.CompressionNone)
	lat.LogAppendTime++
	later := encode(t, lat, batch.CompressionNone)
	d = BatchDiff{Source: data, Destination: later, Fields: DiffBatch(data, later)}
	if !slices.Equal(d.Unexpected(), []Field{FieldMaxTimestamp}) {
		t.Fatalf("unexpected = %v, want max timestamp", d.Unexpected())
	}
}

func TestDiffBatchesPairsInOrder(t *testing.T) {
	t.Parallel()
	a := encode(t, sourceOpts, batch.CompressionLZ4)
	m := control(t, batch.ControlAbort, 1, 5)
	if _, err := DiffBatches([]batch.Batch{a, m}, []batch.Batch{a}); err == nil || err.Error() != "source has 2 batches, destination 1" {
		t.Fatalf("err = %v", err)
	}
	diffs, err := DiffBatches([]batch.Batch{a, m}, []batch.Batch{a, m})
	if err != nil || len(diffs) != 2 || len(diffs[0].Fields) != 0 || len(diffs[1].Fields) != 0 {
		t.Fatalf("diffs = %v, %v", diffs, err)
	}
}
