// Package load writes what the bench produces on the source: a scenario's
// backlog, loaded with Kafka's own producer so that its batches are shaped as
// a Java producer shapes them (Backlog); a sample of the batches it made
// (SampleBatches); and the latency phase's timed records, read back on the
// destination (LatencyPhase).
package load

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/bench/internal/scenario"
	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// payloadLines is how many distinct values the payload file holds: enough
// that no batch repeats a value, so codecs see data as varied as real data.
const payloadLines = 2000

// writePayloadFile writes payloadLines lines of exactly size bytes each (no
// newline inside): half random hex, half repeated JSON-like text, so lz4
// and zstd compress them about as much as application events.
func writePayloadFile(path string, size int) error {
	filler := []byte(`{"event":"order-placed","region":"eu-west","status":"ok","items":3} `)
	out := make([]byte, 0, payloadLines*(size+1))
	random := make([]byte, size/4)
	for range payloadLines {
		_, _ = rand.Read(random)
		line := hex.AppendEncode(nil, random)
		for len(line) < size {
			line = append(line, filler[:min(len(filler), size-len(line))]...)
		}
		out = append(out, line[:size]...)
		out = append(out, '\n')
	}
	return os.WriteFile(path, out, 0o600)
}

// Backlog fills the scenario's source topic with Kafka's own producer
// (kafka-producer-perf-test), so the source batches are shaped exactly as a
// Java producer with the scenario's batch.size, linger.ms and
// compression.type shapes them.
func Backlog(ctx context.Context, src *kafkatest.Cluster, dir, topic string, sc scenario.Scenario) error {
	payload := filepath.Join(dir, fmt.Sprintf("payload-%d.txt", sc.RecordSize))
	if _, err := os.Stat(payload); err != nil {
		if err := writePayloadFile(payload, sc.RecordSize); err != nil {
			return err
		}
	}
	args := []string{
		"--bootstrap-server", src.BootstrapServers(kafkatest.Plaintext),
		"--topic", topic,
		"--num-records", strconv.FormatInt(sc.Records, 10),
		"--throughput", "-1",
		"--payload-file", payload,
		"--reporting-interval", "60000",
		"--command-property",
		"acks=all",
		"batch.size=" + strconv.Itoa(sc.BatchSize),
		"linger.ms=" + strconv.FormatInt(sc.Linger.Milliseconds(), 10),
		"compression.type=" + sc.Codec,
		"buffer.memory=" + strconv.Itoa(64<<20),
	}
	if sc.RoundRobin {
		args = append(args, "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner")
	}
	if _, err := src.RunTool(ctx, "org.apache.kafka.tools.ProducerPerformance", args...); err != nil {
		return fmt.Errorf("loading %s: %w", topic, err)
	}
	return nil
}

// SampleBatches reads up to 8 MiB of partition 0 of topic raw and returns
// how many batches and bytes it holds: the mean batch size the mirrors
// find on the source.
func SampleBatches(ctx context.Context, cl *kgo.Client, topic string) (batches, bytes int64, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = -1
	req.MaxBytes = 8 << 20
	req.MaxWaitMillis = 100
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = []kmsg.MetadataRequestTopic{mt}
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return 0, 0, err
	}
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) == 0 {
		return 0, 0, fmt.Errorf("no metadata for %s", topic)
	}
	rt.TopicID = mresp.Topics[0].TopicID
	leader := mresp.Topics[0].Partitions[0].Leader
	for _, p := range mresp.Topics[0].Partitions {
		if p.Partition == 0 {
			leader = p.Leader
		}
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, 8<<20, -1, -1
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kresp, err := cl.Broker(int(leader)).Request(rctx, req)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range kresp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			sc := batch.NewScanner(p.RecordBatches)
			for sc.Next() {
				batches++
				bytes += int64(len(sc.Batch()))
			}
		}
	}
	return batches, bytes, nil
}
