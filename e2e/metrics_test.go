package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestMetricsMoveAsTheyShould scrapes /metrics while a mirror runs on
// real Kafka, from a one-broker source cluster of its own (the test stops
// it), and checks that the figures follow what happens: the state gauges
// sum to the partition count; the mirrored bytes match the destination
// log's size within 5% and the request counters move; the lag rises while
// the topic is paused and falls to 0 after the resume; FailedPartitionsCount
// counts a partition made to fail (a foreign record on the destination,
// with mirror.destination.mismatch.action: fail); the source's up gauge
// drops while its broker is stopped and /readyz follows
// (http.readyz.cluster.unreachable.ms), and both come back with it.
func TestMetricsMoveAsTheyShould(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	src, err := kafkatest.Start(ctx, kafkatest.Options{Name: "metrics-source", Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, src), topic, 3, 1, nil)
	producer := newClient(t, src, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	value := bytes.Repeat([]byte("v"), 1000)
	produce := func(n int, from int) {
		for i := range n {
			produceSync(t, ctx, producer, &kgo.Record{Partition: int32((from + i) % 3), Key: fmt.Appendf(nil, "k%d", from+i), Value: value})
		}
	}
	produce(600, 0)
	d := startKmirrorWith(t, topic, []string{"http.readyz.cluster.unreachable.ms: 2000"},
		"bootstrap.servers: "+src.BootstrapServers(kafkatest.Plaintext), "mirror.destination.mismatch.action: fail")
	d.waitMirroredFrom(ctx, src, topic, 3)
	m := map[string]string{"mirror": d.mirror}

	// States sum to the partitions; bytes match the destination's log.
	page := d.scrape(t)
	if n := page.sum("kmirror_partition_state", m); n != 3 {
		t.Errorf("kmirror_partition_state sums to %v, want 3:\n%s", n, page.lines("kmirror_partition_state"))
	}
	if n := page.sum("kmirror_partition_state", with(m, "state", "MIRRORING")); n != 3 {
		t.Errorf("MIRRORING partitions %v, want 3", n)
	}
	if n := page.sum("kmirror_failed_partitions_count", m); n != 0 {
		t.Errorf("kmirror_failed_partitions_count %v before any failure", n)
	}
	mirrored := page.sum("kmirror_mirrored_bytes_total", m)
	logSize := destinationLogSize(t, ctx, topic)
	if mirrored <= 0 || abs(mirrored-float64(logSize)) > 0.05*float64(logSize) {
		t.Errorf("kmirror_mirrored_bytes_total %v, the destination log holds %d bytes: more than 5%% apart", mirrored, logSize)
	}
	// No marker and no retry here: what was sent in ProduceRequests is
	// what the destination holds.
	if v := page.sum("kmirror_produce_bytes_total", m); abs(v-float64(logSize)) > 0.05*float64(logSize) {
		t.Errorf("kmirror_produce_bytes_total %v, the destination log holds %d bytes: more than 5%% apart", v, logSize)
	}
	// The client metrics see at least the batches' bytes, in and out.
	if v := page.sum("kmirror_client_incoming_bytes_total", with(m, "cluster", "source")); v < mirrored {
		t.Errorf("kmirror_client_incoming_bytes_total of the source %v below the bytes mirrored %v", v, mirrored)
	}
	if v := page.sum("kmirror_client_outgoing_bytes_total", map[string]string{"cluster": "destination"}); v < mirrored {
		t.Errorf("kmirror_client_outgoing_bytes_total to the destination %v below the bytes mirrored %v", v, mirrored)
	}
	for _, name := range []string{"kmirror_produce_requests_total", "kmirror_fetch_requests_total", "kmirror_fetch_bytes_total", "kmirror_replication_byte_rate", "kmirror_min_fetch_rate"} {
		if v := page.sum(name, m); v <= 0 {
			t.Errorf("%s = %v under load, want > 0", name, v)
		}
	}
	if v := page.sum("kmirror_fetch_bytes_total", m); v < mirrored {
		t.Errorf("kmirror_fetch_bytes_total %v below the bytes mirrored %v", v, mirrored)
	}
	for _, c := range []string{"source", "destination"} {
		if v := page.sum("kmirror_cluster_up", with(m, "cluster", c)); v != 1 {
			t.Errorf("kmirror_cluster_up{cluster=%q} = %v, want 1", c, v)
		}
	}

	// Paused, the lag rises; resumed, it falls to 0.
	if code, _, errOut := d.cli("mirrors", "pause", "--mirror", d.mirror, "--topics", topic); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	for p := int32(0); p < 3; p++ {
		d.waitState(ctx, topic, p, "PAUSED")
	}
	produce(300, 600) // spread over the partitions by key
	d.waitMetric(t, ctx, "the lag of every partition to rise while paused", func(pg scrapePage) bool {
		lags := with(m, "topic", topic)
		return pg.min("kmirror_consumer_lag", lags) > 0 && pg.sum("kmirror_consumer_lag", lags) == 300 &&
			pg.sum("kmirror_max_lag", m) == pg.max("kmirror_consumer_lag", lags)
	})
	if code, _, errOut := d.cli("mirrors", "resume", "--mirror", d.mirror, "--topics", topic); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	d.waitMetric(t, ctx, "the lag to fall to 0 after the resume", func(pg scrapePage) bool {
		return pg.sum("kmirror_max_lag", m) == 0 && pg.sum("kmirror_partition_state", with(m, "state", "MIRRORING")) == 3
	})

	// A partition made to fail is counted.
	if code, _, errOut := d.cli("mirrors", "pause", "--mirror", d.mirror, "--topics", topic); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	d.waitState(ctx, topic, 0, "PAUSED")
	produceSync(t, ctx, newClient(t, destination, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), &kgo.Record{Partition: 0, Key: []byte("foreign")})
	produce(3, 900)
	if code, _, errOut := d.cli("mirrors", "resume", "--mirror", d.mirror, "--topics", topic); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	d.waitMetric(t, ctx, "FailedPartitionsCount to count the failed partition", func(pg scrapePage) bool {
		return pg.sum("kmirror_failed_partitions_count", m) == 1 && pg.sum("kmirror_partition_state", with(m, "state", "FAILED")) == 1 &&
			pg.sum("kmirror_partition_state", m) == 3
	})

	// The source down: its up gauge drops and /readyz follows; back up, both recover.
	if err := src.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	d.waitMetric(t, ctx, "kmirror_cluster_up of the source to drop and /readyz to fail", func(pg scrapePage) bool {
		code, body := d.readyz()
		return pg.sum("kmirror_cluster_up", with(m, "cluster", "source")) == 0 && pg.sum("kmirror_ready", nil) == 0 &&
			code == http.StatusServiceUnavailable && strings.Contains(body, "source")
	})
	if v := d.scrape(t).sum("kmirror_cluster_up", with(m, "cluster", "destination")); v != 1 {
		t.Errorf("kmirror_cluster_up of the destination %v while only the source is down", v)
	}
	if err := src.RestartBroker(ctx, 0); err != nil {
		t.Fatal(err)
	}
	d.waitMetric(t, ctx, "kmirror_cluster_up of the source and /readyz to recover", func(pg scrapePage) bool {
		code, _ := d.readyz()
		return pg.sum("kmirror_cluster_up", with(m, "cluster", "source")) == 1 && code == http.StatusOK
	})
	d.stop(syscall.SIGTERM)
}

// destinationLogSize is the bytes the destination's log of topic holds
// (every partition, as DescribeLogDirs reports them).
func destinationLogSize(t *testing.T, ctx context.Context, topic string) int64 {
	t.Helper()
	dirs, err := superAdmin(t, destination).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				n += p.Size
			}
		})
	})
	return n
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// with is labels m plus k=v.
func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// scrapePage is one /metrics page.
type scrapePage string

var seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// each calls f with the value of every series of name whose labels
// include want.
func (p scrapePage) each(name string, want map[string]string, f func(float64)) {
	for _, line := range strings.Split(string(p), "\n") {
		mm := seriesLine.FindStringSubmatch(line)
		if mm == nil || mm[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, lp := range labelPair.FindAllStringSubmatch(mm[2], -1) {
			labels[lp[1]] = lp[2]
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if v, err := strconv.ParseFloat(mm[3], 64); err == nil && match {
			f(v)
		}
	}
}

func (p scrapePage) sum(name string, want map[string]string) float64 {
	var s float64
	p.each(name, want, func(v float64) { s += v })
	return s
}

// min is the smallest value of the matching series (-1 when none).
func (p scrapePage) min(name string, want map[string]string) float64 {
	m, seen := -1.0, false
	p.each(name, want, func(v float64) {
		if !seen || v < m {
			m, seen = v, true
		}
	})
	return m
}

// max is the largest value of the matching series (-1 when none).
func (p scrapePage) max(name string, want map[string]string) float64 {
	m := -1.0
	p.each(name, want, func(v float64) { m = max(m, v) })
	return m
}

func (p scrapePage) lines(prefix string) string {
	var out []string
	for _, l := range strings.Split(string(p), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func (d *daemon) scrape(t *testing.T) scrapePage {
	t.Helper()
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return scrapePage(b)
}

func (d *daemon) readyz() (int, string) {
	resp, err := http.Get("http://" + d.httpAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitMetric scrapes until cond holds.
func (d *daemon) waitMetric(t *testing.T, ctx context.Context, what string, cond func(scrapePage) bool) {
	t.Helper()
	var last scrapePage
	for {
		last = d.scrape(t)
		if cond(last) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last scrape:\n%s", what, ctx.Err(), last.lines("kmirror_"))
		case <-time.After(250 * time.Millisecond):
		}
	}
}
