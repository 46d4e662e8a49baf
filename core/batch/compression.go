package batch

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
)

// MaxDecompressedBytes bounds how large one batch's records may decompress
// to (1 GiB, as franz-go's default). A batch claiming more is rejected with
// ErrDecompressTooLarge instead of exhausting memory.
const MaxDecompressedBytes = 1 << 30

// ErrDecompressTooLarge: a batch's records would decompress past
// MaxDecompressedBytes.
var ErrDecompressTooLarge = errors.New("record batch decompresses past the 1 GiB limit")

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

// zstdDecoder is shared: DecodeAll is safe for concurrent use. Its memory
// bound rejects frames that would decompress past the limit.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // one decoder state per GOMAXPROCS
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(MaxDecompressedBytes),
	)
})

// zstdEncoder is shared for Encode: EncodeAll is safe for concurrent use.
// The 64 KiB window keeps decoder memory small, as Kafka clients do.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(64<<10),
		zstd.WithZeroFrames(true),
	)
})

// decompress returns the records section of a batch decompressed. For
// CompressionNone it returns src itself.
func decompress(c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return src, nil
	case CompressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readBounded(zr)
	case CompressionSnappy:
		return decodeSnappy(src)
	case CompressionLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)))
	case CompressionZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return nil, fmt.Errorf("creating zstd decoder: %w", err)
		}
		out, err := dec.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, ErrDecompressTooLarge
		}
		return out, err
	}
	return nil, fmt.Errorf("compression codec %d is not one Kafka defines", int8(c))
}

// readBounded reads r to the end, failing past MaxDecompressedBytes.
func readBounded(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, MaxDecompressedBytes+1))
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressedBytes {
		return nil, ErrDecompressTooLarge
	}
	return out.Bytes(), nil
}

// decodeSnappy decodes xerial-framed or raw snappy.
func decodeSnappy(src []byte) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(nil, src)
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
		if out, err = decodeSnappyBlock(out, rest[:n]); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// decodeSnappyBlock appends the decoding of one raw snappy block to dst.
func decodeSnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > MaxDecompressedBytes-len(dst) {
		return nil, ErrDecompressTooLarge
	}
	// No snappy element expands more than 22 times (a 3-byte copy of 64
	// bytes), so a larger claim is false; reject it before allocating.
	if n > maxSnappyRatio*len(block) {
		return nil, fmt.Errorf("snappy: block of %d bytes claims to decode to %d, beyond snappy's expansion limit", len(block), n)
	}
	at := len(dst)
	dst = append(dst, make([]byte, n)...)
	if _, err := s2.Decode(dst[at:], block); err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return dst, nil
}

// compress appends src compressed with c to dst, in the framing the Java
// client writes (xerial for snappy, the LZ4 frame format for lz4).
func compress(dst []byte, c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		buf := bytes.NewBuffer(dst)
		zw := gzip.NewWriter(buf)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
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
	case CompressionLZ4:
		buf := bytes.NewBuffer(dst)
		zw := lz4.NewWriter(buf)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return buf.Bytes(), nil
	case CompressionZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("creating zstd encoder: %w", err)
		}
		return enc.EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("compression codec %d is not one Kafka defines", int8(c))
}
