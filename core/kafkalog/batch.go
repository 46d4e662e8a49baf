package kafkalog

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/internal/coalesce"
)

// BoundsBatcher answers Bounds for many partitions of a cluster at once:
// the requests for partitions of one topic that arrive together are
// gathered into one ListOffsets for log starts and one for high watermarks
// (which the client splits per partition leader, so one request per broker
// holding a leader), instead of two each. An answer always comes from
// requests sent after it was asked for: nothing is cached.
//
// A mirror keeps one per cluster; its partitions preparing at once share
// it.
type BoundsBatcher struct {
	g *coalesce.Group[string, int32, bounds]
}

type bounds struct{ start, hw int64 }

// BoundsWindow is how long a batch of Bounds requests gathers after its
// first request (at least; it also waits for the batch in flight for the
// same topic): long enough for partitions started together to share it,
// short against the round trips of a preparation.
const BoundsWindow = 5 * time.Millisecond

// NewBoundsBatcher returns a BoundsBatcher over cl that gathers each batch
// for window.
func NewBoundsBatcher(cl *kgo.Client, window time.Duration) *BoundsBatcher {
	return &BoundsBatcher{g: coalesce.New(window, func(ctx context.Context, topic string, parts []int32) (map[int32]coalesce.Result[bounds], error) {
		starts, err := ListOffsets(ctx, cl, topic, parts, -2)
		if err != nil {
			return nil, fmt.Errorf("listing log starts (ListOffsets): %w", err)
		}
		hws, err := ListOffsets(ctx, cl, topic, parts, -1)
		if err != nil {
			return nil, fmt.Errorf("listing high watermarks (ListOffsets): %w", err)
		}
		out := make(map[int32]coalesce.Result[bounds], len(parts))
		for _, p := range parts {
			s, h := starts[p], hws[p]
			r := coalesce.Result[bounds]{Value: bounds{s.Value, h.Value}}
			switch {
			case s.Err != nil:
				r.Err = fmt.Errorf("log start (ListOffsets): %w", s.Err)
			case h.Err != nil:
				r.Err = fmt.Errorf("high watermark (ListOffsets): %w", h.Err)
			}
			out[p] = r
		}
		return out, nil
	})}
}

// Bounds returns the log start offset and the high watermark of
// topic/partition, as Bounds does, from a ListOffsets sent after the call.
func (b *BoundsBatcher) Bounds(ctx context.Context, topic string, partition int32) (start, hw int64, err error) {
	v, err := b.g.Get(ctx, topic, partition)
	if err != nil {
		return 0, 0, fmt.Errorf("%s[%d]: %w", topic, partition, err)
	}
	return v.start, v.hw, nil
}

// Batches returns how many batches the BoundsBatcher sent (each one
// ListOffsets for log starts and one for high watermarks per broker).
func (b *BoundsBatcher) Batches() int64 { return b.g.Calls() }

// ListOffsets lists the offsets at ts (-2 log start, -1 high watermark,
// read_uncommitted) of parts of topic in one request, which the client
// splits per leader. A partition the answer lacks gets an error. It fails
// only when ctx ends: a request that fails fails its partitions. It is the
// one request of a coalesce batch (BoundsBatcher, the writer's end-offset
// reads).
func ListOffsets(ctx context.Context, cl *kgo.Client, topic string, parts []int32, ts int64) (map[int32]coalesce.Result[int64], error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	// Sharded per leader: a shard that fails (a partition the client has
	// no leader for) fails its own partitions, not the others'.
	out := make(map[int32]coalesce.Result[int64], len(parts))
	for _, sh := range cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			if sreq, ok := sh.Req.(*kmsg.ListOffsetsRequest); ok {
				for _, t := range sreq.Topics {
					for _, p := range t.Partitions {
						out[p.Partition] = coalesce.Result[int64]{Err: sh.Err}
					}
				}
			}
			continue
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			if t.Topic != topic {
				continue
			}
			for _, p := range t.Partitions {
				out[p.Partition] = coalesce.Result[int64]{Value: p.Offset, Err: kerr.ErrorForCode(p.ErrorCode)}
			}
		}
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			out[p] = coalesce.Result[int64]{Err: errNoOffset}
		}
	}
	return out, ctx.Err()
}
