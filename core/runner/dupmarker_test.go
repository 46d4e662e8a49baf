package runner

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// markerWrittenTwice makes destination cluster c look as if its transaction
// coordinator had written the first marker twice (it failed over while
// writing it): after EndTxn, ListOffsets answers one offset more and a
// fetch from the marker shows it and a copy.
func markerWrittenTwice(t *testing.T, c *kfake.Cluster, marker int64) {
	t.Helper()
	var ended atomic.Bool
	var pid atomic.Int64
	var epoch atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		er := req.(*kmsg.EndTxnRequest)
		pid.Store(er.ProducerID)
		epoch.Store(int32(er.ProducerEpoch))
		ended.Store(true)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lr := req.(*kmsg.ListOffsetsRequest)
		if !ended.Load() || len(lr.Topics) != 1 || lr.Topics[0].Topic != "t" || lr.Topics[0].Partitions[0].Timestamp != -1 {
			return nil, nil, false
		}
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Offset = marker + 2
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if !ended.Load() || len(fr.Topics) != 1 || fr.Topics[0].Topic != "t" || fr.Topics[0].Partitions[0].FetchOffset != marker {
			return nil, nil, false
		}
		var recs []byte
		for off := marker; off < marker+2; off++ {
			b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: off, ProducerID: pid.Load(), ProducerEpoch: int16(epoch.Load())}, batch.ControlCommit, 1, 1)
			if err != nil {
				t.Errorf("EncodeControl: %v", err)
			}
			recs = append(recs, b...)
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset = marker+2, marker+2
		rp.RecordBatches = recs
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}

// sourceTxn is a committed source transaction of producer 4001: two
// records at 0 and 1, the COMMIT marker at 2.
func sourceTxn(t *testing.T) []batch.Batch {
	t.Helper()
	data, err := batch.Encode(batch.EncodeOptions{BaseOffset: 0, Transactional: true, ProducerID: 4001, ProducerEpoch: 0, BaseSequence: 0},
		[]batch.Record{{Offset: 0, Key: []byte("a")}, {Offset: 1, Key: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	marker, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: 2, ProducerID: 4001, ProducerEpoch: 0}, batch.ControlCommit, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	return []batch.Batch{data, marker}
}

// A marker the destination wrote twice moves every later offset by one:
// with mirror.destination.mismatch.action map the partition says so (map
// mode, a note) and goes on after the copy, mapping the source offsets it
// kept.
func TestMarkerWrittenTwiceMovesThePartitionToMapMode(t *testing.T) {
	t.Parallel()
	dc := kfaketest.NewCluster(t)
	r := newTestRunnerOn(t, side{}, side{}, 0, dc)
	ctx := t.Context()
	if err := r.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	markerWrittenTwice(t, dc, 2)
	if err := r.forwardAll(ctx, sourceTxn(t)); err != nil {
		t.Fatalf("forwardAll: %v", err)
	}
	if err := r.flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if r.mode != partition.ModeMap || r.Next() != 3 || r.dstNext != 4 {
		t.Fatalf("mode %q, next %d, destination next %d; want map, 3, 4", r.mode, r.Next(), r.dstNext)
	}
	if rec := r.state.Record(); rec.Mode != partition.ModeMap {
		t.Fatalf("recorded mode %q, want map", rec.Mode)
	}
	for src := int64(0); src <= 2; src++ {
		if d, ok := r.omap.Lookup(src); !ok || d != src {
			t.Fatalf("offset map: source %d → %d (%v), want itself", src, d, ok)
		}
	}
	notes := strings.Join(r.Status().Notes, "; ")
	if !strings.Contains(notes, "map mode from source offset 3") || !strings.Contains(notes, "marker at offset 2 2 times") {
		t.Fatalf("notes %q do not say why the partition is in map mode", notes)
	}
}

// With mirror.destination.mismatch.action fail the partition stops,
// naming the marker and what to do.
func TestMarkerWrittenTwiceFailsThePartitionWhenTheActionIsFail(t *testing.T) {
	t.Parallel()
	dc := kfaketest.NewCluster(t)
	r := newTestRunnerOn(t, side{}, side{}, 0, dc)
	r.d.Settings.MismatchAction = "fail"
	ctx := t.Context()
	if err := r.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	markerWrittenTwice(t, dc, 2)
	err := r.forwardAll(ctx, sourceTxn(t))
	if err == nil {
		err = r.flush(ctx)
	}
	if err == nil || partition.IsRetryable(err) || !strings.Contains(err.Error(), "written 2 times") || !strings.Contains(err.Error(), "mirror.destination.mismatch.action is fail") {
		t.Fatalf("forwardAll: %v (retryable %v), want a non-retryable error naming the duplicated marker and the action", err, partition.IsRetryable(err))
	}
	if r.mode != partition.ModePreserve {
		t.Fatalf("mode %q, want preserve (nothing decided)", r.mode)
	}
}
