package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// trimmedSource creates a one-partition source topic with configs, writes
// ten batches of 50 keyed records (offsets 0–499) and moves its log start to
// 275, inside the sixth batch, with DeleteRecords.
func trimmedSource(t testing.TB, ctx context.Context, topic string, configs map[string]*string) {
	t.Helper()
	adm := superAdmin(t, source)
	createTopic(t, ctx, adm, topic, 1, 3, configs)
	cl := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: fmt.Appendf(nil, "v%d", j)})
		}
		produceSync(t, ctx, cl, recs...)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 275})
	resp, err := adm.DeleteRecords(ctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("moving the log start of %s to 275: %v", topic, err)
	}
}

// deleteRecordsErr moves the log start of partition 0 of topic on c to at
// and returns the partition's error.
func deleteRecordsErr(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, at int64) error {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
	resp, err := superAdmin(t, c).DeleteRecords(ctx, os)
	if err != nil {
		t.Fatalf("DeleteRecords on %s of %s: %v", c.Name(), topic, err)
	}
	return resp.Error()
}

// cleanupPolicy returns the cleanup.policy of topic on c.
func cleanupPolicy(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string) string {
	t.Helper()
	rcs, err := superAdmin(t, c).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describing %s on %s: %v %v", topic, c.Name(), err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			return c.MaybeValue()
		}
	}
	t.Fatalf("%s on %s has no cleanup.policy", topic, c.Name())
	return ""
}

// TestSourceLogStartIsAlignedWithFillerOnACompactDeleteTopic: a source
// topic with cleanup.policy=compact,delete whose log start was moved inside
// a batch. Filler on the destination (same policy) needs a key, or the broker
// refuses it; it is deleted, and the destination's log start, every record
// and every batch byte for byte equal the source's, in preserve mode.
func TestSourceLogStartIsAlignedWithFillerOnACompactDeleteTopic(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	trimmedSource(t, ctx, topic, map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete")})
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	if ps, _ := d.partitionStatus(topic, 0); ps.Mode != "preserve" {
		t.Fatalf("mode %q, want preserve; notes %v", ps.Mode, ps.Notes)
	}
	if p := cleanupPolicy(t, ctx, destination, topic); p != "compact,delete" {
		t.Fatalf("destination cleanup.policy = %q, want compact,delete (test premise)", p)
	}
	logs := verifyTopic(t, ctx, topic, 1) // log starts, offsets and records
	if logs[0].LogStart != 275 || logs[0].HighWatermark != 500 {
		t.Fatalf("source log %d–%d, want 275–500 (test premise)", logs[0].LogStart, logs[0].HighWatermark)
	}
	diffs, err := verify.PartitionBatches(ctx, newClient(t, source, kafkatest.Identity{}), newClient(t, destination, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		if u := d.Unexpected(); len(u) > 0 {
			t.Errorf("%s; of these, %v are not re-stamped fields", d, u)
		}
	}
	if len(diffs) != 5 || diffs[0].Source.BaseOffset() != 250 {
		t.Fatalf("%d batches compared, want the 5 from offset 250", len(diffs))
	}
}

// TestCompactTopicWithAMovedLogStartRunsInMapMode: a source topic with
// cleanup.policy=compact whose log start is beyond 0 (moved while it was
// compact,delete). The destination topic is compact too and refuses
// DeleteRecords, so filler could never be removed: the partition runs in map
// mode, says why, and the destination holds exactly the source's records
// (no filler), each at the offset the stored offset map gives.
func TestCompactTopicWithAMovedLogStartRunsInMapMode(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	trimmedSource(t, ctx, topic, map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete")})
	alter := []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}
	if resp, err := superAdmin(t, source).AlterTopicConfigs(ctx, alter, topic); err != nil || resp[0].Err != nil {
		t.Fatalf("setting cleanup.policy=compact: %v %v", err, resp)
	}
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	ps, _ := d.partitionStatus(topic, 0)
	if ps.Mode != "map" || !strings.Contains(strings.Join(ps.Notes, "; "), "refuses DeleteRecords") {
		t.Fatalf("mode %q, notes %v; want map mode saying the destination refuses DeleteRecords", ps.Mode, ps.Notes)
	}
	d.stop(syscall.SIGTERM)
	if p := cleanupPolicy(t, ctx, destination, topic); p != "compact" {
		t.Fatalf("destination cleanup.policy = %q, want compact (test premise)", p)
	}
	// The premise of the decision: a compact topic refuses DeleteRecords.
	if err := deleteRecordsErr(t, ctx, destination, topic, 1); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on the compact destination topic: %v, want POLICY_VIOLATION", err)
	}

	srcLog, dstLog := readBothLogs(t, ctx, topic)
	if srcLog.LogStart != 275 || len(srcLog.Entries) != 225 {
		t.Fatalf("source log starts at %d with %d records, want 275 and 225 (test premise)", srcLog.LogStart, len(srcLog.Entries))
	}
	if dstLog.LogStart != 0 || len(dstLog.Entries) != len(srcLog.Entries) {
		t.Fatalf("destination log starts at %d with %d records, want 0 and the source's %d (no filler, nothing below the source log start)",
			dstLog.LogStart, len(dstLog.Entries), len(srcLog.Entries))
	}
	m := storedOffsetMap(t, ctx, d, topic)
	if diff := verify.DiffMapped(srcLog, dstLog, m.Lookup); diff != "" {
		t.Fatal(diff)
	}
}
