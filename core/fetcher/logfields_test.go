package fetcher

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/internal/testlog"
)

// TestLogLinesAboutAPartitionCarryItsFields: given the mirror's logger (as
// core/datapath gives it: with the mirror field), the Manager logs every
// line about a partition, placed or failed, with its topic and partition
// fields.
func TestLogLinesAboutAPartitionCarryItsFields(t *testing.T) {
	t.Parallel()
	ctx := kfaketest.Context(t)
	c := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "oor"))
	produce(t, ctx, newProducer(t, c), "oor", 0, 1, 10)
	var buf testlog.Buffer
	root, err := logging.New(&buf, "trace", logging.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, kfaketest.NewClient(t, c), WithLogger(root.Named("fetcher").With("mirror", "m")))
	col := newCollector(t, m)
	k := tp{"oor", 0}
	col.add(PartitionSpec{Topic: k.topic, Partition: k.partition, FetchOffset: 100, LeaderEpoch: -1}, true)
	runManager(t, m)
	col.waitError("out of range error", k)
	kfaketest.WaitFor(t, "the partition's failure logged", func() (bool, string) {
		return len(buf.Messages("partition fetch failed")) > 0, buf.String()
	})
	if len(buf.Messages("partition placed")) == 0 {
		t.Fatalf("no line \"partition placed\" in the log:\n%s", buf.String())
	}
	about, wrong := buf.AboutPartition("m", k.topic, k.partition)
	if len(about) == 0 || len(wrong) > 0 {
		t.Fatalf("%d lines about the partition; these lack its mirror, topic or partition field: %v", len(about), wrong)
	}
}
