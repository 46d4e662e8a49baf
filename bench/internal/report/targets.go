package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/kmirror/kmirror/bench/internal/scenario"
	"github.com/kmirror/kmirror/bench/internal/stats"
)

// Target is one acceptance target of issue #11, judged on a report's
// figures.
type Target struct {
	What    string
	Verdict string // "met", "not met", "not measured"
	Why     string // the figures behind the verdict
}

// judgeTargets checks the targets against the scenarios that ran.
// A target whose scenarios did not run, or whose contenders failed, is "not
// measured", never "met".
func judgeTargets(scs []ScenarioResult) []Target {
	var out []Target

	// ≥ 95% of the raw limit (steady) in every scenario.
	{
		t := Target{What: "kmirror ≥ 95% of the raw limit's steady throughput in every scenario"}
		var below, ok []string
		for _, s := range scs {
			k, kok := s.result(Kmirror)
			x, xok := s.result(Raw)
			if !kok || !xok || !k.OK() || !x.OK() {
				continue
			}
			r, defined := stats.Ratio(k.SteadyMBps(), x.SteadyMBps())
			if !defined {
				continue
			}
			label := fmt.Sprintf("%s %.0f%%", s.Scenario.Name, 100*r)
			if r < 0.95 {
				below = append(below, label)
			} else {
				ok = append(ok, label)
			}
		}
		judge(&t, len(ok)+len(below) > 0, len(below) == 0, below, ok)
		out = append(out, t)
	}
	// ≥ 3× MirrorMaker 2's steady throughput and ≤ 1/10 of its CPU per GB.
	{
		t := Target{What: "kmirror ≥ 3× MirrorMaker 2's steady throughput and ≤ 1/10 of its CPU per GB, in every scenario"}
		var below, ok []string
		for _, s := range scs {
			k, kok := s.result(Kmirror)
			m, mok := s.result(MM2)
			if !kok || !mok || !k.OK() || !m.OK() {
				continue
			}
			speed, d1 := stats.Ratio(k.SteadyMBps(), m.SteadyMBps())
			cpu, d2 := stats.Ratio(k.CPUPerGB(), m.CPUPerGB())
			if !d1 || !d2 {
				continue
			}
			label := fmt.Sprintf("%s %.2f× the steady throughput, %.2f× the CPU/GB", s.Scenario.Name, speed, cpu)
			if speed < 3 || cpu > 0.1 {
				below = append(below, label)
			} else {
				ok = append(ok, label)
			}
		}
		judge(&t, len(ok)+len(below) > 0, len(below) == 0, below, ok)
		out = append(out, t)
	}
	// Peak RSS ≤ 256 MiB catching up on 500 and on 10,000 partitions.
	{
		t := Target{What: "kmirror's peak RSS ≤ 256 MiB while catching up on 500 partitions (p500) and on 10,000 partitions (p10000-idle)"}
		var figures []string
		measured, met := 0, true
		for _, name := range []string{"p500", "p10000-idle"} {
			s, found := scenarioNamed(scs, name)
			k, kok := s.result(Kmirror)
			switch {
			case !found || !kok || k.Err != "":
				figures = append(figures, name+" not measured")
			case name == "p10000-idle" && s.Scenario.Partitions != 10_000:
				figures = append(figures, fmt.Sprintf("%s not measured (this variant has %d partitions: %s)", name, s.Scenario.Partitions, fmtMiB(k.PeakRSS)))
			default:
				measured++
				met = met && k.PeakRSS <= 256*scenario.MiB
				figures = append(figures, fmt.Sprintf("%s %s", name, fmtMiB(k.PeakRSS)))
			}
		}
		switch {
		case measured == 2:
			judge(&t, true, met, figures, figures)
		case measured == 1 && !met:
			t.Verdict, t.Why = "not met", strings.Join(figures, "; ")
		default:
			t.Verdict, t.Why = "not measured", strings.Join(figures, "; ")
		}
		out = append(out, t)
	}
	// Catch-up of 2,000 small partitions faster than MirrorMaker 2 (total
	// time: that is what an operator waits for).
	{
		t := Target{What: "kmirror catches up 2,000 small partitions (p2000-little) faster than MirrorMaker 2 (total time from start)"}
		s, found := scenarioNamed(scs, "p2000-little")
		k, kok := s.result(Kmirror)
		m, mok := s.result(MM2)
		if found && kok && mok && k.OK() && m.OK() {
			label := fmt.Sprintf("kmirror %s, MirrorMaker 2 %s", fmtDur(k.Total), fmtDur(m.Total))
			judge(&t, true, k.Total < m.Total, []string{label}, []string{label})
		} else {
			t.Verdict, t.Why = "not measured", "p2000-little did not run for both, or one failed"
		}
		out = append(out, t)
	}
	// At 50 ms RTT, ≥ 80% of the loopback throughput (steady, same data
	// shape: the loopback scenario with the same source batches).
	{
		t := Target{What: "kmirror at 50 ms RTT (wan-dst-16k, wan-src-16k, wan-dst-256k) ≥ 80% of its loopback steady throughput with 4 partitions (1k-none-16k, 1k-none-256k)"}
		var bad, good []string
		for _, name := range []string{"wan-dst-16k", "wan-src-16k", "wan-dst-256k"} {
			base, bok := scenarioNamed(scs, "1k-none-"+name[strings.LastIndex(name, "-")+1:])
			kb, kbok := base.result(Kmirror)
			s, found := scenarioNamed(scs, name)
			k, kok := s.result(Kmirror)
			if !bok || !kbok || !kb.OK() || !found || !kok || !k.OK() {
				continue
			}
			r, defined := stats.Ratio(k.SteadyMBps(), kb.SteadyMBps())
			if !defined {
				continue
			}
			label := fmt.Sprintf("%s %.0f%% of loopback", name, 100*r)
			if r < 0.8 {
				bad = append(bad, label)
			} else {
				good = append(good, label)
			}
		}
		judge(&t, len(bad)+len(good) > 0, len(bad) == 0, bad, good)
		if t.Verdict == "not met" {
			t.Why += fmt.Sprintf("; the bound: brokers recognise a retried duplicate among an idempotent producer's last 5 batches only, so a mirror that keeps offsets "+
				"(and cannot duplicate on a retry) keeps at most 5 batches per partition in flight: 4 partitions × 5 × 16 KiB per 50 ms round trip is %.1f MB/s", 4*5*16*1024/0.05/1e6)
		}
		out = append(out, t)
	}
	{
		t := Target{What: "kmirror fails 10,000 partitions over in under 30 s (failover-10000)"}
		s, found := scenarioNamed(scs, "failover-10000")
		k, kok := s.result(Kmirror)
		switch {
		case !found || !kok || !k.OK() || k.Failover == 0:
			t.Verdict, t.Why = "not measured", "failover-10000 did not run, or kmirror failed"
		case s.Scenario.Partitions != 10_000:
			t.Verdict, t.Why = "not measured", fmt.Sprintf("this run's variant has %d partitions (failover in %s)", s.Scenario.Partitions, fmtDur(k.Failover))
		default:
			label := "failover in " + fmtDur(k.Failover)
			judge(&t, true, k.Failover < 30*time.Second, []string{label}, []string{label})
		}
		out = append(out, t)
	}
	return out
}

// judge sets t's verdict: not measured without figures, else met or not
// met, with the figures that decide it.
func judge(t *Target, measured, met bool, bad, good []string) {
	switch {
	case !measured:
		t.Verdict, t.Why = "not measured", "no scenario had both contenders complete"
	case met:
		t.Verdict, t.Why = "met", strings.Join(good, "; ")
	default:
		t.Verdict, t.Why = "not met", strings.Join(bad, "; ")
	}
}

func scenarioNamed(scs []ScenarioResult, name string) (ScenarioResult, bool) {
	for _, s := range scs {
		if s.Scenario.Name == name && s.Err == "" {
			return s, true
		}
	}
	return ScenarioResult{}, false
}
