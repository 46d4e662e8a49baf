package writer

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/internal/coalesce"
	"github.com/kmirror/kmirror/core/kafkalog"
)

// activeProducers are a partition leader's producer states, by producer id.
type activeProducers = map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer

// producersWindow is how long a batch of DescribeProducers requests of one
// topic gathers after its first one (and while one is in flight): the
// partitions of a mirror resuming together share one request per broker.
const producersWindow = 5 * time.Millisecond

// errNoProducersAnswer is a partition's error when DescribeProducers
// answered without it.
var errNoProducersAnswer = errors.New("DescribeProducers response has no answer for the partition")

// newProducersBatcher returns the Writer's DescribeProducers batcher: the
// requests for partitions of one topic that arrive together go out as one
// DescribeProducers, which the client splits per partition leader. Every
// answer comes from a request sent after it was asked for.
func newProducersBatcher(w *Writer) *coalesce.Group[string, int32, activeProducers] {
	return coalesce.New(producersWindow, func(ctx context.Context, topic string, parts []int32) (map[int32]coalesce.Result[activeProducers], error) {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic = topic
		rt.Partitions = parts
		req.Topics = append(req.Topics, rt)
		out := make(map[int32]coalesce.Result[activeProducers], len(parts))
		for _, sh := range w.sharded(ctx, req) {
			if sh.Err != nil {
				// This leader's partitions fail, not the others'.
				if sreq, ok := sh.Req.(*kmsg.DescribeProducersRequest); ok {
					for _, t := range sreq.Topics {
						for _, p := range t.Partitions {
							out[p] = coalesce.Result[activeProducers]{Err: sh.Err}
						}
					}
				}
				continue
			}
			describedProducers(sh.Resp.(*kmsg.DescribeProducersResponse), topic, out)
		}
		return out, nil
	})
}

// describedProducers adds the partitions of topic in resp to out.
func describedProducers(resp *kmsg.DescribeProducersResponse, topic string, out map[int32]coalesce.Result[activeProducers]) {
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		for _, dp := range t.Partitions {
			if err := kerr.ErrorForCode(dp.ErrorCode); err != nil {
				out[dp.Partition] = coalesce.Result[activeProducers]{Err: err}
				continue
			}
			aps := make(activeProducers, len(dp.ActiveProducers))
			for _, ap := range dp.ActiveProducers {
				aps[ap.ProducerID] = ap
			}
			out[dp.Partition] = coalesce.Result[activeProducers]{Value: aps}
		}
	}
}

// newEndsBatcher returns the Writer's end-offset batcher: the partitions
// of one topic asking for their end offsets while a request for the topic
// is in flight go out together in the next ListOffsets (split per leader
// by the client). It adds no wait to a lone request, and every answer
// comes from a request sent after it was asked for.
func newEndsBatcher(w *Writer) *coalesce.Group[string, int32, int64] {
	return coalesce.New(0, func(ctx context.Context, topic string, parts []int32) (map[int32]coalesce.Result[int64], error) {
		rctx, cancel := context.WithTimeout(ctx, w.cfg.requestTimeout)
		defer cancel()
		out, err := kafkalog.ListOffsets(rctx, w.cl, topic, parts, -1)
		if ctx.Err() == nil {
			err = nil // only the request timed out: its partitions hold the error and retry
		}
		return out, err
	})
}

// sharded sends req through franz-go's routing, split per partition leader,
// with the RequestTimeout, and returns each leader's answer or error.
func (w *Writer) sharded(ctx context.Context, req kmsg.Request) []kgo.ResponseShard {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.requestTimeout)
	defer cancel()
	return w.cl.RequestSharded(ctx, req)
}
