package mirror

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestLagFollowsTheSourceWhileAppendsStall: while the destination refuses
// the partition's appends (a retriable error: a cut, a full disk), the
// partition does not fetch further, so the source's end it last fetched
// goes stale. Its lag must still follow the source: the mirror reads the
// source's end offsets every mirror.metadata.refresh.interval.ms, so that
// describe and kmirror_max_lag show the records piling up (a lag that
// stays flat hides a destination outage from an alert on lag). Once the
// destination takes appends again, the lag falls to 0 and the partition
// is identical.
func TestLagFollowsTheSourceWhileAppendsStall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "stall", 1)
	var stalled atomic.Bool
	f.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != "stall" || !stalled.Load() {
			return nil, nil, false
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code // retriable: the writer keeps trying
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	e := startEngine(t, f.config(t, "stall"), memstore.New())
	produceTo(t, f.srcCl, "stall", "warm", 3)
	f.waitMirrored(t, e, "stall", 1)

	stalled.Store(true)
	// One record per batch: the first is appended (and refused), the next
	// may wait in the partition's queue, the rest are not fetched.
	for i := range 30 {
		produceTo(t, f.srcCl, "stall", fmt.Sprintf("during%d", i), 1)
	}
	kfaketest.WaitFor(t, "the lag to count every record written during the stall", func() (bool, string) {
		ps, _ := partitionStatus(e, "stall", 0)
		return ps.Lag == 30, fmt.Sprintf("%+v", ps)
	})
	if v := metricValue(t, e, "kmirror_max_lag", map[string]string{"mirror": "test"}); v != 30 {
		t.Errorf("kmirror_max_lag = %v during the stall, want 30", v)
	}

	stalled.Store(false)
	f.waitMirrored(t, e, "stall", 1)
	kfaketest.WaitFor(t, "the lag back to 0", func() (bool, string) {
		ps, _ := partitionStatus(e, "stall", 0)
		return ps.Lag == 0, fmt.Sprintf("%+v", ps)
	})
	f.verify(t, "stall", 1)
}
