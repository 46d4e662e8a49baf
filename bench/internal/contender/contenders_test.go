package contender

import (
	"strings"
	"testing"

	"github.com/kmirror/kmirror/bench/internal/report"
	"github.com/kmirror/kmirror/bench/internal/scenario"
)

func mm2Spec() RunSpec {
	return RunSpec{
		Topics: []string{"bench-p100-1", "bench-p100-1-lat2"}, Seq: 7,
		Source: "127.0.0.1:1", Destination: "127.0.0.1:2",
		Scenario: scenario.Scenario{Partitions: 100, BatchSize: scenario.DefaultBatch, Linger: scenario.DefaultLinger, Codec: "lz4"},
	}
}

// MirrorMaker 2 gets the tuning the report claims: one task per partition
// up to the cap, the destination producer batching as the source producer,
// both topics, and offset syncs off unless it is mm2-sync.
func TestMM2PropertiesCarryTheTuningAndTheOffsetSyncSwitch(t *testing.T) {
	props := MM2{MaxTasks: 32}.mm2Properties(mm2Spec())
	for _, want := range []string{
		"clusters = src7, dst7\n",
		"src7->dst7.enabled = true\n",
		`src7->dst7.topics = bench-p100-1, bench-p100-1-lat2` + "\n",
		"replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n",
		"tasks.max = 32\n",
		"dst7.producer.batch.size = 16384\n",
		"dst7.producer.linger.ms = 5\n",
		"dst7.producer.compression.type = lz4\n",
		"src7.consumer.max.partition.fetch.bytes = 1048576\n",
		"emit.offset-syncs.enabled = false\n",
		"emit.checkpoints.enabled = false\n",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("mm2.properties lacks %q:\n%s", want, props)
		}
	}
	if strings.Contains(props, "offset-syncs.topic") {
		t.Error("offset-syncs.topic.* is set with offset syncs off (MirrorSourceConnector refuses that)")
	}
	if got := (MM2{}).mm2Properties(mm2Spec()); !strings.Contains(got, "tasks.max = 100\n") {
		t.Error("without a cap tasks.max is not the partition count")
	}

	sync := MM2{MaxTasks: 32, OffsetSync: true}
	if sync.Name() != report.MM2Sync {
		t.Errorf("name %q, want %q", sync.Name(), report.MM2Sync)
	}
	props = sync.mm2Properties(mm2Spec())
	for _, want := range []string{"emit.offset-syncs.enabled = true\n", "emit.checkpoints.enabled = true\n", "sync.group.offsets.enabled = true\n"} {
		if !strings.Contains(props, want) {
			t.Errorf("mm2-sync properties lack %q", want)
		}
	}
}

func TestQuotedListEscapesEachTopic(t *testing.T) {
	if got := quotedList([]string{"a.b", "c+d"}); got != `a\.b, c\+d` {
		t.Errorf("quotedList = %q", got)
	}
	if _, err := ParseNames("kmirror,mm2-sync"); err != nil {
		t.Error(err)
	}
	if _, err := ParseNames("kmirror,mm3"); err == nil {
		t.Error("an unknown contender was accepted")
	}
}
