package mirror

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/core/writer"
)

// dataPath couples one mirror's fetcher (source) with its writer
// (destination), shared by the mirror's runners: it is their
// runner.DataPath.
type dataPath struct {
	m   *mirrorRun
	src *kgo.Client
	f   *fetcher.Manager
	w   *writer.Writer
	// metrics records the fetch and produce requests' figures;
	// unobserve stops it reading f's and w's (close).
	metrics   *metrics.DataPath
	unobserve func()
	// topics knows the destination topics' max.message.bytes (map-mode
	// decoding bound, batches refused for their size).
	topics *topicsync.Syncer
	// srcBounds and dstBounds gather the log bounds the mirror's
	// partitions ask for while they prepare: one ListOffsets per topic
	// and broker for the partitions asking together.
	srcBounds, dstBounds *kafkalog.BoundsBatcher
}

func newDataPath(m *mirrorRun, cfg *config.Config, src *kgo.Client, topics *topicsync.Syncer) (*dataPath, error) {
	mdp, err := m.e.opts.Metrics.NewDataPath(m.name)
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
		fetcher.WithLogger(m.log.Named("fetcher")),
		fetcher.WithThrottle(m.e.limiter.Wait),
		fetcher.WithBudget(m.e.budget),
		fetcher.WithFetchHook(func(i fetcher.FetchInfo) { mdp.FetchDone(i.Broker, i.Latency, i.Bytes, i.Release, i.Err != nil) }),
	)
	if err != nil {
		return nil, err
	}
	w, err := writer.New(m.dst, writer.MirrorName(m.name), writer.Logger(m.log.Named("writer")), writer.RequestTimeout(cfg.RequestTimeout), writer.TransactionTimeout(cfg.TransactionTimeout), writer.IdleWriterTimeout(cfg.TransactionWriterIdle),
		writer.MaxInflightPerPartition(cfg.AppendsInFlight), writer.MaxInflightPerBroker(cfg.ProduceRequestsInFlight), writer.Observer(produceMetrics{mdp}))
	if err != nil {
		return nil, err
	}
	unobserve := mdp.Observe(func() metrics.DataPathStats {
		st := f.Stats()
		return metrics.DataPathStats{FetchesInFlight: st.FetchesInFlight, BufferedBytes: st.BufferedBytes,
			PartitionMaxBytes: st.PartitionMaxBytes, AppendsInFlight: w.InflightAppends()}
	})
	return &dataPath{m: m, src: src, f: f, w: w, metrics: mdp, unobserve: unobserve, topics: topics,
		srcBounds: kafkalog.NewBoundsBatcher(src, kafkalog.BoundsWindow), dstBounds: kafkalog.NewBoundsBatcher(m.dst, kafkalog.BoundsWindow)}, nil
}

// produceMetrics records the writer's ProduceRequests in the mirror's
// data-path metrics.
type produceMetrics struct{ d *metrics.DataPath }

func (p produceMetrics) ProduceSent(info writer.ProduceRequestInfo) { p.d.ProduceSent(info.Broker) }

func (p produceMetrics) ProduceDone(info writer.ProduceRequestInfo, res writer.ProduceResult) {
	p.d.ProduceDone(info.Broker, res.Latency, info.Partitions, info.Bytes, res.Err != nil || res.FailedPartitions > 0)
}

// run runs the fetcher until ctx is done.
func (dp *dataPath) run(ctx context.Context) {
	if err := dp.f.Run(ctx); err != nil && ctx.Err() == nil {
		dp.m.log.Error("fetcher stopped", "error", err)
	}
}

func (dp *dataPath) close() {
	dp.unobserve()
	dp.w.Close()
}

// Subscribe starts fetching a partition into q.
func (dp *dataPath) Subscribe(spec fetcher.PartitionSpec, q *fetcher.Queue) error {
	return dp.f.Add(spec, q)
}

// Unsubscribe stops fetching a partition.
func (dp *dataPath) Unsubscribe(topic string, p int32) { dp.f.Remove(topic, p) }

// Done acknowledges a delivery a runner has written.
func (dp *dataPath) Done(topic string, p int32, bytes int) { dp.f.Done(topic, p, bytes) }

// NewWriter returns a new writer of a destination partition.
func (dp *dataPath) NewWriter(topic string, p int32, onTxnWriter func(context.Context, writer.TxnWriterInfo) error) (*writer.Partition, error) {
	return dp.w.Partition(topic, p, onTxnWriter)
}

// Refused handles a batch the destination refused for its size
// (topicsync.Syncer.Refused): one more try once the destination topic's
// max.message.bytes is raised to the source's, or why the batch is refused.
func (dp *dataPath) Refused(ctx context.Context, topic string, b batch.Batch, expect int64, cause error) (bool, error) {
	return dp.topics.Refused(ctx, topic, b, expect, cause)
}

// mirrorEvents reports a mirror's runners' events to the engine. Each
// runner has its own, holding the mirror's counts of appended batches, so
// that Appended (run on every batch) takes no lock and builds nothing.
type mirrorEvents struct {
	m       *mirrorRun
	appends *metrics.AppendCounts
}

func newMirrorEvents(m *mirrorRun) mirrorEvents {
	return mirrorEvents{m: m, appends: m.e.inst.AppendCountsOf(m.name)}
}

func (ev mirrorEvents) Appended(bytes, offsets int64) { ev.appends.Appended(bytes, offsets) }

func (ev mirrorEvents) Mismatch(topic string, p int32, action string) {
	ev.m.e.inst.DestinationMismatch(ev.m.name, topic, p, action)
}

func (ev mirrorEvents) Stopped() { ev.m.triggerSync() }

// runnerFor returns the runner of an already loaded partition of source
// topic t.
func runnerFor(m *mirrorRun, t sourceTopic, part *partition.Partition) *runner.Runner {
	return runner.New(runner.Deps{
		Mirror: m.name, Topic: t.Name, TopicID: t.ID, Partition: part,
		Store: m.e.opts.Store, Log: m.log,
		Source: m.dp.src, Dest: m.dst, DestAdmin: m.dstAdm,
		SourceBounds: m.dp.srcBounds, DestBounds: m.dp.dstBounds,
		Path: m.dp, Control: m.e.controlOf(m.name), Events: newMirrorEvents(m),
		Settings: runner.Settings{
			AlignmentBudget: m.dcfg.OffsetAlignmentMaxRecords,
			MismatchAction:  m.cfg.DestinationMismatchAction,
			MaxAttempts:     m.e.machine.Backoff().MaxAttempts,
		},
	})
}

// newRunner loads or creates the partition's record. The source topic id
// is recorded on first use; when the record holds another id, the source
// topic was recreated while kmirror was not looking, and the runner fails
// the partition as soon as it runs.
func newRunner(ctx context.Context, m *mirrorRun, t sourceTopic, p int32) (*runner.Runner, error) {
	// A new record holds the source topic id from its first write.
	var init func(*partition.Data) error
	if t.ID != ([16]byte{}) {
		init = func(d *partition.Data) error { d.SourceTopicID = topicIDString(t.ID); return nil }
	}
	part, _, err := m.e.machine.LoadOrCreateWith(ctx, m.name, t.Name, p, "topic in scope of the mirror", init)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: topic %s partition %d: loading its state: %w", m.name, t.Name, p, err)
	}
	recorded := part.Record().SourceTopicID
	if recorded == "" && t.ID != ([16]byte{}) {
		if err := part.Update(ctx, func(d *partition.Data) error { d.SourceTopicID = topicIDString(t.ID); return nil }); err != nil {
			return nil, fmt.Errorf("mirror %s: topic %s partition %d: recording the source topic id: %w", m.name, t.Name, p, err)
		}
	}
	newID := t.ID
	recreated := recorded != "" && recorded != topicIDString(t.ID) && t.ID != ([16]byte{})
	if recreated {
		if old, ok := parseTopicID(recorded); ok {
			t.ID = old // the runner mirrors the recorded topic
		}
	}
	r := runnerFor(m, t, part)
	if recreated {
		r.RequestRecreated(newID)
	}
	return r, nil
}
