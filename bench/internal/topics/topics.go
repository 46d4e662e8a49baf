// Package topics is the topic administration that the bench and the raw
// forwarder share: creating a topic in steps a KRaft controller accepts and
// waiting until every partition serves, deleting every topic but some, and
// reading a topic's start and end offsets per partition.
package topics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/topicsync"
)

// EndOffsets returns the end offset of each partition of topic; a partition
// that answers with an error is left out and named in the error.
func EndOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	l, err := adm.ListEndOffsets(ctx, topic)
	return listed(l, err)
}

// StartOffsets returns the log start offset of each partition of topic, as
// EndOffsets does the end offsets.
func StartOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	l, err := adm.ListStartOffsets(ctx, topic)
	return listed(l, err)
}

// listed turns kadm's listed offsets into one offset per partition.
func listed(l kadm.ListedOffsets, err error) (map[int32]int64, error) {
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var errs []error
	l.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}

// Create creates topic with that many partitions (replication factor 1) and
// waits, up to 2 minutes, until every partition answers ListOffsets.
func Create(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	// A KRaft controller refuses an operation of more than 10,000 metadata
	// records: more partitions are added in steps (as kmirror does).
	step := int(topicsync.MaxPartitionsPerRequest)
	resp, err := adm.CreateTopic(ctx, int32(min(partitions, step)), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	for n := min(partitions, step); err == nil && n < partitions; {
		n = min(partitions, n+step)
		var r kadm.CreatePartitionsResponses
		if r, err = adm.UpdatePartitions(ctx, n, topic); err == nil {
			err = r[topic].Err
		}
	}
	if err != nil {
		return fmt.Errorf("create topic %s (%d partitions): %w", topic, partitions, err)
	}
	// CreateTopics answers before every partition's leader serves it; a
	// producer started now would wait for metadata, and time out on a
	// busy broker with thousands of partitions. A one-broker cluster on a
	// loaded machine took more than 2 minutes for 10,000.
	const serveWait = 5 * time.Minute
	ctx, cancel := context.WithTimeout(ctx, serveWait)
	defer cancel()
	for {
		ends, err := EndOffsets(ctx, adm, topic)
		if err == nil && len(ends) == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: %d of %d partitions serve after %s (%v)", topic, len(ends), partitions, serveWait, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// DeleteAllBut deletes every non-internal topic but those in keep, and
// waits until the cluster no longer lists them.
func DeleteAllBut(ctx context.Context, adm *kadm.Client, keep []string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
		var names []string
		for _, n := range topics.Names() {
			if !strings.HasPrefix(n, "__") && !slices.Contains(keep, n) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil
		}
		slices.Sort(names)
		if _, err := adm.DeleteTopics(ctx, names...); err != nil {
			return fmt.Errorf("delete topics %v: %w", names, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v still listed: %w", names, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
