package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
)

// dataPath couples one mirror's fetcher (source) with its writer
// (destination). It is the only place where the runner meets those two
// packages.
type dataPath struct {
	m   *mirrorRun
	src *kgo.Client
	f   *fetcher.Manager
	w   *writer.Writer

	mu    sync.Mutex
	parts map[topicPartition]*writer.Partition
}

// firstBatchBase returns the base offset of the source batch that holds
// offset (a log start may fall inside a batch).
func (dp *dataPath) firstBatchBase(ctx context.Context, topic string, topicID [16]byte, p int32, offset, end int64) (int64, error) {
	if offset >= end {
		return offset, nil
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	leader, err := dp.leader(ctx, topic, p)
	if err != nil {
		return 0, err
	}
	resp, err := req.RequestWith(ctx, dp.src.Broker(int(leader)))
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, err
			}
			sc := batch.NewScanner(rp.RecordBatches)
			for sc.Next() {
				if b := sc.Batch(); b.NextOffset() > offset {
					return b.BaseOffset(), nil
				}
			}
			if err := sc.Err(); err != nil {
				return 0, err
			}
		}
	}
	return 0, fmt.Errorf("no batch at offset %d below the high watermark %d", offset, end)
}

func (dp *dataPath) leader(ctx context.Context, topic string, p int32) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, dp.src)
	if err != nil {
		return 0, err
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return 0, err
		}
		for _, rp := range rt.Partitions {
			if rp.Partition == p && rp.Leader >= 0 {
				return rp.Leader, nil
			}
		}
	}
	return 0, fmt.Errorf("no leader for %s partition %d", topic, p)
}

// fillerBatchRecords is how many filler records go in one batch.
const fillerBatchRecords = 10000

// fillerKey is the key of every filler record and the name of its header.
// Topics whose cleanup.policy includes compact refuse records without a key
// (INVALID_RECORD), so filler has one.
const fillerKey = "kmirror.filler"

// writeFiller appends filler records to the destination partition so that
// its end offset goes from `from` to `to`. Filler records have the key
// "kmirror.filler", a null value and a "kmirror.filler" header carrying the
// mirror name, so that anyone who reads them before DeleteRecords removes
// them can tell what they are. The null value makes each a tombstone: on a
// compacted topic a consumer that reads one deletes a key nobody wrote, and
// the log cleaner removes them all instead of keeping one as a live value.
func (dp *dataPath) writeFiller(ctx context.Context, r *runner, from, to int64) error {
	now := time.Now().UnixMilli()
	key, header := []byte(fillerKey), []batch.Header{{Key: fillerKey, Value: []byte(r.m.name)}}
	for off := from; off < to; {
		n := min(int64(fillerBatchRecords), to-off)
		recs := make([]batch.Record, n)
		for i := range recs {
			recs[i] = batch.Record{Offset: off + int64(i), Timestamp: now, Key: key, Headers: header}
		}
		b, err := batch.Encode(batch.EncodeOptions{BaseOffset: off, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			return err
		}
		if err := dp.append(ctx, r, b, off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// deletesRecords reports whether the destination topic accepts
// DeleteRecords, which alignment needs to remove its filler: brokers refuse
// it (POLICY_VIOLATION) unless the topic's cleanup.policy includes delete.
func (dp *dataPath) deletesRecords(ctx context.Context, topic string) (bool, error) {
	rcs, err := dp.m.dstAdm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = rcs.On(topic, nil); err == nil && rc.Err != nil {
			err = rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				return slices.Contains(strings.Split(strings.ReplaceAll(c.MaybeValue(), " ", ""), ","), "delete"), nil
			}
		}
		if err == nil {
			err = errors.New("the broker did not return it")
		}
	}
	return false, fmt.Errorf("reading the destination topic's cleanup.policy: %w", err)
}

// txnWriterRecord is how a destination transactional writer is kept in the
// partition record (extension "txn_writers").
type txnWriterRecord = writer.TxnWriterInfo

// partitionWriter returns the runner's destination partition writer,
// creating it on first use. Its hook persists every transactional writer in
// the partition record before the writer is used.
func (dp *dataPath) partitionWriter(r *runner) (*writer.Partition, error) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	tp := topicPartition{r.topic, r.partition}
	if pw, ok := dp.parts[tp]; ok {
		return pw, nil
	}
	pw, err := dp.w.Partition(r.topic, r.partition, func(ctx context.Context, info writer.TxnWriterInfo) error {
		return r.p.Update(ctx, func(d *partition.Data) error {
			var list []txnWriterRecord
			if _, err := d.Extension(extTxnWriters, &list); err != nil {
				return err
			}
			replaced := false
			for i := range list {
				if list[i].SourceProducerID == info.SourceProducerID {
					list[i], replaced = info, true
				}
			}
			if !replaced {
				list = append(list, info)
			}
			return d.SetExtension(extTxnWriters, list)
		})
	})
	if err != nil {
		return nil, err
	}
	dp.parts[tp] = pw
	return pw, nil
}

// resumeWriters replaces the runner's partition writer with a fresh one and
// hands it the recorded transactional writers; the writer learns from the
// destination which transactions are open (and waits for those completing),
// so the destination end offset read afterwards is the resume point. Writers
// the destination no longer holds as recorded are in the report's Lost list
// for the caller (recoverLost); a transaction open on the partition that
// kmirror did not start is an error.
func (dp *dataPath) resumeWriters(ctx context.Context, r *runner) (writer.ResumeReport, error) {
	dp.mu.Lock()
	if old, ok := dp.parts[topicPartition{r.topic, r.partition}]; ok {
		old.Close()
		delete(dp.parts, topicPartition{r.topic, r.partition})
	}
	dp.mu.Unlock()
	pw, err := dp.partitionWriter(r)
	if err != nil {
		return writer.ResumeReport{}, r.errorf("%w", err)
	}
	var list []txnWriterRecord
	if _, err := r.p.Record().Extension(extTxnWriters, &list); err != nil {
		return writer.ResumeReport{}, r.errorf("reading the recorded transactional writers: %w", err)
	}
	rep, err := pw.Resume(ctx, list)
	if err != nil {
		return writer.ResumeReport{}, r.errorf("resuming destination transactions: %w", err)
	}
	for _, rw := range rep.Resumed {
		r.log.Info("resumed an open destination transaction", "transactional_id", rw.Writer.TransactionalID)
	}
	if len(rep.Foreign) > 0 {
		f := rep.Foreign[0]
		return writer.ResumeReport{}, partition.NonRetryable(r.errorf("producer %d has a transaction open on the destination partition since offset %d that kmirror did not start: "+
			"someone else writes to the mirror topic", f.ProducerID, f.StartOffset))
	}
	return rep, nil
}

// append writes b to the destination partition, which must assign it base
// offset expect.
func (dp *dataPath) append(ctx context.Context, r *runner, b batch.Batch, expect int64) error {
	pw, err := dp.partitionWriter(r)
	if err != nil {
		return r.errorf("%w", err)
	}
	if _, err := pw.AppendAt(ctx, b, expect); err != nil {
		if errors.Is(err, writer.ErrOffsetMismatch) {
			return partition.NonRetryable(r.errorf("%w", err))
		}
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return r.errorf("%w; kmirror's destination principal must be allowed to write (make it a super user: mirror topics carry a DENY WRITE ACL for User:* while mirroring)", err)
		}
		return r.errorf("%w", err)
	}
	return nil
}

// abortAll aborts the destination transactions the partition holds open.
func (dp *dataPath) abortAll(ctx context.Context, r *runner) error {
	pw, err := dp.partitionWriter(r)
	if err != nil {
		return r.errorf("%w", err)
	}
	if err := pw.AbortAll(ctx); err != nil {
		return r.errorf("aborting open destination transactions: %w", err)
	}
	return nil
}

func newDataPath(m *mirrorRun, cfg *config.Config, src *kgo.Client) (*dataPath, error) {
	f, err := fetcher.New(src,
		fetcher.WithFetchersPerBroker(cfg.NumReplicaFetchers),
		fetcher.WithPartitionMaxBytes(int32(cfg.ReplicaFetchMaxBytes)),
		fetcher.WithMinBytes(int32(cfg.ReplicaFetchMinBytes)),
		fetcher.WithResponseMaxBytes(int32(cfg.ReplicaFetchResponseMaxBytes)),
		fetcher.WithMaxWait(cfg.ReplicaFetchWaitMax),
		fetcher.WithBackoff(cfg.ReplicaFetchBackoff),
		fetcher.WithLogger(m.log.Named("fetcher")),
		fetcher.WithThrottle(m.e.limiter.Wait),
	)
	if err != nil {
		return nil, err
	}
	w, err := writer.New(m.dst, writer.MirrorName(m.name), writer.Logger(m.log.Named("writer")), writer.RequestTimeout(cfg.RequestTimeout), writer.TransactionTimeout(cfg.TransactionTimeout))
	if err != nil {
		return nil, err
	}
	return &dataPath{m: m, src: src, f: f, w: w, parts: map[topicPartition]*writer.Partition{}}, nil
}

// run runs the fetcher until ctx is done.
func (dp *dataPath) run(ctx context.Context) {
	if err := dp.f.Run(ctx); err != nil && ctx.Err() == nil {
		dp.m.log.Error("fetcher stopped", "error", err)
	}
}

func (dp *dataPath) close() {
	dp.w.Close()
}

// subscribe starts fetching the runner's partition from offset into a queue
// the runner reads.
// epoch is the source leader epoch of the batch that ends right before
// offset (-1 when unknown); the source reports a divergence against it.
func (dp *dataPath) subscribe(r *runner, offset int64, epoch int32) (*fetcher.Queue, error) {
	q := fetcher.NewQueue()
	dp.f.Remove(r.topic, r.partition)
	err := dp.f.Add(fetcher.PartitionSpec{Topic: r.topic, TopicID: r.topicID, Partition: r.partition, FetchOffset: offset, LeaderEpoch: epoch}, q)
	if err != nil {
		return nil, r.errorf("%w", err)
	}
	return q, nil
}

func (dp *dataPath) unsubscribe(r *runner) { dp.f.Remove(r.topic, r.partition) }

// done acknowledges a delivery the runner has written.
func (dp *dataPath) done(r *runner, f fetcher.Fetched) { dp.f.Done(r.topic, r.partition, f.Bytes()) }

// isSourceLogChanged reports whether a fetch error means the source log is
// no longer the one mirrored, which no retry can fix.
func isSourceLogChanged(err error) bool {
	return errors.Is(err, fetcher.ErrOffsetOutOfRange) || errors.Is(err, fetcher.ErrDiverged) || errors.Is(err, fetcher.ErrTopicIDChanged)
}
