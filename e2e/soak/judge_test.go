package soak

import (
	"strings"
	"testing"
	"time"
)

// steady builds samples every 5 s for n samples of one daemon process
// started at start, with RSS rss(i) MiB, 60 goroutines, 30 fds, lag 10
// and end-offset gap 12.
func steady(inst int, start time.Duration, n int, rss func(i int) float64) []Sample {
	var out []Sample
	for i := range n {
		since := time.Duration(i) * 5 * time.Second
		out = append(out, Sample{At: start + since, Instance: inst, Since: since, PID: 100 + inst,
			RSS: int64(rss(i) * (1 << 20)), Goroutines: 60, FDs: 30, Lag: 10, Gap: 12})
	}
	return out
}

func failed(vs []Verdict) []string {
	var out []string
	for _, v := range vs {
		if v.Failed {
			out = append(out, v.String())
		}
	}
	return out
}

var criteria = Criteria{InstanceWarmup: 20 * time.Second, RunSamples: 12, InstanceSamples: 30, QuietFrom: 0, LagBound: 500}

// Flat figures across several restarts pass, even when each process starts
// high (catch-up) and each restart resets the figures.
func TestFlatFiguresAcrossRestartsPass(t *testing.T) {
	t.Parallel()
	var ss []Sample
	for inst := 1; inst <= 4; inst++ {
		ss = append(ss, steady(inst, time.Duration(inst-1)*5*time.Minute, 60, func(i int) float64 {
			if i < 4 { // the warm-up after a start: ignored
				return 400
			}
			return 80 + float64(i%5) // noise
		})...)
	}
	vs := Judge(ss, criteria)
	if f := failed(vs); len(f) > 0 {
		t.Fatalf("flat figures judged as growing: %v", f)
	}
	var scopes []string
	for _, v := range vs {
		if v.Figure == "rss" {
			scopes = append(scopes, v.Scope)
		}
	}
	if got := strings.Join(scopes, ","); got != "run,instance 1,instance 2,instance 3,instance 4" {
		t.Errorf("rss judged over %s; want the run and each instance", got)
	}
}

// RSS rising steadily inside one long process fails for that process and
// for the run, beyond both tolerances.
func TestRSSGrowingInsideAProcessFails(t *testing.T) {
	t.Parallel()
	ss := steady(1, 0, 120, func(i int) float64 { return 60 + float64(i) }) // +1 MiB per sample
	f := failed(Judge(ss, criteria))
	if len(f) != 2 || !strings.Contains(f[0], "rss run") || !strings.Contains(f[1], "rss instance 1") {
		t.Fatalf("failed verdicts %q; want rss over the run and instance 1", f)
	}
}

// A leak that survives restarts (each process starts higher than the last)
// fails over the run, though no single process grows.
func TestGrowthAcrossRestartsFailsOverTheRun(t *testing.T) {
	t.Parallel()
	var ss []Sample
	for inst := 1; inst <= 6; inst++ {
		level := 60 + float64(inst)*30
		ss = append(ss, steady(inst, time.Duration(inst-1)*3*time.Minute, 36, func(int) float64 { return level })...)
	}
	f := failed(Judge(ss, criteria))
	if len(f) != 1 || !strings.Contains(f[0], "rss run") {
		t.Fatalf("failed verdicts %q; want rss over the run only", f)
	}
}

// A rise within both tolerances passes: the relative one (big figures) and
// the absolute one (small figures) must both be exceeded.
func TestSmallRisesWithinToleranceAbsOrRelPass(t *testing.T) {
	t.Parallel()
	// 200 → 240 MiB: +20%, +40 MiB: within the relative tolerance.
	ss := steady(1, 0, 60, func(i int) float64 { return 200 + float64(i)*40/60 })
	// Goroutines 10 → 20: +100%, but +10 only.
	for i := range ss {
		ss[i].Goroutines = 10 + i*10/60
	}
	if f := failed(Judge(ss, criteria)); len(f) > 0 {
		t.Fatalf("rises within tolerance judged as growth: %v", f)
	}
}

// The lag kmirror reports and the end-offset gap must both come back below
// the bound after the last fault; samples during the fault do not count,
// only the last half of those after it.
func TestLagMustComeBackDownAfterTheLastFault(t *testing.T) {
	t.Parallel()
	ss := steady(1, 0, 40, func(int) float64 { return 80 })
	for i := range ss {
		if i >= 10 && i < 24 {
			ss[i].Lag = 50_000 // during and just after the fault
		}
	}
	c := criteria
	c.QuietFrom = ss[20].At
	if f := failed(Judge(ss, c)); len(f) > 0 {
		t.Fatalf("recovered lag judged as not recovered: %v", f)
	}
	for i := 30; i < len(ss); i++ {
		ss[i].Lag = 2_000
	}
	f := failed(Judge(ss, c))
	if len(f) != 1 || !strings.HasPrefix(f[0], "lag ") {
		t.Fatalf("failed verdicts %q; want lag", f)
	}
	// kmirror's lag back down, but the destination still behind (a lag
	// metric that does not see it).
	for i := 30; i < len(ss); i++ {
		ss[i].Lag, ss[i].Gap = 0, 3_000
	}
	f = failed(Judge(ss, c))
	if len(f) != 1 || !strings.HasPrefix(f[0], "gap ") {
		t.Fatalf("failed verdicts %q; want gap", f)
	}
	// Still above the bound at the end of a short quiet tail, but falling
	// all along: recovering, not growing.
	for i := 20; i < len(ss); i++ {
		ss[i].Lag, ss[i].Gap = int64(40_000-1_500*(i-20)), 0
	}
	if f := failed(Judge(ss, c)); len(f) > 0 {
		t.Fatalf("a lag falling through the quiet tail judged as not recovered: %v", f)
	}
}

// SumMetric adds every series of one metric and no other metric.
func TestSumMetricAddsEverySeriesOfOneMetric(t *testing.T) {
	t.Parallel()
	body := []byte(`# HELP kmirror_consumer_lag lag
# TYPE kmirror_consumer_lag gauge
kmirror_consumer_lag{mirror="soak",partition="0",topic="a"} 3
kmirror_consumer_lag{mirror="soak",partition="1",topic="a"} 4.5
kmirror_consumer_lag_other{mirror="soak"} 100
kmirror_max_lag{mirror="soak"} 4
`)
	if got := SumMetric(body, "kmirror_consumer_lag"); got != 7 {
		t.Errorf("SumMetric = %d, want 7", got)
	}
}
