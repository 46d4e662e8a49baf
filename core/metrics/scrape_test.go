package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// states are the partition states the tests' engines know.
var states = []string{"PREPARING", "MIRRORING", "PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED"}

// fakeMirror returns a mirror sample of n partitions over topics of 100
// partitions each, in states taken in turn (and one in a state the engine
// does not know), each with a lag.
func fakeMirror(name string, n int) MirrorSample {
	ms := MirrorSample{Mirror: name, Clusters: []ClusterSample{{"source", true}, {"destination", true}}}
	for i := range n {
		st := states[i%len(states)]
		if i == 0 {
			st = "UNKNOWN"
		}
		ms.Partitions = append(ms.Partitions, PartitionSample{Topic: fmt.Sprintf("topic-%04d", i/100), Partition: int32(i % 100), State: st, Lag: int64(i)})
	}
	return ms
}

// newTestEngine returns an engine on a new provider whose mirrors are
// mirrors and whose per-partition switch is series.
func newTestEngine(t *testing.T, series *atomic.Bool, mirrors ...MirrorSample) (*Provider, *Engine) {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	zero := func() int64 { return 0 }
	e, err := NewEngine(p, EngineSource{Mirrors: func() []MirrorSample { return mirrors }, States: states, Failed: "FAILED",
		BudgetMax: zero, BudgetReserved: zero, ThrottleRate: zero, PartitionSeries: series.Load})
	if err != nil {
		t.Fatal(err)
	}
	return p, e
}

// The state gauges of a mirror sum to its partition count, a state no
// partition is in included as 0 and a state the engine does not know
// counted too; the topic count and dead goroutines are the mirror's.
func TestPartitionStateGaugesSumToThePartitionCount(t *testing.T) {
	t.Parallel()
	var series atomic.Bool
	series.Store(true)
	m := fakeMirror("dc1", 250)
	m.DeadThreads = 2
	p, _ := newTestEngine(t, &series, m, fakeMirror("dc2", 3))
	for mirror, want := range map[string]float64{"dc1": 250, "dc2": 3} {
		total := value(t, p, "kmirror_partitions", map[string]string{"mirror": mirror})
		if total != want {
			t.Errorf("kmirror_partitions{mirror=%q} = %v, want %v", mirror, total, want)
		}
		var sum float64
		for _, s := range append(states, "UNKNOWN") {
			sum += value(t, p, "kmirror_partition_state", map[string]string{"mirror": mirror, "state": s})
		}
		if sum != total {
			t.Errorf("kmirror_partition_state{mirror=%q} sums to %v, want kmirror_partitions %v", mirror, sum, total)
		}
	}
	if v := value(t, p, "kmirror_partition_state", map[string]string{"mirror": "dc2", "state": "STOPPED"}); v != 0 {
		t.Errorf("kmirror_partition_state{state=STOPPED} = %v for a mirror without one, want 0", v)
	}
	for _, c := range []struct {
		name, mirror string
		want         float64
	}{
		{"kmirror_mirror_topic_count", "dc1", 3},
		{"kmirror_mirror_topic_count", "dc2", 1},
		{"kmirror_dead_thread_count", "dc1", 2},
		{"kmirror_dead_thread_count", "dc2", 0},
		{"kmirror_failed_partitions_count", "dc1", 35},
		{"kmirror_max_lag", "dc1", 249},
	} {
		if v := value(t, p, c.name, map[string]string{"mirror": c.mirror}); v != c.want {
			t.Errorf("%s{mirror=%q} = %v, want %v", c.name, c.mirror, v, c.want)
		}
	}
}

// With metrics.partition.series.enable off, no series carries a topic or
// partition, and turning it on again (a reload) brings them back.
func TestPartitionSeriesSwitch(t *testing.T) {
	t.Parallel()
	var series atomic.Bool
	p, e := newTestEngine(t, &series, fakeMirror("dc1", 10))
	e.DestinationMismatch("dc1", "topic-0000", 3, "map")
	body := scrape(t, p)
	if strings.Contains(body, `topic="`) || strings.Contains(body, `partition="`) {
		t.Errorf("a series with a topic or partition label while metrics.partition.series.enable is off:\n%s", grepLines(body, "topic="))
	}
	if v := value(t, p, "kmirror_destination_mismatches_total", map[string]string{"mirror": "dc1", "action": "map"}); v != 1 {
		t.Errorf("kmirror_destination_mismatches_total = %v, want 1 (counted without its partition)", v)
	}
	series.Store(true)
	if v := value(t, p, "kmirror_consumer_lag", map[string]string{"mirror": "dc1", "topic": "topic-0000", "partition": "7"}); v != 7 {
		t.Errorf("kmirror_consumer_lag{partition=7} = %v once switched on, want 7", v)
	}
}

// At 10,000 partitions a whole scrape stays under 1 MB with the
// per-partition series off: every other series is per mirror, state,
// cluster, broker or API. The daemon's other instruments are fed as a
// busy daemon would (a data path on 6 brokers, both clusters' clients
// with a dozen APIs, admin requests), so the bound is the page's, not the
// engine's alone.
func TestScrapeOf10000PartitionsStaysUnder1MB(t *testing.T) {
	t.Parallel()
	const partitions = 10_000
	var series atomic.Bool
	p, e := newTestEngine(t, &series, fakeMirror("dc1", partitions))
	d, err := p.NewDataPath("dc1")
	if err != nil {
		t.Fatal(err)
	}
	stop := d.Observe(func() DataPathStats {
		return DataPathStats{FetchesInFlight: 6, BufferedBytes: 1 << 20, PartitionMaxBytes: 1 << 16}
	})
	defer stop()
	for b := range int32(6) {
		d.FetchDone(b, time.Millisecond, 1000, false, false)
		d.FetchDone(b, time.Millisecond, 0, true, false)
		d.ProduceSent(b)
		d.ProduceDone(b, time.Millisecond, 100, 1000, false)
	}
	for _, cluster := range []string{"source", "destination"} {
		c, err := p.Client(cluster, "dc1")
		if err != nil {
			t.Fatal(err)
		}
		for key := range int16(12) {
			c.api(key).ok.Add(1)
		}
	}
	observe, err := p.AdminRequests()
	if err != nil {
		t.Fatal(err)
	}
	observe("GET /v1/mirrors", 200, time.Millisecond)
	observe("POST /v1/mirrors/{mirror}/pause", 404, time.Millisecond)
	e.AppendCountsOf("dc1").Landed(time.Now().UnixMilli(), true)
	e.Transition("dc1", "PREPARING", "MIRRORING")

	off := len(scrape(t, p))
	series.Store(true)
	body := scrape(t, p)
	on := len(body)
	// Every partition has its own series: none folded into the SDK's
	// overflow series (its default limit is 2,000 per instrument).
	if n := strings.Count(body, "\nkmirror_consumer_lag{"); n != partitions {
		t.Errorf("kmirror_consumer_lag: %d series at %d partitions, want one each", n, partitions)
	}
	if strings.Contains(body, "overflow") {
		t.Errorf("a series overflowed:\n%s", grepLines(body, "overflow"))
	}
	t.Logf("scrape at %d partitions: %d bytes with per-partition series off, %d bytes on", partitions, off, on)
	if off >= 1<<20 {
		t.Errorf("scrape at %d partitions with per-partition series off: %d bytes, want under 1 MB", partitions, off)
	}
	if on <= off+partitions*40 {
		t.Errorf("scrape with per-partition series on: %d bytes, only %d more than off; the switch does not drop kmirror_consumer_lag", on, on-off)
	}
}

// scrape returns the text /metrics serves.
func scrape(t *testing.T, p *Provider) string {
	t.Helper()
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// grepLines returns the lines of s holding sub, at most 5.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) && len(out) < 5 {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
