package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// testContext returns a context that ends with the test or after d.
func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

var unsafeTopicChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// topicName returns a topic name unique to this test and run, so tests sharing
// a cluster (and repeated runs with -count) never meet.
func topicName(t testing.TB, suffix string) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := unsafeTopicChars.ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), "-")
	if suffix != "" {
		name += "-" + suffix
	}
	return strings.ToLower(name) + "-" + hex.EncodeToString(r[:])
}

// newClient returns a franz-go client of c connected as id, closed when the
// test ends.
func newClient(t testing.TB, c *kafkatest.Cluster, id kafkatest.Identity, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(id, opts...)
	if err != nil {
		t.Fatalf("client of cluster %s as %s: %v", c.Name(), id, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// superAdmin returns an admin client of c as the harness's super user.
func superAdmin(t testing.TB, c *kafkatest.Cluster) *kadm.Client {
	t.Helper()
	adm, err := c.Admin()
	if err != nil {
		t.Fatalf("admin client of cluster %s: %v", c.Name(), err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// createTopic creates a topic through adm and fails the test if it cannot.
func createTopic(t testing.TB, ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s (%d partitions, RF %d): %v", topic, partitions, rf, err)
	}
}

// consumeN reads n records of topic from the start, failing the test if they
// do not all arrive before ctx ends.
func consumeN(t testing.TB, ctx context.Context, c *kafkatest.Cluster, id kafkatest.Identity, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, c, id,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s from cluster %s: got %d of %d records: %v", topic, c.Name(), len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("consume %s[%d] from cluster %s: %v", topic, p, c.Name(), err)
		})
		out = append(out, fs.Records()...)
	}
	if len(out) != n {
		t.Fatalf("consume %s from cluster %s: got %d records, want %d", topic, c.Name(), len(out), n)
	}
	return out
}

// produceSync produces records and fails the test on the first error.
func produceSync(t testing.TB, ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d record(s) to %s: %v", len(recs), recs[0].Topic, err)
	}
}
