package report

import (
	"fmt"
	"slices"
	"strings"
)

// Run is one of a contender's repeated runs of a scenario (-repeat).
type Run struct {
	// Round is the round it ran in (1-based) and Position its place in
	// that round's order (1: first), which rotates from round to round.
	Round, Position int
	SteadyMBps      float64
	PeakRSS         int64
	OK              bool
}

// Median is the run of rs (one contender's runs of one scenario) whose
// steady throughput is the median of the complete runs (of all runs when
// none completed; the lower of the two middle ones for an even count), with
// Runs listing every run in the order they ran. rs holds at least one run,
// each with its own Runs entry (Round, Position).
func Median(rs []Result) Result {
	if len(rs) == 1 {
		return rs[0]
	}
	var runs []Run
	var pool []Result
	for _, r := range rs {
		runs = append(runs, r.Runs...)
		if r.OK() {
			pool = append(pool, r)
		}
	}
	if len(pool) == 0 {
		pool = slices.Clone(rs)
	}
	slices.SortStableFunc(pool, func(a, b Result) int {
		switch x, y := a.SteadyMBps(), b.SteadyMBps(); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	m := pool[(len(pool)-1)/2]
	m.Runs = runs
	return m
}

// RunOf is the one-run Runs entry of r, run in round at position.
func RunOf(r Result, round, position int) []Run {
	return []Run{{Round: round, Position: position, SteadyMBps: r.SteadyMBps(), PeakRSS: r.PeakRSS, OK: r.OK()}}
}

// repeats is the Markdown paragraph listing a scenario's repeated runs,
// or "" when each contender ran once.
func repeats(s ScenarioResult) string {
	var b strings.Builder
	for _, r := range s.Results {
		if len(r.Runs) < 2 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("Repeated runs, the order of the contenders rotated each round; the table above shows each contender's median run by steady MB/s.\n\n| contender | steady MB/s of each run (its place in its round's order) | peak RSS of each run |\n|---|---|---|\n")
		}
		var mbps, rss []string
		for _, run := range r.Runs {
			v := fmt.Sprintf("%s (%s)", fmtFloat(run.SteadyMBps, 1), ordinal(run.Position))
			if !run.OK {
				v += " incomplete"
			}
			mbps = append(mbps, v)
			rss = append(rss, fmtMiB(run.PeakRSS))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Contender, strings.Join(mbps, ", "), strings.Join(rss, ", "))
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}
