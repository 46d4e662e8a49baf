package destfaults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fullHeadroom is the room the disk-full test leaves on tinyVolume: what
// it holds when the fault begins plus this; bulkBytes, the size of the
// records then written to the source, is several times more.
const (
	fullHeadroom = 4 << 20
	bulkBytes    = 12 << 20
	bulkRecord   = 64 << 10
)

// The destination broker that holds the mirrored partitions runs out of
// disk space (its log directory is a small tmpfs that fills up) while
// transactions, plain records and large records stream into the source.
// Kafka takes the full log directory offline; with no other log directory
// left the broker stops (docs/operations.md, "Destination disk full"). kmirror
// keeps the copy waiting — the produce errors counted in its metrics,
// describe saying what the appends are retried on, no partition FAILED for
// good — and when there is room again (the volume grown)
// and the broker restarted, it catches up, and the destination is the
// source's copy, offset by offset. (The stopped broker's transaction
// coordinators fail over; one that was writing a marker may write it twice,
// which kmirror says and maps — the copy is then compared through the
// offset map: docs/design/datapath.md, "A marker the destination writes
// twice".)
func TestDestinationDiskFullWaitsAndResumesWhenSpaceReturns(t *testing.T) {
	if tinyVolume == "" {
		// CI runs as root: there a missing volume is a failure, never a
		// skip that would count as a pass.
		if os.Getenv("CI") != "" {
			t.Fatal("no tmpfs for the destination broker's log directory (needs root); CI must run this test")
		}
		t.Skip("needs root to mount a small tmpfs as a destination broker's log directory")
	}
	const partitions = 2
	ctx := testContext(t, 8*time.Minute)
	topic := topicName(t)
	createTopic(t, ctx, source, topic, partitions)
	// On the destination, the topic lives on the tiny broker alone: the
	// whole copy depends on its disk.
	createOnBroker(t, ctx, topic, partitions, tinyBroker)
	d := startKmirror(t, topic)
	tr := startTraffic(t, ctx, topic, partitions)
	d.waitProgress(ctx, topic, ones(partitions))

	used, _, err := tinyVolumeUsage()
	if err != nil {
		t.Fatal(err)
	}
	if err := resizeTinyVolume(used + fullHeadroom); err != nil {
		t.Fatalf("shrinking %s to %d bytes: %v", tinyVolume, used+fullHeadroom, err)
	}
	t.Cleanup(func() { _ = resizeTinyVolume(tinyRoom) })
	_, size, _ := tinyVolumeUsage()
	t.Logf("destination broker %d's log dir %s: %d bytes held, volume shrunk to %d", tinyBroker, tinyVolume, used, size)
	errorsBefore, logBefore := d.produceErrors(), len(d.log())
	produceBulk(t, ctx, topic, partitions)

	stopped := waitDiskFull(t, ctx)
	t.Logf("destination broker %d: %s", tinyBroker, stopped)
	// kmirror waits: its appends fail and are retried (counted in its
	// metrics, each retry logged with its error); no partition fails for
	// good.
	for {
		errs, retries := d.produceErrors()-errorsBefore, retryErrors(d.log()[logBefore:])
		if errs > 0 && len(retries) > 0 {
			t.Logf("kmirror: %v failed produce requests since the volume filled up; appends retried on %q", errs, retries)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kmirror's metrics count %v failed produce requests and its log %d retried appends while the destination's disk is full", errs, len(retries))
		case <-time.After(200 * time.Millisecond):
		}
	}
	// describe says why the partitions wait (what their appends are
	// retried on), and none FAILED for good.
	waiting := d.waitRetrying(ctx, topic, partitions)
	t.Logf("describe while the disk is full: %s", waiting)
	d.logPartitions()
	for p := range int32(partitions) {
		if ps, _ := d.partitionStatus(topic, p); ps.Retry == "NonRetryable" {
			t.Fatalf("%s[%d] FAILED for good while the destination's disk was full: %s", topic, p, ps.LastError)
		}
	}

	// Room again: the volume grown, the broker restarted (Kafka takes a
	// failed log directory back only at start).
	if err := resizeTinyVolume(tinyRoom); err != nil {
		t.Fatal(err)
	}
	if destination.Running(tinyBroker) {
		if err := destination.StopBroker(tinyBroker); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	if err := destination.RestartBroker(ctx, tinyBroker); err != nil {
		t.Fatal(err)
	}
	d.waitProgress(ctx, topic, d.mirroredPlus(topic, partitions, 20))
	t.Logf("mirroring again %s after the broker was restarted", time.Since(began).Round(time.Millisecond))
	tr.stop()
	d.waitMirrored(ctx, topic, partitions)
	t.Logf("caught up with the source %s after the broker was restarted", time.Since(began).Round(time.Millisecond))
	d.logPartitions()
	for p := range int32(partitions) {
		if ps, _ := d.partitionStatus(topic, p); ps.LastError != "" {
			t.Errorf("%s[%d] caught up and still says %q", topic, p, ps.LastError)
		}
	}
	records, aborted, markers := verifyCopy(t, ctx, d, topic, partitions, true)
	if markers == 0 || aborted == 0 || records == 0 {
		t.Fatalf("verified %d records (%d aborted) and %d markers; the scenario needs all three", records, aborted, markers)
	}
	t.Logf("identical on both clusters: %d records (%d aborted) and %d transaction markers", records, aborted, markers)
}

// createOnBroker creates topic on the destination with every partition's
// only replica on broker.
func createOnBroker(t testing.TB, ctx context.Context, topic string, partitions int32, broker int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p := range partitions {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{broker}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, newClient(t, destination))
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s on destination broker %d: %v", topic, broker, err)
	}
	adm := adminOf(t, destination)
	for { // its partitions get their leader a moment later
		ls, err := tryLeaders(ctx, adm, topic)
		ok := err == nil && len(ls) == int(partitions)
		for _, l := range ls {
			ok = ok && l == broker
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s on the destination has leaders %v (%v), want broker %d", topic, ls, err, broker)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// produceBulk writes bulkBytes of large records to the source's topic.
func produceBulk(t testing.TB, ctx context.Context, topic string, partitions int32) {
	t.Helper()
	cl := newClient(t, source, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range bulkBytes / bulkRecord {
		v := bytes.Repeat(fmt.Appendf(nil, "bulk %06d ", i), bulkRecord/12)
		recs = append(recs, &kgo.Record{Partition: int32(i) % partitions, Key: fmt.Appendf(nil, "bulk-%d", i), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d large records to the source: %v", len(recs), err)
	}
}

// waitDiskFull waits until the tiny broker stopped or logged that its disk
// is full, and says which.
func waitDiskFull(t testing.TB, ctx context.Context) string {
	t.Helper()
	for {
		blog, _ := os.ReadFile(destination.BrokerLog(tinyBroker))
		full := bytes.Contains(blog, []byte("No space left on device"))
		switch {
		case full && !destination.Running(tinyBroker):
			return "stopped after a write failed with \"No space left on device\": " + brokerLines(blog, "all log dirs", "offline", "No space left")
		case !destination.Running(tinyBroker):
			t.Fatalf("destination broker %d stopped without a full disk:\n%s", tinyBroker, destination.LogTail(30))
		case full && bytes.Contains(blog, []byte("offline")):
			return "running, its log dir offline: " + brokerLines(blog, "offline", "No space left")
		}
		select {
		case <-ctx.Done():
			used, size, _ := tinyVolumeUsage()
			t.Fatalf("destination broker %d never filled its volume (%d of %d bytes used)", tinyBroker, used, size)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// brokerLines returns the first line of a broker log holding each of subs.
func brokerLines(blog []byte, subs ...string) string {
	var out []string
	for _, s := range subs {
		for _, line := range strings.Split(string(blog), "\n") {
			if strings.Contains(line, s) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return strings.Join(out, " | ")
}

// waitRetrying waits until describe shows a partition of topic MIRRORING
// with the error its appends are retried on, and returns its status line.
func (d *daemon) waitRetrying(ctx context.Context, topic string, partitions int32) string {
	d.t.Helper()
	for {
		for p := range partitions {
			if ps, _ := d.partitionStatus(topic, p); ps.State == "MIRRORING" && strings.HasPrefix(ps.LastError, "destination appends retrying since ") {
				return fmt.Sprintf("%s[%d] %s lag %d: %s", topic, p, ps.State, ps.Lag, ps.LastError)
			}
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("describe never said why %s waits", topic)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// produceErrors returns kmirror's count of failed produce requests to the
// destination.
func (d *daemon) produceErrors() float64 {
	n, _ := d.metric("kmirror_produce_requests_total", `result="error"`)
	return n
}

// retryErrors returns the distinct errors of the "retrying append" lines of
// a kmirror log.
func retryErrors(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"retrying append"`) {
			continue
		}
		var l struct {
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && !slices.Contains(out, l.Error) {
			out = append(out, l.Error)
		}
	}
	return out
}
