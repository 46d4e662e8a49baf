package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// storedRecord reads a partition's record from the state store.
func storedRecord(t *testing.T, store statestore.Store, mirror, topic string, p int32) partition.Record {
	t.Helper()
	e, err := store.Get(context.Background(), statestore.PartitionKey(mirror, topic, p))
	if err != nil {
		t.Fatalf("reading the record of %s[%d]: %v", topic, p, err)
	}
	var rec partition.Record
	if err := json.Unmarshal(e.Value, &rec); err != nil {
		t.Fatalf("decoding the record of %s[%d]: %v", topic, p, err)
	}
	return rec
}

// A partition that fails retryably more often over its life than
// mirror.failed.retry.max.attempts, with healthy progress between the
// failures, keeps mirroring: progress after a retry clears the count of
// consecutive failures, so each failure is retry 1 again.
func TestSeparatedTransientFailuresDoNotUseUpTheRetryBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "flaky", 1)
	// Armed, the next destination Produce for flaky fails once with an
	// error the writer does not retry: the partition fails (retryably).
	var armed atomic.Bool
	var fired atomic.Int32
	f.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != "flaky" || !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		fired.Add(1)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	const maxAttempts = 2
	store := memstore.New()
	e := startEngine(t, f.config(t, "flaky", fmt.Sprintf("mirror.failed.retry.max.attempts: %d", maxAttempts)), store)
	produceTo(t, f.srcCl, "flaky", "warm", 3)
	f.waitMirrored(t, e, "flaky", 1)

	for round := 1; round <= 2*maxAttempts+1; round++ {
		armed.Store(true)
		produceTo(t, f.srcCl, "flaky", fmt.Sprintf("round%d", round), 2)
		kfaketest.WaitFor(t, fmt.Sprintf("round %d: the fault fires", round), func() (bool, string) {
			return fired.Load() == int32(round), fmt.Sprintf("%d faults", fired.Load())
		})
		f.waitMirrored(t, e, "flaky", 1)
		kfaketest.WaitFor(t, fmt.Sprintf("round %d: the count of consecutive failures is cleared", round), func() (bool, string) {
			rec := storedRecord(t, store, "test", "flaky", 0)
			return rec.State == partition.Mirroring && rec.Attempts == 0, fmt.Sprintf("%v, %d attempts, reason %q", rec.State, rec.Attempts, rec.Reason)
		})
		// The failure was retried as the first of a fresh budget.
		if rec := storedRecord(t, store, "test", "flaky", 0); !strings.HasPrefix(rec.Reason, fmt.Sprintf("automatic retry 1 of %d after:", maxAttempts)) {
			t.Fatalf("round %d: record reason %q, want the first automatic retry", round, rec.Reason)
		}
	}
	f.verify(t, "flaky", 1)
}
