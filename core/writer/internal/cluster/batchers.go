package cluster

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

// ActiveProducers are a partition leader's producer states, by producer id.
type ActiveProducers = map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer

// producersWindow is how long a batch of DescribeProducers requests of one
// topic gathers after its first one (and while one is in flight): the
// partitions of a mirror resuming together share one request per broker.
const producersWindow = 5 * time.Millisecond

// errNoProducersAnswer is a partition's error when DescribeProducers
// answered without it.
var errNoProducersAnswer = errors.New("DescribeProducers response has no answer for the partition")

// newProducersBatcher returns the Client's DescribeProducers batcher: the
// requests for partitions of one topic that arrive together go out as one
// DescribeProducers, which the client splits per partition leader. Every
// answer comes from a request sent after it was asked for.
func newProducersBatcher(c *Client) *coalesce.Group[string, int32, ActiveProducers] {
	return coalesce.New(producersWindow, func(ctx context.Context, topic string, parts []int32) (map[int32]coalesce.Result[ActiveProducers], error) {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic = topic
		rt.Partitions = parts
		req.Topics = append(req.Topics, rt)
		out := make(map[int32]coalesce.Result[ActiveProducers], len(parts))
		for _, sh := range c.sharded(ctx, req) {
			if sh.Err != nil {
				// This leader's partitions fail, not the others'.
				if sreq, ok := sh.Req.(*kmsg.DescribeProducersRequest); ok {
					for _, t := range sreq.Topics {
						for _, p := range t.Partitions {
							out[p] = coalesce.Result[ActiveProducers]{Err: sh.Err}
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
func describedProducers(resp *kmsg.DescribeProducersResponse, topic string, out map[int32]coalesce.Result[ActiveProducers]) {
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		for _, dp := range t.Partitions {
			if err := kerr.ErrorForCode(dp.ErrorCode); err != nil {
				out[dp.Partition] = coalesce.Result[ActiveProducers]{Err: err}
				continue
			}
			aps := make(ActiveProducers, len(dp.ActiveProducers))
			for _, ap := range dp.ActiveProducers {
				aps[ap.ProducerID] = ap
			}
			out[dp.Partition] = coalesce.Result[ActiveProducers]{Value: aps}
		}
	}
}

// newEndsBatcher returns the Client's end-offset batcher: the partitions
// of one topic asking for their end offsets while a request for the topic
// is in flight go out together in the next ListOffsets (split per leader
// by the client). It adds no wait to a lone request, and every answer
// comes from a request sent after it was asked for.
func newEndsBatcher(c *Client) *coalesce.Group[string, int32, int64] {
	return coalesce.New(0, func(ctx context.Context, topic string, parts []int32) (map[int32]coalesce.Result[int64], error) {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		out, err := kafkalog.ListOffsets(rctx, c.cl, topic, parts, -1)
		if ctx.Err() == nil {
			err = nil // only the request timed out: its partitions hold the error and retry
		}
		return out, err
	})
}

// sharded sends req through franz-go's routing, split per partition leader,
// with the RequestTimeout, and returns each leader's answer or error.
func (c *Client) sharded(ctx context.Context, req kmsg.Request) []kgo.ResponseShard {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return c.cl.RequestSharded(ctx, req)
}

// Producers asks the leader of topic/partition once for its producers'
// states, by producer id, in one DescribeProducers with the other
// partitions of the topic asking at the same time.
func (c *Client) Producers(ctx context.Context, topic string, partition int32) (ActiveProducers, error) {
	out, err := c.producers.Get(ctx, topic, partition)
	if errors.Is(err, coalesce.ErrNoAnswer) {
		err = errNoProducersAnswer
	}
	return out, err
}

// ListEnd asks the leader of topic/partition once for its end offset, with
// the partitions of the topic asking at the same time.
func (c *Client) ListEnd(ctx context.Context, topic string, partition int32) (int64, error) {
	end, err := c.ends.Get(ctx, topic, partition)
	if errors.Is(err, coalesce.ErrNoAnswer) {
		return -1, errors.New("ListOffsets response has no answer for the partition")
	}
	if err != nil {
		return -1, err
	}
	return end, nil
}

// EndOffset reads the end offset of topic/partition (ListEnd), retrying
// retriable errors for up to the retry timeout.
func (c *Client) EndOffset(ctx context.Context, topic string, partition int32) (int64, error) {
	r := c.NewRetrier()
	for {
		end, err := c.ListEnd(ctx, topic, partition)
		if err == nil {
			return end, nil
		}
		if !IsRetriable(err) {
			return -1, err
		}
		if err := r.Backoff(ctx, err); err != nil {
			return -1, err
		}
	}
}
