package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/partition"
)

// mapDecodeMultiple and mapDecodeFloor bound the memory decoding one
// map-mode batch may take (its decompressed records and the records decoded
// from them, batch.Batch.RecordsWithin), from the destination topic's
// max.message.bytes: 64 times that limit, never less than 16 MiB nor more
// than batch.MaxDecompressedBytes (1 GiB). Map mode decodes every batch to
// build the offset map, and the destination takes the batch (as it is, or
// re-encoded with the same codec, no larger) only up to its limit, measured
// compressed. 64 times it leaves room for the compression ratios producers
// reach on real data (Java producers size batches after compression), while
// a hostile batch of kilobytes that inflates to gigabytes is refused before
// it is allocated. The floor keeps a small limit from refusing ordinary
// zstd windows (up to 8 MiB at the levels producers use).
const (
	mapDecodeMultiple = 64
	mapDecodeFloor    = 16 << 20
)

// mapDecodeBound returns the decoding bound for a destination limit (0:
// unknown, Kafka's default of 1048588 is assumed).
func mapDecodeBound(dstLimit int64) int {
	if dstLimit <= 0 {
		dstLimit = 1048588
	}
	if dstLimit > batch.MaxDecompressedBytes/mapDecodeMultiple {
		return batch.MaxDecompressedBytes
	}
	return int(max(dstLimit*mapDecodeMultiple, mapDecodeFloor))
}

// MapRecords decodes source batch b for map mode within mapDecodeBound
// of the destination topic's max.message.bytes. A batch over the bound
// fails the partition, non-retryable (the same batch would fail again),
// naming its offsets, its size and the bound; nothing past the bound is
// allocated.
func (dp *dataPath) MapRecords(ctx context.Context, topic string, b batch.Batch) ([]batch.Record, error) {
	dst, err := dp.topics.DestLimit(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("reading the destination topic's max.message.bytes, which bounds map-mode decoding: %w", err)
	}
	bound := mapDecodeBound(dst.Bytes)
	recs, err := b.RecordsWithin(bound)
	if errors.Is(err, batch.ErrDecompressTooLarge) {
		dp.topics.ForgetLimit(topic) // a raised limit is read again when the partition restarts
		return nil, partition.NonRetryable(fmt.Errorf("map mode refuses to decode the source batch: %w; the bound is %d bytes (%d times the destination topic's max.message.bytes %s, at least %d, at most %d): "+
			"a batch that decodes to far more than the destination accepts is taken for a decompression bomb; if it is genuine, raise max.message.bytes of destination topic %s, "+
			"then restart the partition (kmirror mirrors stop, then start, of its topic)", err, bound, mapDecodeMultiple, dst, mapDecodeFloor, batch.MaxDecompressedBytes, topic))
	}
	if err != nil {
		return nil, fmt.Errorf("decoding source batch at %d: %w", b.BaseOffset(), err)
	}
	return recs, nil
}
