package writer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
)

// duplicatedMarker makes the destination look as if its transaction
// coordinator had written the next marker twice: once the marker is on the
// partition, ListOffsets answers one offset more, and a fetch from the
// marker answers the marker and then extra (built by the test with the
// writer's producer id).
func duplicatedMarker(t *testing.T, c *kfake.Cluster, marker int64, extra func() batch.Batch) {
	t.Helper()
	var ended atomic.Bool
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		ended.Store(true)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !ended.Load() {
			return nil, nil, false
		}
		lr := req.(*kmsg.ListOffsetsRequest)
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = testTopic
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Offset = marker + 2
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || fr.Topics[0].Topic != testTopic || fr.Topics[0].Partitions[0].FetchOffset != marker {
			return nil, nil, false
		}
		// The real marker first (answered by the cluster), then the copy.
		c.DropControl()
		first, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: marker, ProducerID: extra().ProducerID(), ProducerEpoch: extra().ProducerEpoch()}, batch.ControlCommit, 1, 1)
		if err != nil {
			t.Errorf("EncodeControl: %v", err)
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = testTopic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset = marker+2, marker+2
		rp.RecordBatches = append(append([]byte{}, first...), extra()...)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}

// A marker the destination wrote twice (its coordinator failed over while
// writing markers) is reported as a *DuplicateMarkerError — which is also
// an offset mismatch for callers that do not handle it — with the
// destination's end offset, which the next append expects.
func TestMarkerWrittenTwiceIsReportedAsADuplicate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	info := rec.recorded()[0]
	duplicatedMarker(t, c, 2, func() batch.Batch {
		b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 3, ProducerID: info.ProducerID, ProducerEpoch: info.Epoch}, batch.ControlCommit, 2, 2)
		if err != nil {
			t.Fatalf("EncodeControl: %v", err)
		}
		return b
	})
	_, err := p.Append(context.Background(), markerBatch(t, 2, 4001, batch.ControlCommit))
	var dup *DuplicateMarkerError
	if !errors.As(err, &dup) || !errors.Is(err, ErrDuplicateMarker) || !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("Append of the marker: %v, want a *DuplicateMarkerError", err)
	}
	if dup.Marker != 2 || dup.End != 4 || dup.Topic != testTopic || dup.Mirror != "test" {
		t.Fatalf("duplicate %+v, want marker 2, end 4", dup)
	}
	if open := p.OpenTransactions(); len(open) != 0 {
		t.Fatalf("transaction still open after its marker: %+v", open)
	}
}

// Anything but copies of the marker after it — here a data record — is a
// plain offset mismatch.
func TestRecordAfterTheMarkerIsAMismatchNotADuplicate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	rec := &recorder{}
	p := openPartition(t, newWriter(t, c), testTopic, 0, rec)
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "A", "1", "B", "2"))
	info := rec.recorded()[0]
	duplicatedMarker(t, c, 2, func() batch.Batch {
		b, err := batch.Encode(batch.EncodeOptions{BaseOffset: 3, ProducerID: info.ProducerID, ProducerEpoch: info.Epoch, BaseSequence: 2},
			[]batch.Record{{Offset: 3, Key: []byte("foreign")}})
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		return b
	})
	_, err := p.Append(context.Background(), markerBatch(t, 2, 4001, batch.ControlCommit))
	var me *OffsetMismatchError
	if !errors.As(err, &me) || errors.Is(err, ErrDuplicateMarker) {
		t.Fatalf("Append of the marker: %v, want an offset mismatch that is not a duplicate marker", err)
	}
}
