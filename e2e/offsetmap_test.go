package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestMapModeDaemonKilledRepeatedlyKeepsAnExactOffsetMap: a compacted
// source topic runs in map mode; records stream in while the daemon is
// killed with SIGKILL five times, each time while it is forwarding, and
// restarted. Every record is on the destination exactly once, in order, and
// the offset map reloaded from the state store (snapshot and segments) gives
// each record's destination offset: no batch appended without its mapping,
// no mapping left for a batch that was not appended.
func TestMapModeDaemonKilledRepeatedlyKeepsAnExactOffsetMap(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	topic := topicName(t, "")
	compactedTopicWithGaps(t, ctx, topic)
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	if ps, _ := d.partitionStatus(topic, 0); ps.Mode != "map" {
		t.Fatalf("mode %q, want map; notes %v", ps.Mode, ps.Notes)
	}
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	dstAdm := superAdmin(t, destination)
	n := 0
	for kill := range 5 {
		start := destinationEnd(t, ctx, dstAdm, topic)
		for range 40 { // one batch each
			produceSync(t, ctx, producer, &kgo.Record{Key: fmt.Appendf(nil, "kill-%d-%d", kill, n), Value: fmt.Appendf(nil, "record %d", n)})
			n++
		}
		// Kill while the new records are being forwarded.
		for destinationEnd(t, ctx, dstAdm, topic) == start {
			select {
			case <-ctx.Done():
				t.Fatalf("the destination did not move past offset %d", start)
			case <-time.After(10 * time.Millisecond):
			}
		}
		d.stop(syscall.SIGKILL)
		d.start()
	}
	d.waitMirrored(ctx, topic, 1)
	d.stop(syscall.SIGTERM)

	srcLog, dstLog := readBothLogs(t, ctx, topic)
	if len(dstLog.Entries) != len(srcLog.Entries) {
		t.Fatalf("destination holds %d records, the source %d", len(dstLog.Entries), len(srcLog.Entries))
	}
	m := storedOffsetMap(t, ctx, d, topic)
	if diff := verify.DiffMapped(srcLog, dstLog, m.Lookup); diff != "" {
		t.Fatalf("%s (offset map %v)", diff, m.Ranges())
	}
	t.Logf("%d records, %d ranges; destination offsets 0–%d", len(srcLog.Entries), m.Len(), dstLog.HighWatermark-1)
}

// destinationEnd returns the end offset of partition 0 of topic.
func destinationEnd(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("listing the end offsets of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s[0]: %v", topic, o.Err)
	}
	return o.Offset
}
