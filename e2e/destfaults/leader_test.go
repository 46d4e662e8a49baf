package destfaults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// leaderMoves is how many times the scenario moves every destination
// partition's leadership, each time while kmirror has a destination
// transaction open.
const leaderMoves = 3

// The leadership of every destination partition moved to another replica
// (a reassignment that puts another broker first, then a preferred-leader
// election) while kmirror has a destination transaction open, three times
// over, with transactions and plain records streaming into the source: the
// appends and the open transactions follow the new leaders, and the
// destination ends identical to the source — offsets (no partition in map
// mode), records, markers, and what read_committed and read_uncommitted
// consumers see.
func TestDestinationLeaderMovedMidTransactionLosesAndDuplicatesNothing(t *testing.T) {
	const partitions = 3
	ctx := testContext(t, 8*time.Minute)
	topic := topicName(t)
	createTopic(t, ctx, source, topic, partitions)
	d := startKmirror(t, topic)
	tr := startTraffic(t, ctx, topic, partitions)
	d.waitProgress(ctx, topic, ones(partitions))

	adm := adminOf(t, destination)
	if rf := replicationFactor(t, ctx, adm, topic); rf != destination.Brokers() {
		t.Fatalf("kmirror created %s on the destination with %d replicas, want %d (the destination's default; test premise)", topic, rf, destination.Brokers())
	}
	for i := range leaderMoves {
		waitOpenTransaction(t, ctx)
		before := leaders(t, ctx, adm, topic)
		moveLeaders(t, ctx, adm, topic, before)
		t.Logf("move %d: destination leaders %v -> %v with a transaction open", i+1, before, leaders(t, ctx, adm, topic))
		// Copy a while under the new leaders before the next move.
		d.waitProgress(ctx, topic, d.mirroredPlus(topic, partitions, 20))
	}

	// Test premise: appends met the moves (the old leader refused them and
	// kmirror sent them again to the new one).
	moved := slices.DeleteFunc(retryErrors(d.log()), func(e string) bool { return !strings.Contains(e, "NOT_LEADER") })
	if len(moved) == 0 {
		t.Fatal("no append was refused by a former leader: the leader moves did not reach an append (test premise)")
	}
	t.Logf("appends retried after the moves on %q", moved)

	tr.stop()
	d.waitMirrored(ctx, topic, partitions)
	records, aborted, markers := verifyCopy(t, ctx, d, topic, partitions, false)
	if markers == 0 || aborted == 0 || records == 0 {
		t.Fatalf("verified %d records (%d aborted) and %d markers; the scenario needs all three", records, aborted, markers)
	}
	t.Logf("identical on both clusters: %d records (%d aborted) and %d transaction markers", records, aborted, markers)
}

// replicationFactor returns the replica count of partition 0 of topic.
func replicationFactor(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) int {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, td[topic].Err)
	}
	return len(td[topic].Partitions[0].Replicas)
}

// leaders returns the leader of each partition of topic (-1: none).
func leaders(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) []int32 {
	t.Helper()
	out, err := tryLeaders(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryLeaders is leaders, with an error when topic cannot be described
// (yet: a topic just created is in the brokers' metadata a moment later).
func tryLeaders(ctx context.Context, adm *kadm.Client, topic string) ([]int32, error) {
	td, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = td[topic].Err
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", topic, err)
	}
	out := make([]int32, len(td[topic].Partitions))
	for _, p := range td[topic].Partitions.Sorted() {
		out[p.Partition] = p.Leader
	}
	return out, nil
}

// moveLeaders makes, for each partition of topic, the replica after its
// current leader the preferred one (a reassignment onto the same brokers
// in another order) and elects it, and waits until every partition is led
// by its new preferred replica with all replicas in sync.
func moveLeaders(t testing.TB, ctx context.Context, adm *kadm.Client, topic string, current []int32) {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, td[topic].Err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	want := map[int32]int32{}
	for _, p := range td[topic].Partitions.Sorted() {
		reps := slices.Clone(p.Replicas)
		i := slices.Index(reps, current[p.Partition])
		rotated := append(reps[i+1:], reps[:i+1]...) // the old leader last
		req.Assign(topic, p.Partition, rotated)
		want[p.Partition] = rotated[0]
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("reassigning %s on the destination: %v", topic, err)
	}
	var set kadm.TopicsSet
	for p := range want {
		set.Add(topic, p)
	}
	for {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		var failed []string
		if err != nil {
			failed = append(failed, err.Error())
		}
		for _, ps := range res {
			for p, r := range ps {
				// ELECTION_NOT_NEEDED: it leads already.
				if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
					failed = append(failed, fmt.Sprintf("%d: %v", p, r.Err))
				}
			}
		}
		td, derr := adm.ListTopics(ctx, topic)
		moved := derr == nil && len(failed) == 0
		for _, p := range td[topic].Partitions {
			if p.Leader != want[p.Partition] || len(p.ISR) != len(p.Replicas) {
				moved = false
			}
		}
		if moved {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the destination leaders of %s did not move to %v: %v", topic, want, failed)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
