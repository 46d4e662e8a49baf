package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// toEnd as the target of catchUp: read to the partitions' last stable
// offset as the brokers report it now.
const toEnd = -1

// fetchWait is how long a fetch that waits for a record not yet visible
// (its commit marker being written) waits at the broker. Short: brokers
// do not wake a waiting read_committed fetch when the last stable offset
// moves, so a long wait costs its whole length on every write.
const fetchWait = 5 * time.Millisecond

// topicMeta is what the store needs of the topic's metadata.
type topicMeta struct {
	id       [16]byte
	leaders  []int32 // by partition; -1: none known
	replicas int     // the fewest replicas of any partition
}

// entry is a key's last record as read from the topic.
type entry struct {
	value   []byte // without the format tag
	version int64  // offset + 1
	deleted bool   // a tombstone
}

// partitionLog is the topic materialised in memory: every key's last
// record, and for each partition the offset read up to.
type partitionLog struct {
	cl    *kgo.Client
	topic string
	dec   kgo.Decompressor

	// pmu[p] is held while partition p is fetched and applied; it
	// guards next[p].
	pmu  []sync.Mutex
	next []int64

	mu  sync.RWMutex
	mem map[string]entry
	// watching[p] holds offsets of partition p whose records a writer
	// waits to learn about, each true once read (committed).
	watching []map[int64]bool

	metaMu sync.Mutex
	meta   topicMeta
}

func newPartitionLog(cl *kgo.Client, topic string, meta topicMeta) *partitionLog {
	n := len(meta.leaders)
	l := &partitionLog{
		cl: cl, topic: topic, dec: kgo.DefaultDecompressor(),
		pmu: make([]sync.Mutex, n), next: make([]int64, n),
		mem: make(map[string]entry), meta: meta,
		watching: make([]map[int64]bool, n),
	}
	return l
}

// watch starts looking out for the records at offsets offs of partition
// p, forgetting those it watched before: watched reports whether one was
// read (committed) since.
func (l *partitionLog) watch(p int32, offs ...int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watching[p] = make(map[int64]bool, len(offs))
	for _, o := range offs {
		l.watching[p][o] = false
	}
}

// watched reports whether the record at offset off of partition p, which
// watch named, was read: it was committed.
func (l *partitionLog) watched(p int32, off int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.watching[p][off]
}

// all lists every partition.
func (l *partitionLog) all() []int32 {
	out := make([]int32, len(l.next))
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func (l *partitionLog) get(key string) (statestore.Entry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.mem[key]
	if !ok || e.deleted {
		return statestore.Entry{}, false
	}
	return statestore.Entry{Key: key, Value: append([]byte{}, e.value...), Version: e.version}, true
}

// version is key's current version: 0 when absent.
func (l *partitionLog) version(key string) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if e, ok := l.mem[key]; ok && !e.deleted {
		return e.version
	}
	return 0
}

func (l *partitionLog) list(match func(string) bool) []statestore.Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []statestore.Entry
	for k, e := range l.mem {
		if !e.deleted && match(k) {
			out = append(out, statestore.Entry{Key: k, Value: append([]byte{}, e.value...), Version: e.version})
		}
	}
	return out
}

// apply records one partition's records, in offset order.
func (l *partitionLog) apply(recs []*kgo.Record) {
	if len(recs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		if w := l.watching[r.Partition]; w != nil {
			if _, ok := w[r.Offset]; ok {
				w[r.Offset] = true
			}
		}
		e := entry{version: r.Offset + 1}
		switch {
		case r.Value == nil:
			e.deleted = true
		case len(r.Value) > 0 && r.Value[0] == formatV1:
			e.value = append([]byte{}, r.Value[1:]...)
		default:
			// Not written by this store: read as it is.
			e.value = append([]byte{}, r.Value...)
		}
		l.mem[string(r.Key)] = e
	}
}

// catchUp reads parts (distinct) until each has been read up to target,
// or with toEnd up to the last stable offset a fetch issued after catchUp
// began reports. Records of aborted transactions are skipped.
func (l *partitionLog) catchUp(ctx context.Context, parts []int32, target int64) error {
	targets := make(map[int32]int64, len(parts))
	for _, p := range parts {
		targets[p] = target
	}
	return l.catchUpTo(ctx, targets)
}

// catchUpTo is catchUp with a target of its own for each partition.
func (l *partitionLog) catchUpTo(ctx context.Context, targets map[int32]int64) error {
	parts := make([]int32, 0, len(targets))
	for p := range targets {
		parts = append(parts, p)
	}
	slices.Sort(parts) // locked in order: no deadlock between callers
	for _, p := range parts {
		l.pmu[p].Lock()
		defer l.pmu[p].Unlock()
	}
	pending := parts
	alone := map[int32]bool{} // partitions to fetch in a request of their own
	backoff := 10 * time.Millisecond
	var lastErr error // the last retriable error, for the message when the deadline ends the retries
	ended := func() error {
		if lastErr != nil {
			return fmt.Errorf("%w (retrying after: %v)", ctx.Err(), lastErr)
		}
		return ctx.Err()
	}
	for len(pending) > 0 {
		if ctx.Err() != nil {
			return ended()
		}
		reqs := l.plan(pending, alone)
		var still []int32
		retry := false
		for leader, ps := range reqs {
			got, err := l.fetch(ctx, leader, ps, targets)
			if err != nil {
				if !retriable(err) {
					return err
				}
				retry, lastErr = true, err
			}
			for _, p := range ps {
				res, ok := got[p]
				if !ok || !res.done {
					still = append(still, p)
				}
				if ok && !res.progress && len(ps) > 1 {
					alone[p] = true
				}
			}
		}
		pending = still
		if retry {
			if err := l.refreshMeta(ctx); errors.Is(err, errPartitionCount) {
				return err
			}
			select {
			case <-ctx.Done():
				return ended()
			case <-time.After(backoff): // retrying after a leader change or a lost connection
			}
			backoff = min(2*backoff, 500*time.Millisecond)
		}
	}
	return nil
}

// plan groups partitions into fetch requests: one per leader, and one of
// its own for each partition in alone.
func (l *partitionLog) plan(pending []int32, alone map[int32]bool) map[fetchTarget][]int32 {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	out := map[fetchTarget][]int32{}
	for _, p := range pending {
		t := fetchTarget{leader: l.meta.leaders[p], solo: -1}
		if alone[p] {
			t.solo = p
		}
		out[t] = append(out[t], p)
	}
	return out
}

// fetchTarget names one fetch request: its leader, and the one partition
// it is for when it is fetched alone (-1 otherwise).
type fetchTarget struct {
	leader int32
	solo   int32
}

// fetchResult is what one fetch did for one partition.
type fetchResult struct {
	done     bool // read up to the target
	progress bool // read further than before
}

// errPartitionCount: the topic's partition count changed under the store.
var errPartitionCount = errors.New("the state topic's partition count changed")

// errNoLeader: a partition has no leader known.
var errNoLeader = errors.New("no leader known")

// retriable reports whether a fetch error is worth retrying after a
// metadata refresh: a leader change, a lost connection.
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownTopicID)
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// fetch sends one Fetch request for ps to t's leader and applies what
// comes back.
func (l *partitionLog) fetch(ctx context.Context, t fetchTarget, ps []int32, targets map[int32]int64) (map[int32]fetchResult, error) {
	if t.leader < 0 {
		return nil, fmt.Errorf("partition %d: %w", ps[0], errNoLeader)
	}
	l.metaMu.Lock()
	id := l.meta.id
	l.metaMu.Unlock()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	req.IsolationLevel = 1 // read_committed
	req.SessionEpoch = -1
	for _, p := range ps {
		if targets[p] != toEnd {
			req.MaxWaitMillis = int32(fetchWait / time.Millisecond)
		}
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = l.topic, id
	for _, p := range ps {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = l.next[p]
		rp.PartitionMaxBytes = 16 << 20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, l.cl.Broker(int(t.leader)))
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := make(map[int32]fetchResult, len(ps))
	var firstErr error
	for i := range resp.Topics {
		rtp := &resp.Topics[i]
		if rtp.Topic != l.topic && rtp.TopicID != id {
			continue
		}
		for j := range rtp.Partitions {
			rp := &rtp.Partitions[j]
			p := rp.Partition
			if p < 0 || int(p) >= len(l.next) {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("partition %d: %w", p, err)
				}
				continue
			}
			before := l.next[p]
			fp, off := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: before, IsolationLevel: kgo.ReadCommitted(), Topic: l.topic, Partition: p,
			}, rp, l.dec, nil)
			if fp.Err != nil {
				return nil, fmt.Errorf("partition %d at offset %d: %w", p, before, fp.Err)
			}
			l.apply(fp.Records)
			if off > l.next[p] {
				l.next[p] = off
			}
			// A partition fetched alone that returns no batch below
			// its last stable offset has nothing there (a request
			// always returns the first batch at or after the offset,
			// however large): what was there was compacted away.
			if len(ps) == 1 && len(rp.RecordBatches) == 0 && rp.LastStableOffset > l.next[p] {
				l.next[p] = rp.LastStableOffset
			}
			end := targets[p]
			if end == toEnd {
				end = rp.LastStableOffset
			}
			out[p] = fetchResult{done: l.next[p] >= end, progress: l.next[p] > before}
		}
	}
	return out, firstErr
}

// refreshMeta reloads the topic's ID and leaders.
func (l *partitionLog) refreshMeta(ctx context.Context) error {
	m, err := loadMeta(ctx, l.cl, l.topic)
	if err != nil {
		return err
	}
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	if len(m.leaders) != len(l.meta.leaders) {
		return fmt.Errorf("%w: it now has %d partitions, not %d, and a key's partition depends on the count: the store stops rather than look keys up in the wrong partitions (Kafka cannot remove partitions; the state must be copied to a topic of its own)",
			errPartitionCount, len(m.leaders), len(l.meta.leaders))
	}
	l.meta = m
	return nil
}

// loadMeta reads the topic's metadata.
func loadMeta(ctx context.Context, cl *kgo.Client, topic string) (topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicMeta{}, err
	}
	if len(resp.Topics) != 1 {
		return topicMeta{}, fmt.Errorf("metadata of topic %q: %d topics in the answer", topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return topicMeta{}, fmt.Errorf("metadata of topic %q: %w", topic, err)
	}
	m := topicMeta{id: t.TopicID, leaders: make([]int32, len(t.Partitions))}
	for i := range m.leaders {
		m.leaders[i] = -1
	}
	for i, p := range t.Partitions {
		if p.Partition >= 0 && int(p.Partition) < len(m.leaders) && p.ErrorCode == 0 {
			m.leaders[p.Partition] = p.Leader
		}
		if i == 0 || len(p.Replicas) < m.replicas {
			m.replicas = len(p.Replicas)
		}
	}
	return m, nil
}
