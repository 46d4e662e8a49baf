package batch

// Which codec code is ours and which is franz-go's:
//
//   - Compressing (Encode) uses franz-go's exported compressors
//     (kgo.DefaultCompressor) for gzip, lz4 and zstd: same libraries, levels
//     and zstd window as ours were. Snappy stays ours: franz-go's exported
//     compressor writes one raw snappy block, while Encode frames snappy as
//     the Java client does (xerial), the framing most batches on a Kafka log
//     carry and the one the decoding bound must be proven against.
//   - Decompressing stays ours: every decode here is bounded by the caller
//     (RecordsWithin, a few MiB for map mode), and franz-go's exported
//     decompressor (kgo.DefaultDecompressor) bounds output at math.MaxInt32
//     only; its per-client bound (kgo.MaxDecompressBatchBytes) cannot be set
//     per call. No path of kmirror decompresses without a bound.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxDecompressedBytes bounds how large one batch's records may decompress
// to (1 GiB, as franz-go's default) when the caller sets no lower bound
// ([Batch.RecordsWithin]). A batch claiming more is rejected with
// ErrDecompressTooLarge instead of exhausting memory.
const MaxDecompressedBytes = 1 << 30

// ErrDecompressTooLarge: a batch's records would decompress (or decode) past
// the bound of the call (MaxDecompressedBytes at most). Decompression stops
// there: a small multiple of the bound is allocated (buffer growth; lz4's
// block buffers of up to 4 MiB come on top), whatever the batch claims.
var ErrDecompressTooLarge = errors.New("record batch decompresses past the decoding bound")

// Snappy framing. The Java client writes snappy through xerial's
// SnappyOutputStream: a 16-byte header (magic, version 1, compatible
// version 1), then blocks, each a big-endian uint32 length and a raw snappy
// block of at most 32 KiB of input. Other clients write one raw snappy
// block; both are accepted.
var (
	xerialMagic  = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	xerialHeader = append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
)

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10
	maxSnappyRatio   = 32
)

// zstdDecoders are pooled: each call sets its own bound on the decoder it
// takes (ResetWithOptions), which a shared decoder cannot have. One block
// decoder each, in low-memory mode: a decoder decodes one batch at a time.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(MaxDecompressedBytes),
	)
	if err != nil {
		return err
	}
	return d
}}

// decompressZstd decodes src, refusing past limit bytes: a frame that
// declares a larger content size or window is refused before anything is
// allocated, and one that does not declare its size stops once its output
// passes limit.
func decompressZstd(src []byte, limit int) ([]byte, error) {
	v := zstdDecoders.Get()
	dec, ok := v.(*zstd.Decoder)
	if !ok {
		return nil, fmt.Errorf("creating zstd decoder: %w", v.(error))
	}
	defer zstdDecoders.Put(dec)
	if err := dec.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(uint64(limit))); err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	out, err := dec.DecodeAll(src, nil)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return nil, ErrDecompressTooLarge
	}
	return out, err
}

// decompress returns the records section of a batch decompressed, refusing
// to produce more than limit bytes (ErrDecompressTooLarge). For
// CompressionNone it returns src itself.
func decompress(c Compression, src []byte, limit int) ([]byte, error) {
	switch c {
	case CompressionNone:
		return src, nil
	case CompressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readBounded(zr, limit)
	case CompressionSnappy:
		return decodeSnappy(src, limit)
	case CompressionLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)), limit)
	case CompressionZstd:
		return decompressZstd(src, limit)
	}
	return nil, fmt.Errorf("compression codec %d is not one Kafka defines", int8(c))
}

// readBounded reads r to the end, failing past limit bytes.
func readBounded(r io.Reader, limit int) ([]byte, error) {
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(limit) {
		return nil, ErrDecompressTooLarge
	}
	return out.Bytes(), nil
}

// decodeSnappy decodes xerial-framed or raw snappy, refusing past limit
// bytes.
func decodeSnappy(src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(nil, src, limit)
	}
	var out []byte
	for rest := src[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("xerial snappy: %d trailing bytes are too short for a block length", len(rest))
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("xerial snappy: block of %d bytes but only %d remain", n, len(rest))
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[:n], limit); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// decodeSnappyBlock appends the decoding of one raw snappy block to dst,
// refusing to let dst pass limit bytes. The block states its decoded length
// up front, so nothing is allocated for a block that would pass it.
func decodeSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > limit-len(dst) {
		return nil, ErrDecompressTooLarge
	}
	// No snappy element expands more than 22 times (a 3-byte copy of 64
	// bytes), so a larger claim is false; reject it before allocating.
	if n > maxSnappyRatio*len(block) {
		return nil, fmt.Errorf("snappy: block of %d bytes claims to decode to %d, beyond snappy's expansion limit", len(block), n)
	}
	at := len(dst)
	if cap(dst)-at < n { // double, as bytes.Buffer does: append grows large slices by a quarter
		grown := make([]byte, at, max(at+n, min(2*cap(dst), limit)))
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:at+n]
	if _, err := s2.Decode(dst[at:], block); err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return dst, nil
}

// compressors are franz-go's compressors for gzip, lz4 and zstd, indexed by
// codec: gzip's default level, lz4's fastest, zstd's default with a 64 KiB
// window (small decoder memory, as Kafka clients use). Each is safe for
// concurrent use.
var compressors = sync.OnceValues(func() (map[Compression]kgo.Compressor, error) {
	cs := make(map[Compression]kgo.Compressor, 3)
	for c, codec := range map[Compression]kgo.CompressionCodec{
		CompressionGzip: kgo.GzipCompression(),
		CompressionLZ4:  kgo.Lz4Compression(),
		CompressionZstd: kgo.ZstdCompression(),
	} {
		comp, err := kgo.DefaultCompressor(codec)
		if err != nil {
			return nil, fmt.Errorf("creating the %s compressor: %w", c, err)
		}
		cs[c] = comp
	}
	return cs, nil
})

// compressBuffers are the scratch buffers franz-go's compressors write into.
var compressBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// compress appends src compressed with c to dst, in the framing the Java
// client writes (xerial for snappy, the LZ4 frame format for lz4).
func compress(dst []byte, c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionSnappy:
		dst = append(dst, xerialHeader...)
		for len(src) > 0 {
			chunk := src[:min(len(src), xerialBlockSize)]
			src = src[len(chunk):]
			block := s2.EncodeSnappy(nil, chunk)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
			dst = append(dst, block...)
		}
		return dst, nil
	case CompressionGzip, CompressionLZ4, CompressionZstd:
		cs, err := compressors()
		if err != nil {
			return nil, err
		}
		buf := compressBuffers.Get().(*bytes.Buffer)
		defer compressBuffers.Put(buf)
		buf.Reset()
		out, used := cs[c].Compress(buf, src)
		if used != kgo.CompressionCodecType(c) {
			return nil, fmt.Errorf("%s: compressing %d bytes failed", c, len(src))
		}
		return append(dst, out...), nil
	}
	return nil, fmt.Errorf("compression codec %d is not one Kafka defines", int8(c))
}
