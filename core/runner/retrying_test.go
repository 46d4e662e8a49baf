package runner

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// While the destination refuses appends with a retriable error (a broker
// whose disk is full answers KAFKA_STORAGE_ERROR), the partition's status
// says what its appends wait for and since when; once they land, it says
// nothing any more.
func TestStatusSaysWhatRetriedAppendsWaitFor(t *testing.T) {
	t.Parallel()
	dc := kfaketest.NewCluster(t)
	r := newTestRunnerOn(t, side{}, side{}, 0, dc)
	ctx := t.Context()
	if err := r.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	var full atomic.Bool
	full.Store(true)
	dc.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dc.KeepControl()
		if !full.Load() {
			return nil, nil, false
		}
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.KafkaStorageError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	src := &srcLog{t: t}
	src.data(2, false)
	src.data(3, false)
	done := make(chan error, 1)
	go func() { // owned by the test: it waits for done
		err := r.forwardAll(ctx, src.all)
		if err == nil {
			err = r.flush(ctx)
		}
		done <- err
	}()

	var last string
	for !strings.Contains(last, "KAFKA_STORAGE_ERROR") {
		select {
		case err := <-done:
			t.Fatalf("the appends returned (%v) while the destination refused them", err)
		case <-time.After(10 * time.Millisecond):
		}
		last = r.Status().LastError
	}
	if !strings.HasPrefix(last, "destination appends retrying since ") {
		t.Fatalf("status while the appends are retried: %q, want it to say they are retrying and since when", last)
	}
	full.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("appends after the destination took them again: %v", err)
	}
	if st := r.Status(); st.LastError != "" || st.LastMirroredOffset != 4 {
		t.Fatalf("status once the appends landed: error %q, last mirrored %d; want none, 4", st.LastError, st.LastMirroredOffset)
	}
}
