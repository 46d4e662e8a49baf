// Package raw is the raw limit: `kmirror-bench raw` fetches a topic's
// batches from the source as a replica fetcher does and produces them to the
// destination as they are (only the producer fields cleared, so the
// destination takes them as non-idempotent batches), with several
// ProduceRequests in flight per destination broker and so per partition. No
// state, no offset checks, no transactions: the fastest a batch-forwarding
// mirror can be on these clusters, with the same fetch sizes as kmirror's
// defaults.
package raw

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/bench/internal/topics"
	"github.com/kmirror/kmirror/core/batch"
)

// Options says what one forwarder copies, between which clusters, and how
// much it keeps in flight and buffered.
type Options struct {
	Source, Destination string
	Topic               string
	InFlight            int
	FetchMaxBytes       int32 // per partition (replica.fetch.max.bytes)
	ResponseMaxBytes    int32 // per fetch (replica.fetch.response.max.bytes)
	PartitionQueue      int   // bytes buffered per partition before it stops being fetched
	TotalQueue          int   // bytes buffered in all
}

// Main runs `kmirror-bench raw` with its command-line arguments: one
// forwarder per topic, until the first fails or a signal stops them all.
func Main(args []string) error {
	fs := flag.NewFlagSet("raw", flag.ContinueOnError)
	var o Options
	fs.StringVar(&o.Source, "source", "", "source bootstrap servers")
	fs.StringVar(&o.Destination, "destination", "", "destination bootstrap servers")
	topics := fs.String("topics", "", "comma-separated topics to forward")
	fs.IntVar(&o.InFlight, "inflight", 5, "ProduceRequests in flight per destination broker")
	fetchMax := fs.Int("fetch-max-bytes", 1<<20, "bytes fetched per partition per request")
	respMax := fs.Int("response-max-bytes", 10<<20, "bytes per fetch response")
	fs.IntVar(&o.PartitionQueue, "partition-queue-bytes", 2<<20, "bytes buffered per partition")
	fs.IntVar(&o.TotalQueue, "total-queue-bytes", 128<<20, "bytes buffered in all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Source == "" || o.Destination == "" || *topics == "" {
		return errors.New("raw: -source, -destination and -topics are required")
	}
	o.FetchMaxBytes, o.ResponseMaxBytes = int32(*fetchMax), int32(*respMax)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// One forwarder per topic, each with its own connections: the first
	// to fail stops the others.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	list := splitList(*topics)
	errs := make(chan error, len(list))
	for _, t := range list {
		o := o
		o.Topic = t
		go func() { errs <- Run(ctx, o) }()
	}
	var err error
	for range list {
		if e := <-errs; e != nil && err == nil {
			err = e
			cancel()
		}
	}
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil // stopped by the bench
	}
	return err
}

// rawPartition is one partition's fetch position and queue.
type rawPartition struct {
	id      int32
	offset  int64
	queue   [][]byte
	queued  int
	dstNode int32
}

type rawForwarder struct {
	o       Options
	topicID [16]byte
	mu      sync.Mutex
	cond    *sync.Cond
	parts   []*rawPartition
	queued  int
	failed  error
}

// Run forwards o.Topic, creating it on the destination with the source's
// partition count, until ctx ends or a fetch or produce fails.
func Run(ctx context.Context, o Options) error {
	// The destination topic is new: look it up again at once rather than
	// after kgo's default 5 s.
	fresh := kgo.MetadataMinAge(50 * time.Millisecond)
	src, err := kgo.NewClient(kgo.SeedBrokers(splitList(o.Source)...), fresh)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(splitList(o.Destination)...), fresh)
	if err != nil {
		return err
	}
	defer dst.Close()
	sadm, dadm := kadm.NewClient(src), kadm.NewClient(dst)

	smeta, err := sadm.Metadata(ctx, o.Topic)
	if err != nil {
		return fmt.Errorf("raw: source metadata of %s: %w", o.Topic, err)
	}
	st, ok := smeta.Topics[o.Topic]
	if !ok || st.Err != nil {
		return fmt.Errorf("raw: source topic %s: %v", o.Topic, st.Err)
	}
	n := len(st.Partitions)
	// In steps, as the bench creates the source topic: a KRaft controller
	// refuses one CreateTopics of more than 10,000 partitions.
	if err := topics.Create(ctx, dadm, o.Topic, n); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("raw: create destination topic: %w", err)
	}
	f := &rawForwarder{o: o, topicID: st.ID}
	f.cond = sync.NewCond(&f.mu)
	f.parts = make([]*rawPartition, n)
	srcLeaders := map[int32][]*rawPartition{}
	for _, p := range st.Partitions {
		rp := &rawPartition{id: p.Partition}
		f.parts[p.Partition] = rp
		srcLeaders[p.Leader] = append(srcLeaders[p.Leader], rp)
	}
	// Destination leaders: wait until every new partition has one.
	dstAddrs := map[int32]string{}
	for {
		dmeta, err := dadm.Metadata(ctx, o.Topic)
		if err == nil {
			dt := dmeta.Topics[o.Topic]
			ready := dt.Err == nil && len(dt.Partitions) == n
			for _, p := range dt.Partitions {
				if p.Leader < 0 {
					ready = false
					continue
				}
				f.parts[p.Partition].dstNode = p.Leader
			}
			for _, b := range dmeta.Brokers {
				dstAddrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			if ready {
				// A new partition's leader may not serve it yet
				// (NOT_LEADER_FOR_PARTITION): wait until it answers
				// ListOffsets for every partition.
				ends, err := dadm.ListEndOffsets(ctx, o.Topic)
				ready = err == nil && len(ends[o.Topic]) == n
				ends.Each(func(lo kadm.ListedOffset) { ready = ready && lo.Err == nil })
			}
			if ready {
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // wakes waiters when the run ends; ends with it
		<-ctx.Done()
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(srcLeaders)+len(dstAddrs))
	for leader, parts := range srcLeaders {
		wg.Go(func() { errs <- f.fetchLoop(ctx, src.Broker(int(leader)), parts) })
	}
	byDst := map[int32][]*rawPartition{}
	for _, p := range f.parts {
		byDst[p.dstNode] = append(byDst[p.dstNode], p)
	}
	for node, parts := range byDst {
		conn, err := dialPipe(ctx, dstAddrs[node], o.InFlight)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("raw: destination broker %d: %w", node, err)
		}
		defer conn.Close()
		wg.Go(func() { errs <- f.produceLoop(ctx, conn, parts) })
	}
	err = <-errs
	cancel()
	wg.Wait()
	return err
}

// fetchLoop fetches the partitions led by one source broker, one fetch at a
// time, skipping partitions whose queue is full.
func (f *rawForwarder) fetchLoop(ctx context.Context, br *kgo.Broker, parts []*rawPartition) error {
	for {
		f.mu.Lock()
		var want []*rawPartition
		for ctx.Err() == nil && f.failed == nil {
			want = want[:0]
			if f.queued < f.o.TotalQueue {
				for _, p := range parts {
					if p.queued < f.o.PartitionQueue {
						want = append(want, p)
					}
				}
			}
			if len(want) > 0 {
				break
			}
			f.cond.Wait()
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.ReplicaState.ID = -1
		req.MaxWaitMillis = 500
		req.MinBytes = 1
		req.MaxBytes = f.o.ResponseMaxBytes
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = f.o.Topic, f.topicID
		for _, p := range want {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.id, p.offset, f.o.FetchMaxBytes
			rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		failed := f.failed
		f.mu.Unlock()
		if failed != nil {
			return failed
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		kresp, err := br.Request(ctx, req)
		if err != nil {
			return fmt.Errorf("raw: fetch %s: %w", f.o.Topic, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("raw: fetch %s: %w", f.o.Topic, err)
		}
		f.mu.Lock()
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					f.mu.Unlock()
					return fmt.Errorf("raw: fetch %s[%d]: %w", f.o.Topic, rp.Partition, err)
				}
				p := f.parts[rp.Partition]
				sc := batch.NewScanner(rp.RecordBatches)
				for sc.Next() {
					b := sc.Batch()
					if b.NextOffset() <= p.offset {
						continue // a batch before the fetch offset (compressed batches are returned whole)
					}
					p.offset = b.NextOffset()
					// As a producer sends it: base offset 0 (brokers
					// assign offsets) and no producer id.
					b.Restamp(-1, -1, -1)
					b.SetBaseOffset(0)
					p.queue = append(p.queue, b)
					p.queued += len(b)
					f.queued += len(b)
				}
				if err := sc.Err(); err != nil {
					f.mu.Unlock()
					return fmt.Errorf("raw: fetch %s[%d]: %w", f.o.Topic, rp.Partition, err)
				}
			}
		}
		f.cond.Broadcast()
		f.mu.Unlock()
	}
}

// maxProduceBytes bounds one ProduceRequest.
const maxProduceBytes = 8 << 20

// produceLoop sends the queued batches of the partitions led by one
// destination broker: each ProduceRequest carries the next batch of every
// partition that has one (a request holds one batch per partition), and up
// to InFlight requests are in flight on the connection.
func (f *rawForwarder) produceLoop(ctx context.Context, conn *pipeConn, parts []*rawPartition) error {
	results := make(chan *pending, f.o.InFlight)
	checked := make(chan struct{})
	go func() { // owned by produceLoop: ends when results is closed
		defer close(checked)
		for pd := range results {
			<-pd.Done
			err := pd.Err
			if err == nil {
				for _, t := range pd.Resp.(*kmsg.ProduceResponse).Topics {
					for _, p := range t.Partitions {
						if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil && err == nil {
							msg := ""
							if p.ErrorMessage != nil {
								msg = " (" + *p.ErrorMessage + ")"
							}
							err = fmt.Errorf("partition %d: %w%s", p.Partition, perr, msg)
						}
					}
				}
			}
			if err != nil {
				f.fail(fmt.Errorf("raw: produce %s: %w", f.o.Topic, err))
			}
		}
	}()
	defer func() {
		close(results)
		<-checked
	}()
	start := 0
	for {
		f.mu.Lock()
		var taken []kmsg.ProduceRequestTopicPartition
		size := 0
		for ctx.Err() == nil && f.failed == nil {
			// Start at a rotating partition so none waits behind the
			// request size bound for ever.
			for i := range parts {
				p := parts[(start+i)%len(parts)]
				if len(p.queue) == 0 {
					continue
				}
				b := p.queue[0]
				if size > 0 && size+len(b) > maxProduceBytes {
					break
				}
				p.queue[0] = nil
				p.queue = p.queue[1:]
				p.queued -= len(b)
				f.queued -= len(b)
				size += len(b)
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = p.id, b
				taken = append(taken, rp)
			}
			start++
			if len(taken) > 0 {
				f.cond.Broadcast()
				break
			}
			f.cond.Wait()
		}
		failed := f.failed
		f.mu.Unlock()
		if failed != nil {
			return failed
		}
		if len(taken) == 0 {
			return ctx.Err()
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = -1
		req.TimeoutMillis = 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.Partitions = f.o.Topic, taken
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		pd, err := conn.Send(ctx, req)
		if err != nil {
			return fmt.Errorf("raw: produce %s: %w", f.o.Topic, err)
		}
		results <- pd
	}
}

// fail records the forwarder's first error and wakes every loop.
func (f *rawForwarder) fail(err error) {
	f.mu.Lock()
	if f.failed == nil {
		f.failed = err
	}
	f.cond.Broadcast()
	f.mu.Unlock()
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
