package livestatus

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/admin"
)

func part(topic string, p int32, state string, logStart, hw, lastMirrored int64) admin.PartitionStatus {
	lag := int64(-1)
	if hw >= 0 {
		lag = hw - (lastMirrored + 1)
	}
	return admin.PartitionStatus{Topic: topic, Partition: p, State: state, Mode: "preserve", SourceLogStart: logStart, SourceHighWatermark: hw, LastMirroredOffset: lastMirrored, Lag: lag}
}

// TestRatesProgressAndEstimates: two samples 5 s apart give the mirror's
// bytes/s and records/s from its counters, each partition's rate, its
// progress over the source log and the time its lag takes at that rate.
func TestRatesProgressAndEstimates(t *testing.T) {
	t.Parallel()
	tr := New(10)
	t0 := time.Unix(1_700_000_000, 0)
	counters := map[string]Counters{"m": {Bytes: 1000, Offsets: 10}}
	get := func(m string) Counters { return counters[m] }
	st := func(a, b int64) admin.Status {
		return admin.Status{Mirrors: []admin.MirrorStatus{{Name: "m", Partitions: []admin.PartitionStatus{
			part("t", 0, "MIRRORING", 0, 1000, a),
			part("t", 1, "MIRRORING", 100, 200, b),
		}}}}
	}
	tr.Sample(t0, st(99, 199), get)
	counters["m"] = Counters{Bytes: 51_000, Offsets: 510}
	tr.Sample(t0.Add(5*time.Second), st(599, 199), get)

	live := tr.Live(t0.Add(6*time.Second), st(599, 199), 5*time.Second)
	if len(live.Mirrors) != 1 {
		t.Fatalf("mirrors: %+v", live.Mirrors)
	}
	m := live.Mirrors[0]
	if m.BytesPerSecond != 10_000 || m.RecordsPerSecond != 100 {
		t.Errorf("rates: %v B/s, %v records/s; want 10000 and 100", m.BytesPerSecond, m.RecordsPerSecond)
	}
	if m.Partitions != 2 || m.States["MIRRORING"] != 2 || m.LagTotal != 400 || m.LagMax != 400 {
		t.Errorf("figures: %+v", m)
	}
	if len(m.History) != 2 || m.History[0].Lag != 900 || m.History[1].Lag != 400 || m.History[1].RecordsPerSecond != 100 {
		t.Errorf("history: %+v", m.History)
	}
	if len(m.CatchingUp) != 1 {
		t.Fatalf("catching up: %+v", m.CatchingUp)
	}
	c := m.CatchingUp[0]
	// Partition 0 moved 500 offsets in 5 s: 100/s, smoothed from 0 by
	// half → 50/s; 400 left → 8 s. Its log spans 0–1000, 600 mirrored.
	if c.Partition != 0 || c.RecordsPerSecond != 50 || c.ETASeconds != 8 || math.Abs(c.Progress-0.6) > 1e-9 {
		t.Errorf("partition 0: %+v", c)
	}
	for _, p := range m.List {
		if p.Partition == 1 && (p.ETASeconds != 0 || p.Progress != 1 || p.Lag != 0) {
			t.Errorf("caught-up partition 1: %+v", p)
		}
	}
}

// TestFailedFirstAndCaps: FAILED partitions come first with their
// reasons, then by lag; the lists are capped while the counts cover every
// partition; a partition that does not move has no estimate.
func TestFailedFirstAndCaps(t *testing.T) {
	t.Parallel()
	tr := New(10)
	var ps []admin.PartitionStatus
	for i := range MaxPartitions + 50 {
		ps = append(ps, part("big", int32(i), "MIRRORING", 0, 1000, int64(i%500)))
	}
	failed := part("big", 7, "FAILED", 0, 1000, 10)
	failed.LastError = "mirror m: topic big partition 7: batch appended at another offset"
	failed.Retry = "NonRetryable"
	ps[7] = failed
	// A MIRRORING partition whose appends are retrying shows why.
	ps[0].LastError = "destination appends retrying since 2026-12-01T10:00:00Z: NOT_ENOUGH_REPLICAS"
	st := admin.Status{Mirrors: []admin.MirrorStatus{{Name: "m", Partitions: ps}}}
	none := func(string) Counters { return Counters{} }
	now := time.Unix(1_700_000_000, 0)
	tr.Sample(now, st, none)
	tr.Sample(now.Add(time.Second), st, none)
	m := tr.Live(now.Add(time.Second), st, time.Second).Mirrors[0]
	if m.Partitions != MaxPartitions+50 || len(m.List) != MaxPartitions || len(m.CatchingUp) != MaxCatchingUp {
		t.Errorf("counts: %d partitions, %d listed, %d catching up", m.Partitions, len(m.List), len(m.CatchingUp))
	}
	if m.List[0].State != "FAILED" || m.List[0].Reason != failed.LastError || m.List[0].Retry != "NonRetryable" {
		t.Errorf("first listed: %+v", m.List[0])
	}
	if r := m.List[1]; r.Partition != 0 || r.State != "MIRRORING" || r.Reason != ps[0].LastError {
		t.Errorf("the retrying partition (largest lag, listed after the FAILED one): %+v", r)
	}
	if len(m.Failed) != 1 || m.Failed[0].Partition != 7 || m.States["FAILED"] != 1 {
		t.Errorf("failed: %+v, states %v", m.Failed, m.States)
	}
	for i := 2; i < len(m.List); i++ {
		if m.List[i].Lag > m.List[i-1].Lag {
			t.Fatalf("list not by lag at %d: %d after %d", i, m.List[i].Lag, m.List[i-1].Lag)
		}
	}
	if c := m.CatchingUp[0]; c.ETASeconds != -1 || c.RecordsPerSecond != 0 {
		t.Errorf("a partition that does not move: %+v", c)
	}
}

// TestForgetsWhatIsGoneAndKeepsTheWindow: a mirror or partition no longer
// in the status is dropped, and only the last keep samples stay.
func TestForgetsWhatIsGoneAndKeepsTheWindow(t *testing.T) {
	t.Parallel()
	tr := New(3)
	now := time.Unix(1_700_000_000, 0)
	none := func(string) Counters { return Counters{} }
	two := admin.Status{Mirrors: []admin.MirrorStatus{{Name: "a", Partitions: []admin.PartitionStatus{part("t", 0, "MIRRORING", 0, 5, 4)}}, {Name: "b"}}}
	for i := range 5 {
		tr.Sample(now.Add(time.Duration(i)*time.Second), two, none)
	}
	if n := len(tr.Live(now, two, time.Second).Mirrors[0].History); n != 3 {
		t.Errorf("history of %d samples; want the last 3", n)
	}
	one := admin.Status{Mirrors: []admin.MirrorStatus{{Name: "b"}}}
	tr.Sample(now.Add(10*time.Second), one, none)
	if len(tr.mirrors) != 1 || len(tr.parts) != 0 {
		t.Errorf("kept %d mirrors and %d partitions; want b alone", len(tr.mirrors), len(tr.parts))
	}
}

// TestThePageIsOneSelfContainedFile: the page loads nothing from
// elsewhere, reads only /v1/live, writes text (not HTML) into the page,
// and says so to the browser (CSP).
func TestThePageIsOneSelfContainedFile(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	ServePage(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	for _, bad := range []string{"http://", "https://", "<link", "src=\"", "innerHTML", "eval("} {
		if bad == "http://" && strings.Count(body, bad) == strings.Count(body, "http://www.w3.org/2000/svg") {
			continue // the SVG namespace name, not a fetch
		}
		if strings.Contains(body, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	if !strings.Contains(body, `fetch("/v1/live"`) {
		t.Error("the page does not read /v1/live")
	}
}
