package mirror

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// dataPathFamilies are the data-path metric families on /metrics: every
// family named kmirror_fetch_*, kmirror_produce_* or kmirror_appends_*, and
// whether a mirror run that moved data makes it non-zero (gauges of what is
// in flight or buffered may be 0 once the run is idle).
var dataPathFamilies = map[string]bool{
	"kmirror_produce_request_latency_seconds": true,
	"kmirror_produce_request_partitions":      true,
	"kmirror_produce_requests_total":          true,
	"kmirror_produce_requests_in_flight":      false,
	"kmirror_produce_bytes_total":             true,
	"kmirror_fetch_request_latency_seconds":   true,
	"kmirror_fetch_requests_total":            true,
	"kmirror_fetch_bytes_total":               true,
	"kmirror_fetch_requests_in_flight":        false,
	"kmirror_fetch_buffered_bytes":            false,
	"kmirror_fetch_partition_max_bytes":       true,
	"kmirror_fetch_buffer_max_bytes":          true,
	"kmirror_fetch_buffer_reserved_bytes":     false,
	"kmirror_appends_in_flight":               false,
}

// After a mirror run, /metrics shows each data-path family once (one HELP
// and one TYPE line, no series twice, the per-mirror gauges once per
// mirror), the families of requests made count them, and
// docs/metrics.md has one row for each (and names every kmirror family on
// the page).
func TestMetricsShowEachDataPathSeriesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "scrape", 3)
	f.produce(t, "scrape", 200, "tx-scrape")
	e := startEngine(t, f.config(t, "scrape"), memstore.New())
	f.waitMirrored(t, e, "scrape", 3)
	f.verify(t, "scrape", 3)

	rec := httptest.NewRecorder()
	e.opts.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	help, typ, series := map[string]int{}, map[string]int{}, map[string]int{}
	type sample struct {
		labels string
		value  float64
	}
	samples := map[string][]sample{} // by family
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "# HELP "):
			help[strings.Fields(line)[2]]++
		case strings.HasPrefix(line, "# TYPE "):
			typ[strings.Fields(line)[2]]++
		case strings.HasPrefix(line, "#"):
		default:
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if i < 0 || err != nil {
				t.Fatalf("unparsable sample line %q", line)
			}
			series[line[:i]]++
			name, labels, _ := strings.Cut(line[:i], "{")
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if fam, ok := strings.CutSuffix(name, suffix); ok && typ[fam] > 0 {
					name = fam + "/" + suffix[1:]
				}
			}
			samples[name] = append(samples[name], sample{labels, v})
		}
	}
	for name, n := range typ {
		if n != 1 || help[name] != 1 {
			t.Errorf("%s: %d TYPE and %d HELP lines, want 1 each", name, n, help[name])
		}
	}
	for s, n := range series {
		if n != 1 {
			t.Errorf("series %s appears %d times", s, n)
		}
	}
	for name := range typ {
		if _, ok := dataPathFamilies[name]; !ok && (strings.HasPrefix(name, "kmirror_fetch_") || strings.HasPrefix(name, "kmirror_produce_") || strings.HasPrefix(name, "kmirror_appends_")) {
			t.Errorf("%s is on /metrics but not among the data-path families this test knows", name)
		}
	}
	docs, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range typ {
		if strings.HasPrefix(name, "kmirror_") && !strings.Contains(string(docs), "`"+name) {
			t.Errorf("%s is on /metrics but docs/metrics.md does not name it", name)
		}
	}
	for name, flowed := range dataPathFamilies {
		if typ[name] != 1 {
			t.Errorf("%s: not on /metrics", name)
			continue
		}
		key := name
		if typ[name] == 1 && len(samples[name]) == 0 {
			key = name + "/count" // a histogram
		}
		ss := samples[key]
		var sum float64
		for _, s := range ss {
			sum += s.value
		}
		switch {
		case len(ss) == 0:
			t.Errorf("%s: no sample", name)
		case flowed && sum == 0:
			t.Errorf("%s: %v, want non-zero after mirroring", name, ss)
		}
		perMirror := strings.HasSuffix(name, "_in_flight") && !strings.HasPrefix(name, "kmirror_produce_") ||
			name == "kmirror_fetch_buffered_bytes" || name == "kmirror_fetch_partition_max_bytes"
		if perMirror && (len(ss) != 1 || ss[0].labels != `mirror="test"}`) {
			t.Errorf("%s: %v, want one sample {mirror=\"test\"}", name, ss)
		}
		if perBroker := strings.HasPrefix(name, "kmirror_produce_") || name == "kmirror_fetch_request_latency_seconds" ||
			name == "kmirror_fetch_requests_total" || name == "kmirror_fetch_bytes_total"; perBroker {
			for _, s := range ss {
				if !strings.Contains(s.labels, `broker="`) || !strings.Contains(s.labels, `mirror="test"`) {
					t.Errorf("%s{%s: want mirror and broker labels", name, s.labels)
				}
			}
		}
		if n := strings.Count(string(docs), "\n| `"+name+"{") + strings.Count(string(docs), "\n| `"+name+"` "); n != 1 {
			t.Errorf("docs/metrics.md has %d rows for %s, want 1", n, name)
		}
	}
}
