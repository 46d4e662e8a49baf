package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// partitionState returns the leader and ISR size of partition 0 of topic.
func partitionState(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) (leader int32, isr int) {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	p, ok := td[topic].Partitions[0]
	if !ok || td[topic].Err != nil {
		t.Fatalf("describe %s: partition 0 missing (topic error %v)", topic, td[topic].Err)
	}
	return p.Leader, len(p.ISR)
}

// waitFullISR waits until partition 0 of topic has all three replicas in sync.
func waitFullISR(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) {
	t.Helper()
	for {
		if _, isr := partitionState(t, ctx, adm, topic); isr == source.Brokers() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("partition 0 of %s never got back %d in-sync replicas: %v", topic, source.Brokers(), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// A three-broker cluster keeps accepting acks=all writes while one broker is
// killed (SIGKILL) or stopped (controlled shutdown), and the broker comes back
// with RestartBroker; no record is lost or duplicated.
func TestSourceSurvivesBrokerKillAndStop(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	adm := superAdmin(t, source)
	topic := topicName(t, "")
	minISR := "2"
	createTopic(t, ctx, adm, topic, 1, 3, map[string]*string{"min.insync.replicas": &minISR})

	producer := newClient(t, source, kafkatest.Identity{Listener: kafkatest.Plaintext},
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	next := 0
	produceBatch := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%d", next)})
			next++
		}
		produceSync(t, ctx, producer, recs...)
	}
	produceBatch(10)

	leader, _ := partitionState(t, ctx, adm, topic)
	if err := source.KillBroker(int(leader)); err != nil {
		t.Fatal(err)
	}
	if source.Running(int(leader)) {
		t.Fatalf("broker %d still running after KillBroker", leader)
	}
	produceBatch(10) // waits for the controller to fence the dead leader
	if newLeader, _ := partitionState(t, ctx, adm, topic); newLeader == leader {
		t.Fatalf("partition leader is still the killed broker %d", leader)
	}
	if err := source.RestartBroker(ctx, int(leader)); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, adm, topic)

	stopped, _ := partitionState(t, ctx, adm, topic)
	if err := source.StopBroker(int(stopped)); err != nil {
		t.Fatal(err)
	}
	if source.Running(int(stopped)) {
		t.Fatalf("broker %d still running after StopBroker", stopped)
	}
	produceBatch(10)
	if err := source.RestartBroker(ctx, int(stopped)); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, adm, topic)

	got := consumeN(t, ctx, source, kafkatest.Identity{Listener: kafkatest.Plaintext}, topic, next)
	for i, r := range got {
		if want := fmt.Sprint(i); string(r.Value) != want || r.Offset != int64(i) {
			t.Fatalf("record at position %d: offset %d value %q, want offset %d value %q", i, r.Offset, r.Value, i, want)
		}
	}
}
