package e2e

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// The brokers run the version the harness says, as each one logs at startup.
func TestBrokersRunTheResolvedKafkaVersion(t *testing.T) {
	for _, c := range []*kafkatest.Cluster{source, destination, secured} {
		t.Logf("cluster %s: Apache Kafka %s, %d broker(s), PLAINTEXT bootstrap %s",
			c.Name(), c.Version(), c.Brokers(), c.BootstrapServers(kafkatest.Plaintext))
		if !strings.HasPrefix(c.Version(), "4.") {
			t.Errorf("cluster %s runs Apache Kafka %q; the harness resolves a 4.x release", c.Name(), c.Version())
		}
		for i := range c.Brokers() {
			log, err := os.ReadFile(c.BrokerLog(i))
			if err != nil {
				t.Fatalf("read log of broker %d of %s: %v", i, c.Name(), err)
			}
			if want := "Kafka version: " + c.Version(); !bytes.Contains(log, []byte(want)) {
				t.Errorf("broker %d of %s never logged %q", i, c.Name(), want)
			}
		}
	}
}

// Both clusters of a mirror pair are up at once, and each stores and returns
// every record field exactly: key, value, headers, timestamp, partition.
func TestSourceAndDestinationRoundTripRecordByRecord(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	for _, c := range []*kafkatest.Cluster{source, destination} {
		t.Run(c.Name(), func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, ctx, superAdmin(t, c), topic, 3, int16(c.Brokers()), nil)

			producer := newClient(t, c, kafkatest.Identity{}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			var sent []*kgo.Record
			for i := range 30 {
				sent = append(sent, &kgo.Record{
					Topic:     topic,
					Partition: int32(i % 3),
					Key:       fmt.Appendf(nil, "key-%d", i),
					Value:     fmt.Appendf(nil, "value-%d-%s", i, strings.Repeat("x", i)),
					Headers: []kgo.RecordHeader{
						{Key: "seq", Value: fmt.Appendf(nil, "%d", i)},
						{Key: "empty", Value: nil},
						{Key: "seq", Value: []byte("repeated keys keep their order")},
					},
					Timestamp: base.Add(time.Duration(i) * time.Second),
				})
			}
			produceSync(t, ctx, producer, sent...)

			got := consumeN(t, ctx, c, kafkatest.Identity{}, topic, len(sent))
			byPos := map[[2]int64]*kgo.Record{}
			for _, r := range got {
				byPos[[2]int64{int64(r.Partition), r.Offset}] = r
			}
			for i, s := range sent {
				r := byPos[[2]int64{int64(s.Partition), s.Offset}]
				if r == nil {
					t.Fatalf("record %d (partition %d offset %d) was not consumed", i, s.Partition, s.Offset)
				}
				if wantOff := int64(i / 3); s.Offset != wantOff {
					t.Errorf("record %d landed at offset %d of partition %d, want %d", i, s.Offset, s.Partition, wantOff)
				}
				if !bytes.Equal(r.Key, s.Key) || !bytes.Equal(r.Value, s.Value) {
					t.Errorf("record %d: got key %q value %q, want %q %q", i, r.Key, r.Value, s.Key, s.Value)
				}
				if !r.Timestamp.Equal(s.Timestamp) {
					t.Errorf("record %d: timestamp %s, want %s", i, r.Timestamp, s.Timestamp)
				}
				if !slices.EqualFunc(r.Headers, s.Headers, func(a, b kgo.RecordHeader) bool {
					return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
				}) {
					t.Errorf("record %d: headers %v, want %v", i, r.Headers, s.Headers)
				}
			}
		})
	}
}

// Kafka's own console consumer, run from the harness's jars, reads what
// franz-go wrote; on the secured cluster it logs in with SCRAM-SHA-512 over
// SASL_SSL through the client properties the harness writes.
func TestKafkaConsoleConsumerReadsFranzGoRecords(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	cases := []struct {
		c  *kafkatest.Cluster
		id kafkatest.Identity
	}{
		{destination, kafkatest.Identity{Listener: kafkatest.Plaintext}},
		{secured, kafkatest.Identity{Listener: kafkatest.SASLSSL, Mechanism: kafkatest.ScramSHA512, User: "alice", Password: securedUsers["alice"]}},
	}
	for _, tc := range cases {
		t.Run(tc.c.Name(), func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, ctx, superAdmin(t, tc.c), topic, 1, 1, nil)
			var want []string
			var recs []*kgo.Record
			for i := range 3 {
				recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
				want = append(want, fmt.Sprintf("k%d|v%d", i, i))
			}
			produceSync(t, ctx, newClient(t, tc.c, tc.id), recs...)

			cfg, err := tc.c.ClientConfigFile(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tc.c.RunTool(ctx, "org.apache.kafka.tools.consumer.ConsoleConsumer",
				"--bootstrap-server", tc.c.BootstrapServers(tc.id.Listener),
				"--command-config", cfg,
				"--topic", topic, "--from-beginning", "--max-messages", "3", "--timeout-ms", "60000",
				"--formatter-property", "print.key=true",
				"--formatter-property", "key.separator=|",
			)
			if err != nil {
				t.Fatalf("console consumer on %s as %s: %v", tc.c.Name(), tc.id, err)
			}
			if got := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(got, want) {
				t.Fatalf("console consumer printed %q, want %q", got, want)
			}
		})
	}
}
