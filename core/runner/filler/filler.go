// Package filler aligns a new destination partition's log start with its
// source's: filler records up to the source batch that holds the source log
// start, then DeleteRecords, so that every later record keeps its offset
// (preserve mode). It also tells whether the destination topic accepts
// DeleteRecords at all: without it the filler could never be removed.
// core/runner decides when to align (mirror.offset.alignment.max.records)
// and records the alignment (partition.Data.Alignment).
package filler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/batch"
)

// batchRecords is how many filler records go in one batch.
const batchRecords = 10000

// key is the key of every filler record and the name of its header.
// Topics whose cleanup.policy includes compact refuse records without a key
// (INVALID_RECORD), so filler has one.
const key = "kmirror.filler"

// Write hands write the filler batches that take the destination
// partition's end offset from `from` to `to`, in order; write must land
// each at offset off. Filler records have the key "kmirror.filler", a null
// value and a "kmirror.filler" header carrying the mirror name, so that
// anyone who reads them before DeleteRecords removes them can tell what
// they are. The null value makes each a tombstone: on a compacted topic a
// consumer that reads one deletes a key nobody wrote, and the log cleaner
// removes them all instead of keeping one as a live value.
func Write(mirror string, from, to int64, write func(b batch.Batch, off int64) error) error {
	now := time.Now().UnixMilli()
	k, header := []byte(key), []batch.Header{{Key: key, Value: []byte(mirror)}}
	for off := from; off < to; {
		n := min(int64(batchRecords), to-off)
		recs := make([]batch.Record, n)
		for i := range recs {
			recs[i] = batch.Record{Offset: off + int64(i), Timestamp: now, Key: k, Headers: header}
		}
		b, err := batch.Encode(batch.EncodeOptions{BaseOffset: off, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			return err
		}
		if err := write(b, off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Deletable reports whether the destination topic accepts DeleteRecords,
// which alignment needs to remove its filler: brokers refuse it
// (POLICY_VIOLATION) unless the topic's cleanup.policy includes delete.
func Deletable(ctx context.Context, dest *kadm.Client, topic string) (bool, error) {
	rcs, err := dest.DescribeTopicConfigs(ctx, topic)
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

// Delete moves the destination partition's log start to before
// (DeleteRecords); nothing to do when before is 0 or less.
func Delete(ctx context.Context, dest *kadm.Client, topic string, partition int32, before int64) error {
	if before <= 0 {
		return nil
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: before})
	resp, err := dest.DeleteRecords(ctx, os)
	if err == nil {
		if d, ok := resp.Lookup(topic, partition); ok {
			err = d.Err
		}
	}
	if err != nil {
		return fmt.Errorf("moving the destination log start to %d (DeleteRecords): %w", before, err)
	}
	return nil
}
