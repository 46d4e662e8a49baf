// Package datapath couples one mirror's fetcher (source) and writer
// (destination), shared by the mirror's runners as their runner.DataPath,
// with the data path's metrics and the memory bound of map-mode decoding.
// core/mirror builds one per connected mirror.
package datapath

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/core/writer"
)

// Path couples one mirror's fetcher (source) with its writer
// (destination), shared by the mirror's runners: it is their
// runner.DataPath.
type Path struct {
	log hclog.Logger
	src *kgo.Client
	f   *fetcher.Manager
	w   *writer.Writer
	// metrics records the fetch and produce requests' figures;
	// unobserve stops it reading f's and w's (Close).
	metrics   *metrics.DataPath
	unobserve func()
	// topics knows the destination topics' max.message.bytes (map-mode
	// decoding bound, batches refused for their size).
	topics *topicsync.Syncer
	// SourceBounds and DestBounds gather the log bounds the mirror's
	// partitions ask for while they prepare: one ListOffsets per topic
	// and broker for the partitions asking together.
	SourceBounds, DestBounds *kafkalog.BoundsBatcher
	// SourceLeaders and DestLeaders gather the leader lookups of the
	// partitions reading their logs raw at once (proofs, stop).
	SourceLeaders, DestLeaders *kafkalog.LeaderBatcher
}

// Deps are what a mirror's data path is built from.
type Deps struct {
	Mirror string
	// Source and Dest are the mirror's clusters; the caller closes them.
	Source, Dest *kgo.Client
	// Config gives the daemon-wide fetch and produce settings.
	Config *config.Config
	// Log is the mirror's logger; the fetcher and writer log under it.
	Log     hclog.Logger
	Metrics *metrics.Provider
	// Throttle and Budget are the daemon-wide throttle and fetch budget,
	// shared by every mirror.
	Throttle fetcher.ThrottleFunc
	Budget   *fetcher.Budget
	// Topics knows the destination topics' max.message.bytes (map-mode
	// decoding bound, batches refused for their size).
	Topics *topicsync.Syncer
}

// New builds a mirror's data path; nothing runs until Run.
func New(d Deps) (*Path, error) {
	cfg, src := d.Config, d.Source
	mdp, err := d.Metrics.NewDataPath(d.Mirror)
	if err != nil {
		return nil, err
	}
	f, err := fetcher.New(src,
		fetcher.WithFetchersPerBroker(cfg.NumReplicaFetchers),
		fetcher.WithPartitionMaxBytes(int32(cfg.ReplicaFetchMaxBytes)),
		fetcher.WithMinBytes(int32(cfg.ReplicaFetchMinBytes)),
		fetcher.WithResponseMaxBytes(int32(cfg.ReplicaFetchResponseMaxBytes)),
		fetcher.WithMaxWait(cfg.ReplicaFetchWaitMax),
		fetcher.WithBackoff(cfg.ReplicaFetchBackoff),
		fetcher.WithLogger(d.Log.Named("fetcher")),
		fetcher.WithThrottle(d.Throttle),
		fetcher.WithBudget(d.Budget),
		fetcher.WithFetchHook(func(i fetcher.FetchInfo) { mdp.FetchDone(i.Broker, i.Latency, i.Bytes, i.Release, i.Err != nil) }),
	)
	if err != nil {
		return nil, err
	}
	w, err := writer.New(d.Dest, writer.MirrorName(d.Mirror), writer.Logger(d.Log.Named("writer")), writer.RequestTimeout(cfg.RequestTimeout), writer.TransactionTimeout(cfg.TransactionTimeout), writer.IdleWriterTimeout(cfg.TransactionWriterIdle),
		writer.MaxInflightPerPartition(cfg.AppendsInFlight), writer.MaxInflightPerBroker(cfg.ProduceRequestsInFlight), writer.Observer(produceMetrics{mdp}))
	if err != nil {
		return nil, err
	}
	unobserve := mdp.Observe(func() metrics.DataPathStats {
		st := f.Stats()
		return metrics.DataPathStats{FetchesInFlight: st.FetchesInFlight, BufferedBytes: st.BufferedBytes,
			PartitionMaxBytes: st.PartitionMaxBytes, AppendsInFlight: w.InflightAppends()}
	})
	return &Path{log: d.Log, src: src, f: f, w: w, metrics: mdp, unobserve: unobserve, topics: d.Topics,
		SourceBounds: kafkalog.NewBoundsBatcher(src, kafkalog.BoundsWindow), DestBounds: kafkalog.NewBoundsBatcher(d.Dest, kafkalog.BoundsWindow),
		SourceLeaders: kafkalog.NewLeaderBatcher(src, kafkalog.BoundsWindow), DestLeaders: kafkalog.NewLeaderBatcher(d.Dest, kafkalog.BoundsWindow)}, nil
}

// produceMetrics records the writer's ProduceRequests in the mirror's
// data-path metrics.
type produceMetrics struct{ d *metrics.DataPath }

func (p produceMetrics) ProduceSent(info writer.ProduceRequestInfo) { p.d.ProduceSent(info.Broker) }

func (p produceMetrics) ProduceDone(info writer.ProduceRequestInfo, res writer.ProduceResult) {
	p.d.ProduceDone(info.Broker, res.Latency, info.Partitions, info.Bytes, res.Err != nil || res.FailedPartitions > 0)
}

// Run runs the fetcher until ctx is done.
func (dp *Path) Run(ctx context.Context) {
	if err := dp.f.Run(ctx); err != nil && ctx.Err() == nil {
		dp.log.Error("fetcher stopped", "error", err)
	}
}

// Source is the mirror's source client.
func (dp *Path) Source() *kgo.Client { return dp.src }

// Close closes the writer and stops the metrics reading the data path.
func (dp *Path) Close() {
	dp.unobserve()
	dp.w.Close()
}

// Subscribe starts fetching a partition into q.
func (dp *Path) Subscribe(spec fetcher.PartitionSpec, q *fetcher.Queue) error {
	return dp.f.Add(spec, q)
}

// Unsubscribe stops fetching a partition.
func (dp *Path) Unsubscribe(topic string, p int32) { dp.f.Remove(topic, p) }

// Done acknowledges a delivery a runner has written.
func (dp *Path) Done(topic string, p int32, bytes int) { dp.f.Done(topic, p, bytes) }

// NewWriter returns a new writer of a destination partition.
func (dp *Path) NewWriter(topic string, p int32, onTxnWriter func(context.Context, writer.TxnWriterInfo) error) (*writer.Partition, error) {
	return dp.w.Partition(topic, p, onTxnWriter)
}

// Refused handles a batch the destination refused for its size
// (topicsync.Syncer.Refused): one more try once the destination topic's
// max.message.bytes is raised to the source's, or why the batch is refused.
func (dp *Path) Refused(ctx context.Context, topic string, b batch.Batch, expect int64, cause error) (bool, error) {
	return dp.topics.Refused(ctx, topic, b, expect, cause)
}

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
func (dp *Path) MapRecords(ctx context.Context, topic string, b batch.Batch) ([]batch.Record, error) {
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
