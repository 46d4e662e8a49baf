package soak

import (
	"fmt"
	"slices"
	"time"
)

// Tolerance is how far a figure may rise between the first and the last
// third of a window before the soak calls it growth without bound: the rise
// must exceed both Rel (a fraction of the first third's median) and Abs (in
// the figure's unit) to count. Both are needed: a small figure doubles on
// noise (goroutines 40 → 80 while a cut ends), a large one moves by many
// units on noise (RSS ±20 MiB as the heap's goal moves with the traffic).
type Tolerance struct {
	Rel float64
	Abs float64
}

// Figure is one resource figure the soak judges.
type Figure struct {
	Name string
	Unit string
	Get  func(Sample) float64
	Tol  Tolerance
}

// Figures are the resource figures judged, with their tolerances
// (docs/reliability.md, "How growth is judged").
var Figures = []Figure{
	{Name: "rss", Unit: "MiB", Get: func(s Sample) float64 { return float64(s.RSS) / (1 << 20) }, Tol: Tolerance{Rel: 0.25, Abs: 32}},
	{Name: "goroutines", Unit: "goroutines", Get: func(s Sample) float64 { return float64(s.Goroutines) }, Tol: Tolerance{Rel: 0.25, Abs: 50}},
	{Name: "open_fds", Unit: "fds", Get: func(s Sample) float64 { return float64(s.FDs) }, Tol: Tolerance{Rel: 0.25, Abs: 20}},
}

// Criteria say which samples are judged.
type Criteria struct {
	// InstanceWarmup: samples of a daemon process younger than this are
	// not judged (start-up, and the catch-up after a restart, allocate
	// what a steady daemon would not).
	InstanceWarmup time.Duration
	// RunSamples and InstanceSamples are the fewest judged samples a
	// window needs to be judged: the whole run (every instance's judged
	// samples in time order) and one daemon process.
	RunSamples, InstanceSamples int
	// QuietFrom is when the last fault ended; LagBound is what the median
	// of the last half of the samples after QuietFrom must not exceed, for
	// the lag kmirror reports and for the end-offset gap (both came back
	// down).
	QuietFrom time.Duration
	LagBound  int64
}

// Verdict is the judgement of one figure over one window.
type Verdict struct {
	Figure string
	// Scope is "run" or "instance N".
	Scope string
	// Samples judged; First and Last are the medians of the first and the
	// last third of them (for lag: the bound and the median).
	Samples     int
	First, Last float64
	Unit        string
	Failed      bool
	Why         string
}

func (v Verdict) String() string {
	verdict := "ok"
	if v.Failed {
		verdict = "FAILED"
	}
	return fmt.Sprintf("%s %s (%d samples): %s: %s", v.Figure, v.Scope, v.Samples, verdict, v.Why)
}

// Judge judges the samples: every figure over the whole run and over each
// daemon process with enough samples, and the lag after the last fault.
func Judge(samples []Sample, c Criteria) []Verdict {
	var judged []Sample
	for _, s := range samples {
		if s.Complete() && s.Since >= c.InstanceWarmup {
			judged = append(judged, s)
		}
	}
	var out []Verdict
	for _, f := range Figures {
		if v, ok := growth(f, "run", judged, c.RunSamples); ok {
			out = append(out, v)
		}
		byInstance := map[int][]Sample{}
		var order []int
		for _, s := range judged {
			if _, seen := byInstance[s.Instance]; !seen {
				order = append(order, s.Instance)
			}
			byInstance[s.Instance] = append(byInstance[s.Instance], s)
		}
		for _, i := range order {
			if v, ok := growth(f, fmt.Sprintf("instance %d", i), byInstance[i], c.InstanceSamples); ok {
				out = append(out, v)
			}
		}
	}
	out = append(out, recovered("lag", func(s Sample) int64 { return s.Lag }, samples, c))
	return append(out, recovered("gap", func(s Sample) int64 { return s.Gap }, samples, c))
}

// growth compares the medians of the first and last thirds of window; ok
// is false when the window has fewer than min samples.
func growth(f Figure, scope string, window []Sample, min int) (Verdict, bool) {
	if len(window) < max(min, 3) {
		return Verdict{}, false
	}
	third := len(window) / 3
	first, last := median(f, window[:third]), median(f, window[len(window)-third:])
	v := Verdict{Figure: f.Name, Scope: scope, Samples: len(window), First: first, Last: last, Unit: f.Unit}
	rise := last - first
	v.Failed = rise > f.Tol.Abs && rise > f.Tol.Rel*first
	v.Why = fmt.Sprintf("median %.1f → %.1f %s (%+.1f; tolerance +%.0f%% and +%.0f)", first, last, f.Unit, rise, f.Tol.Rel*100, f.Tol.Abs)
	return v, true
}

// recovered checks that a lag figure (get; negative: unknown) came back
// down after the last fault: the median of the last half of the samples
// taken after QuietFrom is at most LagBound, or, when the quiet tail was
// too short for that (a loaded machine replays a cut's backlog slowly), it
// is below the median of the first half: still falling, not growing. The
// run's end checks the rest: every partition caught up and identical.
func recovered(name string, get func(Sample) int64, samples []Sample, c Criteria) Verdict {
	var lags []float64
	for _, s := range samples {
		if s.At >= c.QuietFrom && get(s) >= 0 {
			lags = append(lags, float64(get(s)))
		}
	}
	v := Verdict{Figure: name, Scope: "after the last fault", Samples: len(lags), First: float64(c.LagBound), Unit: "offsets"}
	if len(lags) < 2 {
		v.Failed = true
		v.Why = fmt.Sprintf("%d %s samples after the last fault; need at least 2", len(lags), name)
		return v
	}
	head, tail := lags[:len(lags)/2], lags[len(lags)/2:]
	v.Last = medianOf(tail)
	before := medianOf(head)
	falling := v.Last < before
	v.Failed = v.Last > float64(c.LagBound) && !falling
	v.Why = fmt.Sprintf("median total %s of the last %d samples %.0f offsets (bound %d)", name, len(tail), v.Last, c.LagBound)
	if v.Last > float64(c.LagBound) {
		v.Why += fmt.Sprintf("; the %d before: %.0f (%s)", len(head), before, map[bool]string{true: "falling: recovering", false: "not falling"}[falling])
	}
	return v
}

func median(f Figure, ss []Sample) float64 {
	vs := make([]float64, len(ss))
	for i, s := range ss {
		vs[i] = f.Get(s)
	}
	return medianOf(vs)
}

func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// Percentile returns the p-th percentile (0..100, nearest rank) of vs.
func Percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	i := int(p/100*float64(len(vs))+0.5) - 1
	return vs[min(max(i, 0), len(vs)-1)]
}
