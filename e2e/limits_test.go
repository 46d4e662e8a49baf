package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// effectiveMaxMessageBytes returns topic's max.message.bytes as the cluster
// reports it (the topic's own setting or the broker's).
func effectiveMaxMessageBytes(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describing configs of %s: %v", topic, err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				return *c.Value
			}
		}
	}
	return ""
}

// produceBig writes, to partition 0 of topic, a few small records, one
// uncompressed record of size random bytes (one batch of about that size),
// and a few small records again.
func produceBig(t testing.TB, ctx context.Context, topic string, size int) {
	t.Helper()
	cl := newClient(t, source, kafkatest.Identity{}, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(int32(size+1<<20)))
	small := func(tag string) {
		for i := 0; i < 3; i++ {
			produceSync(t, ctx, cl, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "%s %d", tag, i)})
		}
	}
	small("before")
	v := make([]byte, size)
	_, _ = rand.Read(v)
	produceSync(t, ctx, cl, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("big"), Value: v})
	small("after")
}

// setSourceMessageMaxBytes sets the source cluster's dynamic default
// message.max.bytes (every broker, every topic without a setting of its own)
// and removes it when the test ends.
func setSourceMessageMaxBytes(t testing.TB, ctx context.Context, value string) {
	t.Helper()
	adm := superAdmin(t, source)
	alter := func(ctx context.Context, op kadm.IncrementalOp, v *string) error {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "message.max.bytes", Value: v}})
		if err == nil {
			for _, r := range resps {
				err = errors.Join(err, r.Err)
			}
		}
		return err
	}
	if err := alter(ctx, kadm.SetConfig, &value); err != nil {
		t.Fatalf("setting the source cluster's message.max.bytes: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := alter(ctx, kadm.DeleteConfig, nil); err != nil {
			t.Errorf("removing the source cluster's message.max.bytes: %v", err)
		}
	})
}

// TestBatchesUpToTheSourcesLimitAreMirroredAndTheDestinationLimitFollows: a
// 3 MB batch in a topic that sets max.message.bytes to 5 MB, and one in a
// topic that inherits 5 MB from the source brokers' message.max.bytes, are
// both mirrored to a destination whose brokers allow 1 MB: the destination
// topics carry max.message.bytes 5242880, and no partition ever failed.
func TestBatchesUpToTheSourcesLimitAreMirroredAndTheDestinationLimitFollows(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	adm := superAdmin(t, source)
	prefix := topicName(t, "")
	own, inherited := prefix+"-own", prefix+"-inherited"
	setSourceMessageMaxBytes(t, ctx, "5242880")
	createTopic(t, ctx, adm, own, 1, 3, map[string]*string{"max.message.bytes": kadm.StringPtr("5242880")})
	createTopic(t, ctx, adm, inherited, 1, 3, nil)
	for effectiveMaxMessageBytes(t, ctx, adm, inherited) != "5242880" { // the cluster default reaches every broker through the metadata log
		select {
		case <-ctx.Done():
			t.Fatalf("the source's message.max.bytes did not reach topic %s", inherited)
		case <-time.After(100 * time.Millisecond):
		}
	}
	produceBig(t, ctx, own, 3<<20)
	produceBig(t, ctx, inherited, 3<<20)

	d := startKmirror(t, regexp.QuoteMeta(prefix)+"-.*")
	d.waitMirrored(ctx, own, 1)
	d.waitMirrored(ctx, inherited, 1)
	verifyTopic(t, ctx, own, 1)
	verifyTopic(t, ctx, inherited, 1)
	dadm := superAdmin(t, destination)
	for _, topic := range []string{own, inherited} {
		if got := dynamicTopicConfigs(t, ctx, dadm, topic)["max.message.bytes"]; got != "5242880" {
			t.Errorf("destination topic %s: max.message.bytes = %q set on the topic, want 5242880", topic, got)
		}
		if ps, _ := d.partitionStatus(topic, 0); ps.LastError != "" {
			t.Errorf("%s[0] failed on the way: %s", topic, ps.LastError)
		}
	}
	if strings.Contains(d.log(), "MESSAGE_TOO_LARGE") {
		t.Errorf("a batch was refused on the way:\n%s", tail(d.log(), 30))
	}
}

// TestBatchAboveAnExcludedDestinationLimitFailsThePartitionNamingBothLimits:
// with max.message.bytes in mirror.topic.properties.exclude, the destination
// topic keeps its brokers' 1 MB limit; the source's 3 MB batch fails the
// partition at once (non-retryable) with a reason naming the batch size,
// both limits and the key to raise, after the records before it were
// mirrored.
func TestBatchAboveAnExcludedDestinationLimitFailsThePartitionNamingBothLimits(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	adm := superAdmin(t, source)
	topic := topicName(t, "")
	createTopic(t, ctx, adm, topic, 1, 3, map[string]*string{"max.message.bytes": kadm.StringPtr("5242880")})
	produceBig(t, ctx, topic, 3<<20)

	d := startKmirror(t, regexp.QuoteMeta(topic), `mirror.topic.properties.exclude: "max.message.bytes,min.insync.replicas"`)
	ps := d.waitState(ctx, topic, 0, "FAILED")
	if ps.Retry != "NonRetryable" {
		t.Fatalf("retry = %q, want NonRetryable; reason: %s", ps.Retry, ps.LastError)
	}
	for _, want := range []string{"topic " + topic + " partition 0", "record batch of 3145", "5242880 (set on the topic)", "1048588 (the brokers' message.max.bytes)",
		"mirror.topic.properties.exclude", "set max.message.bytes of destination topic " + topic + " to at least", "MESSAGE_TOO_LARGE"} {
		if !strings.Contains(ps.LastError, want) {
			t.Errorf("reason %q does not contain %q", ps.LastError, want)
		}
	}
	if ps.LastMirroredOffset != 2 {
		t.Errorf("last mirrored offset %d, want 2 (the three records before the big batch)", ps.LastMirroredOffset)
	}
	if got, ok := dynamicTopicConfigs(t, ctx, superAdmin(t, destination), topic)["max.message.bytes"]; ok {
		t.Errorf("the excluded max.message.bytes=%s was set on the destination", got)
	}
	for { // the config loop lists the excluded lower limit within a round or two
		st, _ := d.status()
		for _, m := range st.Mirrors {
			for _, e := range m.TopicConfigErrors {
				if e.Topic == topic && e.Key == "max.message.bytes" && strings.Contains(e.Error, "below the source topic's 5242880") {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("describe does not list the excluded lower limit of %s: %+v", topic, st)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
