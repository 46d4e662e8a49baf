package e2e

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// dynamicTopicConfigs returns the configs set on topic itself
// (DYNAMIC_TOPIC_CONFIG), not defaults.
func dynamicTopicConfigs(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) map[string]string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describing configs of %s: %v", topic, err)
	}
	out := map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("describing configs of %s: %v", topic, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				out[c.Key] = *c.Value
			}
		}
	}
	return out
}

// destinationPartitions returns the partition count of topic on the
// destination (0: the topic does not exist).
func destinationPartitions(t testing.TB, ctx context.Context, topic string) int32 {
	t.Helper()
	d, err := superAdmin(t, destination).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("listing destination topic %s: %v", topic, err)
	}
	if td, ok := d[topic]; ok && td.Err == nil {
		return int32(len(td.Partitions))
	}
	return 0
}

// produceTo writes n records to each listed partition of topic.
func produceTo(t testing.TB, ctx context.Context, topic string, n int, partitions ...int32) {
	t.Helper()
	// Partitions just added are in the brokers' metadata a moment after
	// CreatePartitions returns; a client whose first metadata lacks one
	// refuses a record for it.
	want := int(slices.Max(partitions)) + 1
	adm := superAdmin(t, source)
	for {
		d, err := adm.ListTopics(ctx, topic)
		if err == nil && len(d[topic].Partitions) >= want {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s does not show %d partitions on the source: %v", topic, want, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	cl := newClient(t, source, kafkatest.Identity{}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for _, p := range partitions {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "p%d v%d", p, i)})
		}
	}
	produceSync(t, ctx, cl, recs...)
}

// TestTopicSyncCreatesMatchingTopicsWithConfigsMinusExcluded: include
// <prefix>-orders.*,<prefix>-payments with exclude <prefix>-orders\.tmp.*:
// the matching topics appear on the destination with the source's partition
// counts and configs minus mirror.topic.properties.exclude; the tmp topic
// does not; a topic created on the source while the daemon runs is picked
// up within two refresh intervals.
func TestTopicSyncCreatesMatchingTopicsWithConfigsMinusExcluded(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	adm := superAdmin(t, source)
	prefix := topicName(t, "")
	q := regexp.QuoteMeta(prefix)
	orders, payments, tmp := prefix+"-orders-eu", prefix+"-payments", prefix+"-orders.tmp-1"
	createTopic(t, ctx, adm, orders, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "max.message.bytes": kadm.StringPtr("2097152"), "min.insync.replicas": kadm.StringPtr("2")})
	createTopic(t, ctx, adm, payments, 2, 3, nil)
	createTopic(t, ctx, adm, tmp, 1, 3, nil)
	produceTo(t, ctx, orders, 10, 0, 1, 2)
	produceTo(t, ctx, payments, 10, 0, 1)
	produceTo(t, ctx, tmp, 10, 0)
	d := startKmirror(t, q+"-orders.*,"+q+"-payments", fmt.Sprintf("mirror.topics.exclude: %q", q+`-orders\.tmp.*`))
	d.waitMirrored(ctx, orders, 3)
	d.waitMirrored(ctx, payments, 2)
	if n := destinationPartitions(t, ctx, orders); n != 3 {
		t.Fatalf("%s has %d partitions on the destination, want 3", orders, n)
	}
	if n := destinationPartitions(t, ctx, payments); n != 2 {
		t.Fatalf("%s has %d partitions on the destination, want 2", payments, n)
	}
	got := dynamicTopicConfigs(t, ctx, superAdmin(t, destination), orders)
	want := map[string]string{"retention.ms": "3600000", "max.message.bytes": "2097152"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("destination configs of %s = %v, want %v (min.insync.replicas is in the default exclude list)", orders, got, want)
	}
	if n := destinationPartitions(t, ctx, tmp); n != 0 {
		t.Fatalf("excluded topic %s exists on the destination", tmp)
	}
	verifyTopic(t, ctx, orders, 3)

	later := prefix + "-orders-us"
	createTopic(t, ctx, adm, later, 2, 3, nil)
	created := time.Now()
	for destinationPartitions(t, ctx, later) != 2 {
		if time.Since(created) > 2*2*time.Second+2*time.Second { // two refresh intervals, plus the creation itself
			t.Fatalf("%s not created on the destination within two refresh intervals", later)
		}
		time.Sleep(100 * time.Millisecond)
	}
	produceTo(t, ctx, later, 5, 0, 1)
	d.waitMirrored(ctx, later, 2)
	verifyTopic(t, ctx, later, 2)
}

// TestTopicSyncAddsSourcePartitionsMirroredFromOffsetZero: partitions added
// on the source are added on the destination and mirrored from their first
// offset, offsets preserved.
func TestTopicSyncAddsSourcePartitionsMirroredFromOffsetZero(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	adm := superAdmin(t, source)
	topic := topicName(t, "")
	createTopic(t, ctx, adm, topic, 1, 3, nil)
	produceTo(t, ctx, topic, 20, 0)
	d := startKmirror(t, regexp.QuoteMeta(topic))
	d.waitMirrored(ctx, topic, 1)
	resp, err := adm.UpdatePartitions(ctx, 3, topic)
	if err == nil {
		err = resp[topic].Err
	}
	if err != nil {
		t.Fatalf("adding partitions to %s: %v", topic, err)
	}
	produceTo(t, ctx, topic, 15, 0, 1, 2)
	d.waitMirrored(ctx, topic, 3)
	if n := destinationPartitions(t, ctx, topic); n != 3 {
		t.Fatalf("destination has %d partitions, want 3", n)
	}
	verifyTopic(t, ctx, topic, 3)
	for p := 1; p < 3; p++ {
		if ps, _ := d.partitionStatus(topic, int32(p)); ps.Mode != "preserve" || ps.LastMirroredOffset != 14 {
			t.Fatalf("new partition %d: mode %q, last mirrored offset %d; want preserve and 14 (15 records from offset 0)", p, ps.Mode, ps.LastMirroredOffset)
		}
	}
}

// TestTopicSyncAppliesConfigChangesButNotExcludedOnes: a retention.ms change
// on the source reaches the destination; min.insync.replicas (excluded by
// default) does not.
func TestTopicSyncAppliesConfigChangesButNotExcludedOnes(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	adm := superAdmin(t, source)
	topic := topicName(t, "")
	createTopic(t, ctx, adm, topic, 1, 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})
	produceTo(t, ctx, topic, 5, 0)
	d := startKmirror(t, regexp.QuoteMeta(topic))
	d.waitMirrored(ctx, topic, 1)
	dadm := superAdmin(t, destination)
	if got := dynamicTopicConfigs(t, ctx, dadm, topic)["retention.ms"]; got != "3600000" {
		t.Fatalf("destination retention.ms = %q after creation, want 3600000", got)
	}
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
		{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("2")},
	}, topic)
	if err == nil {
		for _, r := range resps {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("altering source configs of %s: %v", topic, err)
	}
	deadline := time.Now().Add(3 * 2 * time.Second)
	for {
		got := dynamicTopicConfigs(t, ctx, dadm, topic)
		if got["retention.ms"] == "7200000" {
			if v, ok := got["min.insync.replicas"]; ok {
				t.Fatalf("excluded min.insync.replicas=%s reached the destination", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention.ms change not on the destination within three refresh intervals: %v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One more round must not bring the excluded key either.
	time.Sleep(2500 * time.Millisecond)
	if v, ok := dynamicTopicConfigs(t, ctx, dadm, topic)["min.insync.replicas"]; ok {
		t.Fatalf("excluded min.insync.replicas=%s reached the destination", v)
	}
	if st, _ := d.status(); len(st.Mirrors) != 1 || len(st.Mirrors[0].TopicConfigErrors) != 0 {
		t.Fatalf("config sync errors: %+v", st)
	}
}

// TestTopicSyncStopsPartitionsOfADeletedSourceTopicAndFailsARecreatedOne:
// deleting a source topic leaves the destination topic and moves its
// partitions to STOPPED; recreating it gives FAILED with a reason.
func TestTopicSyncStopsPartitionsOfADeletedSourceTopicAndFailsARecreatedOne(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	adm := superAdmin(t, source)
	topic := topicName(t, "")
	createTopic(t, ctx, adm, topic, 2, 3, nil)
	produceTo(t, ctx, topic, 10, 0, 1)
	d := startKmirror(t, regexp.QuoteMeta(topic))
	d.waitMirrored(ctx, topic, 2)
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("deleting source topic %s: %v", topic, err)
	}
	for p := int32(0); p < 2; p++ {
		d.waitState(ctx, topic, p, "STOPPED")
	}
	if n := destinationPartitions(t, ctx, topic); n != 2 {
		t.Fatalf("destination topic has %d partitions after the source deletion, want it kept with 2", n)
	}
	for { // the deletion completes asynchronously on the brokers
		resp, err := adm.CreateTopic(ctx, 2, 3, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || ctx.Err() != nil {
			t.Fatalf("recreating source topic %s: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	produceTo(t, ctx, topic, 3, 0, 1)
	for p := int32(0); p < 2; p++ {
		ps := d.waitState(ctx, topic, p, "FAILED")
		if ps.Retry != "NonRetryable" || !strings.Contains(ps.LastError, "deleted and recreated") {
			t.Fatalf("partition %d: failure %q (retry %q)", p, ps.LastError, ps.Retry)
		}
	}
}
