package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kmirror/kmirror/core/batch"
)

// fuzzSeeds are valid fetch responses of every codec, a control batch, a
// legacy v1 message, and damaged and truncated variants.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, c := range codecs {
		b, err := batch.Encode(sampleOptions(0, c), sampleRecords(0)[:4])
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b, concat(b, b[:len(b)/2]))
		damaged := bytes.Clone(b)
		damaged[len(damaged)-1] ^= 0xFF
		seeds = append(seeds, damaged)
	}
	ctl, err := batch.EncodeControl(batch.EncodeOptions{ProducerID: 1}, batch.ControlCommit, 0, 0)
	if err != nil {
		f.Fatal(err)
	}
	return append(seeds, ctl, legacyMessage(1, 0), []byte{}, make([]byte, 12))
}

// FuzzSplit: arbitrary bytes never panic, and whatever Split returns is
// consistent: the batches and rest tile the input in order, every batch
// verifies, a nil error leaves only a partial batch in rest, and errors wrap
// a sentinel. Decoding the batches found must not panic either.
func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		batches, rest, err := batch.Split(in)
		at := 0
		for i, b := range batches {
			if !bytes.Equal(b, orig[at:at+len(b)]) || &b[0] != &in[at] {
				t.Fatalf("batch %d is not the input's bytes at %d", i, at)
			}
			at += len(b)
			if verr := b.Verify(); verr != nil {
				t.Fatalf("Split returned batch %d that fails Verify: %v", i, verr)
			}
			_, _ = b.Records()
			_, _ = batch.ControlRecord(b)
			_ = []any{b.LastOffset(), b.NextOffset(), b.LastSequence(), b.Dense(), b.MaxTimestamp(), b.RecordCount()}
			b.Restamp(-1, -1, -1)
			if verr := b.Verify(); verr != nil {
				t.Fatalf("batch %d fails Verify after Restamp: %v", i, verr)
			}
		}
		if len(rest) != len(in)-at || (len(rest) > 0 && &rest[0] != &in[at]) {
			t.Fatalf("rest is not the input's tail after the %d batch bytes", at)
		}
		switch {
		case err != nil:
			if !errors.Is(err, batch.ErrCorruptBatch) && !errors.Is(err, batch.ErrUnsupportedMagic) {
				t.Fatalf("Split error wraps no sentinel: %v", err)
			}
			if len(rest) == 0 {
				t.Fatal("Split failed but rest does not hold the bad batch")
			}
		case len(rest) >= 12:
			size := int64(int32(binary.BigEndian.Uint32(rest[8:]))) + 12
			if size <= int64(len(rest)) || size < batch.HeaderSize {
				t.Fatalf("rest of %d bytes holds a whole batch (size %d) yet Split stopped without error", len(rest), size)
			}
			if len(rest) > 16 && rest[16] != batch.Magic {
				t.Fatalf("rest starts with magic %d yet Split reported no error", rest[16])
			}
		}
	})
}

// FuzzRecords seals arbitrary bytes as the records section of an intact
// batch with a fuzzed codec and count, so record parsing and every
// decompressor see hostile input past the CRC check: no panic, and errors
// wrap a sentinel.
func FuzzRecords(f *testing.F) {
	for _, c := range codecs {
		b, err := batch.Encode(sampleOptions(0, c), sampleRecords(0)[:4])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint16(c), int32(4), []byte(b[batch.HeaderSize:]))
	}
	ctl, err := batch.EncodeControl(batch.EncodeOptions{}, batch.ControlAbort, 0, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint16(0x30), int32(1), []byte(ctl[batch.HeaderSize:]))
	f.Fuzz(func(t *testing.T, attrs uint16, count int32, body []byte) {
		if batch.Compression(attrs&7) == batch.CompressionZstd {
			// A zstd frame may truthfully declare up to 1 GiB from a few
			// bytes (RLE blocks), which the decoder then allocates; keep
			// the fuzzer's claims small.
			var h zstd.Header
			if h.Decode(body) == nil && h.HasFCS && h.FrameContentSize > 16<<20 {
				return
			}
		}
		b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(body))
		b[16] = batch.Magic
		binary.BigEndian.PutUint16(b[21:], attrs)
		binary.BigEndian.PutUint32(b[57:], uint32(count))
		b = reseal(append(b, body...))
		bb, err := batch.Parse(b)
		if err != nil {
			t.Fatalf("resealed batch does not parse: %v", err)
		}
		recs, err := bb.Records()
		if err != nil && !errors.Is(err, batch.ErrCorruptBatch) && !errors.Is(err, batch.ErrDecompressTooLarge) {
			t.Fatalf("Records error wraps no sentinel: %v", err)
		}
		if err == nil && len(recs) != int(count) {
			t.Fatalf("Records returned %d records for count %d without error", len(recs), count)
		}
		if _, err := batch.ControlRecord(bb); err != nil && !errors.Is(err, batch.ErrCorruptBatch) &&
			!errors.Is(err, batch.ErrNotControl) && !errors.Is(err, batch.ErrNoControlRecord) &&
			!errors.Is(err, batch.ErrDecompressTooLarge) {
			t.Fatalf("ControlRecord error wraps no sentinel: %v", err)
		}
	})
}
