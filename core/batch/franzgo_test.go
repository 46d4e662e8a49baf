package batch_test

import (
	"bytes"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
)

// These tests hold the package to an independent implementation of the
// format: franz-go's kmsg (wire structs) and kgo (its consumer's batch
// parser, which checks the CRC-32C, and its codecs).

var kgoCodecs = map[batch.Compression]kgo.CompressionCodec{
	batch.CompressionGzip:   kgo.GzipCompression(),
	batch.CompressionSnappy: kgo.SnappyCompression(), // kgo writes raw snappy here; Java writes xerial
	batch.CompressionLZ4:    kgo.Lz4Compression(),
	batch.CompressionZstd:   kgo.ZstdCompression(),
}

// kgoParse runs franz-go's consumer-side parser over fetched Records bytes.
func kgoParse(t *testing.T, fetched []byte) kgo.FetchPartition {
	t.Helper()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = fetched
	rp.HighWatermark = 1 << 40
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Topic: "t"},
		&rp, kgo.DefaultDecompressor(), nil)
	return fp
}

func TestFranzGoReadsRestampedBatches(t *testing.T) {
	t.Parallel()
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			var fetched []byte
			var want []batch.Record
			for i := range 3 {
				base := int64(200 + 5*i)
				want = append(want, sampleRecords(base)...)
				fetched = append(fetched, mustEncode(t, sampleOptions(base, c), sampleRecords(base))...)
			}
			partial := mustEncode(t, sampleOptions(215, c), sampleRecords(215))
			fetched = append(fetched, partial[:len(partial)-10]...)

			batches, _, err := batch.Split(fetched)
			if err != nil || len(batches) != 3 {
				t.Fatalf("Split: %d batches, %v", len(batches), err)
			}
			for i, b := range batches {
				b.Restamp(31337, 7, int32(100*i))

				var kb kmsg.RecordBatch
				if err := kb.ReadFrom(b); err != nil {
					t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
				}
				if kb.ProducerID != 31337 || kb.ProducerEpoch != 7 || kb.FirstSequence != int32(100*i) ||
					kb.FirstOffset != b.BaseOffset() || kb.NumRecords != 5 || kb.LastOffsetDelta != 4 ||
					kb.Attributes != int16(c) || kb.Length != int32(len(b)-12) || uint32(kb.CRC) != b.CRC() {
					t.Fatalf("kmsg reads batch %d as %+v", i, kb)
				}
				if got := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(kb.CRC) != got {
					t.Fatalf("batch %d: kmsg CRC %#x, CRC-32C of bytes 21.. is %#x", i, uint32(kb.CRC), got)
				}
			}

			fp := kgoParse(t, fetched)
			if fp.Err != nil {
				t.Fatalf("franz-go rejects the restamped batches: %v", fp.Err)
			}
			if len(fp.Records) != len(want) {
				t.Fatalf("franz-go read %d records, want %d", len(fp.Records), len(want))
			}
			for i, r := range fp.Records {
				w := want[i]
				if r.Offset != w.Offset || r.Timestamp.UnixMilli() != w.Timestamp ||
					!sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) ||
					r.ProducerID != 31337 || r.ProducerEpoch != 7 || r.LeaderEpoch != 5 ||
					len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: franz-go reads offset %d ts %d key %q value len %d pid %d epoch %d leader %d headers %d; want %s",
						i, r.Offset, r.Timestamp.UnixMilli(), r.Key, len(r.Value), r.ProducerID, r.ProducerEpoch, r.LeaderEpoch, len(r.Headers), describe([]batch.Record{w}))
				}
				for j, h := range r.Headers {
					if h.Key != w.Headers[j].Key || !sameBytes(h.Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: franz-go reads %q=%q, want %+v", i, j, h.Key, h.Value, w.Headers[j])
					}
				}
			}

			// The parser above does check CRCs: damage one byte and it refuses.
			damaged := bytes.Clone(fetched)
			damaged[len(batches[0])+30] ^= 1
			if fp := kgoParse(t, damaged); fp.Err == nil {
				t.Fatal("franz-go accepted a batch with a damaged byte: the cross-check proves nothing")
			}
		})
	}
}

// sameBytes compares contents and null-ness.
func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

// kmsgBatch builds a batch with franz-go's kmsg and kgo codecs, computing
// the CRC with hash/crc32: none of the package under test is involved.
func kmsgBatch(t *testing.T, c batch.Compression, attrs int16, base int64, recs []batch.Record) []byte {
	t.Helper()
	var raw []byte
	for _, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.Timestamp - recs[0].Timestamp,
			OffsetDelta:      int32(r.Offset - base),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // everything after the 1-byte varint 0
		raw = kr.AppendTo(raw)
	}
	if c != batch.CompressionNone {
		comp, err := kgo.DefaultCompressor(kgoCodecs[c])
		if err != nil {
			t.Fatal(err)
		}
		out, used := comp.Compress(new(bytes.Buffer), raw)
		if used != kgo.CompressionCodecType(c) {
			t.Fatalf("kgo compressed with codec %d, want %d", used, c)
		}
		raw = bytes.Clone(out)
	}
	maxTS := recs[0].Timestamp
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: base, PartitionLeaderEpoch: 9, Magic: 2,
		Attributes: int16(c) | attrs, LastOffsetDelta: int32(recs[len(recs)-1].Offset - base),
		FirstTimestamp: recs[0].Timestamp, MaxTimestamp: maxTS,
		ProducerID: 555, ProducerEpoch: 1, FirstSequence: 0, NumRecords: int32(len(recs)),
		Records: raw, Length: int32(49 + len(raw)),
	}
	b := kb.AppendTo(nil)
	kb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return kb.AppendTo(nil)
}

func TestReadsFranzGoBatches(t *testing.T) {
	t.Parallel()
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			recs := sampleRecords(40)
			fetched := concat(kmsgBatch(t, c, 0, 40, recs), kmsgBatch(t, c, 0x10, 45, sampleRecords(45)))
			if fp := kgoParse(t, fetched); fp.Err != nil || len(fp.Records) != 10 {
				t.Fatalf("fixture check: franz-go reads its own batches as %d records, %v", len(fp.Records), fp.Err)
			}
			batches, rest, err := batch.Split(fetched)
			if err != nil || len(batches) != 2 || len(rest) != 0 {
				t.Fatalf("Split of franz-go batches: %d batches, %d rest bytes, %v", len(batches), len(rest), err)
			}
			b := batches[0]
			if b.BaseOffset() != 40 || b.PartitionLeaderEpoch() != 9 || b.Compression() != c || b.ProducerID() != 555 ||
				b.RecordCount() != 5 || b.LastOffset() != 44 || b.IsTransactional() || !batches[1].IsTransactional() {
				t.Fatalf("header fields of a franz-go batch: base %d leader %d codec %s pid %d count %d last %d",
					b.BaseOffset(), b.PartitionLeaderEpoch(), b.Compression(), b.ProducerID(), b.RecordCount(), b.LastOffset())
			}
			got, err := b.Records()
			if err != nil {
				t.Fatalf("Records of a franz-go batch: %v", err)
			}
			if !reflect.DeepEqual(got, recs) {
				t.Fatalf("records of a franz-go batch:\n got %s\nwant %s", describe(got), describe(recs))
			}
			for _, b := range batches {
				b.Restamp(1, 0, 0)
			}
			if fp := kgoParse(t, fetched); fp.Err != nil || len(fp.Records) != 10 || fp.Records[9].ProducerID != 1 {
				t.Fatalf("franz-go rereads the restamped batches as %d records, %v", len(fp.Records), fp.Err)
			}
		})
	}
}

func TestControlRecordsAgainstFranzGo(t *testing.T) {
	t.Parallel()
	for _, typ := range []batch.ControlType{batch.ControlAbort, batch.ControlCommit} {
		// franz-go built marker → ControlRecord.
		theirs := kmsgBatch(t, batch.CompressionNone, 0x30, 10, []batch.Record{{
			Offset: 10, Key: []byte{0, 0, 0, byte(typ)}, Value: []byte{0, 0, 0, 0, 0, 3},
		}})
		b, err := batch.Parse(theirs)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := batch.ControlRecord(b); err != nil || got != typ {
			t.Fatalf("ControlRecord of a franz-go %s marker = %s, %v", typ, got, err)
		}

		// EncodeControl → franz-go sees a control record with that key.
		ours, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 10, ProducerID: 3}, typ, 6, 1_700_000_000_000)
		if err != nil {
			t.Fatal(err)
		}
		fp := kgoParse(t, ours)
		if fp.Err != nil || len(fp.Records) != 1 {
			t.Fatalf("franz-go reads our %s marker as %d records, %v", typ, len(fp.Records), fp.Err)
		}
		r := fp.Records[0]
		if !r.Attrs.IsControl() || !r.Attrs.IsTransactional() || !bytes.Equal(r.Key, []byte{0, 0, 0, byte(typ)}) ||
			!bytes.Equal(r.Value, []byte{0, 0, 0, 0, 0, 6}) || r.Offset != 10 {
			t.Fatalf("franz-go reads our %s marker as control %t key %x value %x offset %d",
				typ, r.Attrs.IsControl(), r.Key, r.Value, r.Offset)
		}
	}
}
