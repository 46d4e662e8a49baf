package mirror

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestADestinationTopicDeletedUnderTheMirrorIsNotRecreatedUntilReset: an
// operator deletes a mirrored destination topic. Its partitions fail for
// good with a reason that names the reset command; the topics rounds do not
// create the topic again (so no append lands at offset 0 of a new topic),
// and the mirror's other topic goes on. A reset is refused while nothing
// is FAILED, planned by a dry run that changes nothing, and then forgets
// the partitions: the topic is created again and mirrored from the source's
// log start, identical record by record, and it keeps mirroring.
func TestADestinationTopicDeletedUnderTheMirrorIsNotRecreatedUntilReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "orders", 2)
	f.createTopic(t, "payments", 1)
	f.produce(t, "orders", 30, "tx-o")
	f.produce(t, "payments", 10, "tx-p")
	store := memstore.New()
	e := startEngine(t, f.config(t, "orders|payments|witness.*"), store)
	f.waitMirrored(t, e, "orders", 2)
	f.waitMirrored(t, e, "payments", 1)
	ctx := kfaketest.Context(t)

	if _, err := e.ResetTopics(ctx, "test", []string{"orders"}); !errors.Is(err, admin.ErrConflict) || !strings.Contains(err.Error(), "no partition of the topics matching orders is FAILED") {
		t.Fatalf("reset of mirroring partitions: %v; want ErrConflict saying none is FAILED", err)
	}

	resp, err := kadm.NewClient(f.dstCl).DeleteTopic(ctx, "orders")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		st := waitState(t, e, "orders", p, "FAILED")
		if !strings.Contains(st.LastError, "the destination topic orders was deleted") || !strings.Contains(st.LastError, "kmirror mirrors reset test --topics orders") || st.Retry != "NonRetryable" {
			t.Fatalf("orders[%d]: %+v; want a non-retryable failure naming the deleted destination topic and the reset command", p, st)
		}
	}
	f.witness(t, e, "witness1") // a topics round ran after the failures
	f.witness(t, e, "witness2")
	if n := partitionCount(t, f.dstCl, "orders"); n != 0 {
		t.Fatalf("the deleted destination topic orders was created again with %d partitions", n)
	}
	f.produce(t, "payments", 10, "tx-p")
	f.waitMirrored(t, e, "payments", 1)
	f.verify(t, "payments", 1)

	plan, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpReset, Mirror: "test", Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Topics) != 1 || len(plan.Topics[0].Partitions) != 2 {
		t.Fatalf("plan %+v; want orders' two partitions", plan)
	}
	for _, pp := range plan.Topics[0].Partitions {
		if pp.Action != admin.PlanReset || !strings.Contains(pp.Detail, "destination topic orders was deleted") {
			t.Fatalf("plan of orders[%d]: %+v; want reset, with the failure", pp.Partition, pp)
		}
	}
	if st, _ := partitionStatus(e, "orders", 0); st.State != "FAILED" {
		t.Fatalf("the dry run changed orders[0]: %+v", st)
	}

	res, err := e.ResetTopics(ctx, "test", []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Message, "reset 2 partition(s)") || !strings.Contains(res.Message, "orders/0, orders/1") {
		t.Fatalf("reset: %+v", res)
	}
	f.waitMirrored(t, e, "orders", 2)
	f.verify(t, "orders", 2)
	f.produce(t, "orders", 10, "tx-o")
	f.waitMirrored(t, e, "orders", 2)
	f.verify(t, "orders", 2)
	e0, err := store.Get(ctx, statestore.PartitionKey("test", "orders", 0))
	if err != nil || !strings.Contains(string(e0.Value), `"state":"MIRRORING"`) || strings.Contains(string(e0.Value), "deleted") {
		t.Fatalf("orders[0]'s record after the reset: %s, %v; want a new MIRRORING record", e0.Value, err)
	}
	if ms := mirrorStatus(e); ms.Error != "" {
		t.Fatalf("mirror errors after the reset: %s", ms.Error)
	}
}
