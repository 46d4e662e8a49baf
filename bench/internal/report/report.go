// Package report holds what a bench run measured (Result, ScenarioResult,
// Report) and writes it: the Markdown report with its tables and the verdicts
// on the targets of issue #11, and the PNG charts drawn next to it.
package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kmirror/kmirror/bench/internal/proc"
	"github.com/kmirror/kmirror/bench/internal/scenario"
	"github.com/kmirror/kmirror/bench/internal/stats"
)

// Contender names, in report order. Ratios are taken to mm2 and to raw.
const (
	Kmirror = "kmirror"
	MM2     = "mm2"
	MM2Sync = "mm2-sync" // MirrorMaker 2 with offset sync and checkpoints on
	Raw     = "raw"
)

// Result is one contender's run of one scenario.
type Result struct {
	Contender string
	// Err is set when the run did not finish (start failure, timeout): the
	// figures below are then partial or zero. It is one line; Detail may
	// hold more (the tail of the contender's log).
	Err    string
	Detail string
	// Records and Bytes (record payload) the run had to copy: the backlog.
	Records int64
	Bytes   int64
	// Total runs from the process start to the last record on the
	// destination; Steady from the first record seen on the destination
	// (SteadyRecords records arrived after it) to the last.
	Total, Steady time.Duration
	SteadyRecords int64
	// CPU is the mirror's CPU time (its process and children) from start to
	// the end of the catch-up; PeakRSS the sum of their VmHWM.
	CPU     time.Duration
	PeakRSS int64
	// SourceCPU and DestinationCPU are the brokers' CPU time during the
	// catch-up.
	SourceCPU, DestinationCPU time.Duration
	// IdleCPU is the mirror's CPU time over the idle phase (IdleFor after
	// the catch-up) and IdleRSS its resident set at the end of it.
	IdleCPU time.Duration
	IdleRSS int64
	// Failover is how long `kmirror failover` of every partition took
	// after the catch-up, in failover scenarios.
	Failover time.Duration
	// Latency is set when the scenario has a latency phase.
	Latency *Latency
	// Lost and Duplicates compare the destination's record count with the
	// source's, partition by partition, at the end of the run.
	Lost, Duplicates int64
	// LostPartitions counts partitions with fewer records than the source.
	LostPartitions int
	// Runs lists every run of the contender in this scenario when it ran
	// several (-repeat); the figures above are those of the median run
	// (Median).
	Runs []Run
}

// Latency is the end-to-end latency phase's outcome.
type Latency struct {
	Rate             int // records/s asked for
	Sent, Received   int64
	P50, P99, P999   time.Duration
	Max              time.Duration
	Duration         time.Duration
	ProducerSettings string
}

// TotalMBps is the catch-up throughput from process start, in MB/s (10^6).
func (r Result) TotalMBps() float64 { return stats.Rate(float64(r.Bytes)/1e6, r.Total) }

// SteadyMBps is the catch-up throughput from the first record on.
func (r Result) SteadyMBps() float64 {
	if r.Records == 0 {
		return 0
	}
	return stats.Rate(float64(r.SteadyRecords)*float64(r.Bytes)/float64(r.Records)/1e6, r.Steady)
}

// TotalRecordsPerSec and SteadyRecordsPerSec are the same in records/s.
func (r Result) TotalRecordsPerSec() float64  { return stats.Rate(float64(r.Records), r.Total) }
func (r Result) SteadyRecordsPerSec() float64 { return stats.Rate(float64(r.SteadyRecords), r.Steady) }

// CPUPerGB is the mirror's CPU-seconds per GB (10^9 bytes) of payload; 0
// when the run did not catch up (its CPU did not copy the backlog).
func (r Result) CPUPerGB() float64 {
	if r.Bytes == 0 || r.Total == 0 {
		return 0
	}
	return r.CPU.Seconds() / (float64(r.Bytes) / 1e9)
}

// OK reports whether the run finished with every record on the destination
// and nothing duplicated.
func (r Result) OK() bool { return r.Err == "" && r.Lost == 0 && r.Duplicates == 0 }

// Verdict says in words whether the destination holds exactly the source's
// records.
func (r Result) Verdict() string {
	var parts []string
	if r.Err != "" {
		parts = append(parts, "FAILED: "+r.Err)
	}
	if r.Lost > 0 {
		parts = append(parts, fmt.Sprintf("LOST %d records on %d partitions", r.Lost, r.LostPartitions))
	}
	if r.Duplicates > 0 {
		parts = append(parts, fmt.Sprintf("%d extra records (duplicates)", r.Duplicates))
	}
	if len(parts) == 0 {
		return "complete"
	}
	return strings.Join(parts, "; ")
}

// ScenarioResult is a scenario and the results of its contenders.
type ScenarioResult struct {
	Scenario scenario.Scenario
	// Load is how long loading the backlog took; SourceBatches the number
	// of batches it made on the source (their mean size says what the
	// mirrors were given).
	Load          time.Duration
	SourceBatches int64
	SourceBytes   int64 // bytes of the source log (batches as stored)
	Results       []Result
	Err           string // the scenario could not run at all
}

// result returns the contender's result, if it ran.
func (s ScenarioResult) result(contender string) (Result, bool) {
	for _, r := range s.Results {
		if r.Contender == contender {
			return r, true
		}
	}
	return Result{}, false
}

// Report is everything the Markdown report is made of.
type Report struct {
	Title   string
	Started time.Time
	Elapsed time.Duration
	Command string
	Commit  string
	Quick   bool
	// WarmUps names the programs that copied each scenario's backlog
	// once before its measured contenders (none: no such warm-up).
	WarmUps     []string
	Machine     proc.Machine
	Conditions  string // free text about the run's conditions (noise, sharing)
	Kafka       string // broker version and settings
	Contenders  []string
	Settings    map[string]string // contender → how it was configured
	Scenarios   []ScenarioResult
	NotMeasured []string
	Charts      []Chart
}

// Chart is a PNG written next to the report.
type Chart struct{ File, Title string }

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

func fmtFloat(v float64, digits int) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.*f", digits, v)
}

// fmtRatio writes a/b as "2.41×", or "–" when undefined.
func fmtRatio(a, b float64) string {
	r, ok := stats.Ratio(a, b)
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

// fmtPercent writes a/b as "87%", or "–" when undefined.
func fmtPercent(a, b float64) string {
	r, ok := stats.Ratio(a, b)
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*r)
}

func fmtInt(n int64) string {
	s := fmt.Sprintf("%d", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtMiB(n int64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/scenario.MiB)
}

// WriteMarkdown renders the report.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# %s\n\n", r.Title)
	p("Written by the bench program (`bench/`) on %s in %s. Every figure below comes from this one run.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(time.Second))
	if r.Conditions != "" {
		p("> **Conditions:** %s\n\n", r.Conditions)
	}
	p("Command:\n\n```\n%s\n```\n\n", r.Command)
	p("| machine | |\n|---|---|\n")
	p("| CPUs (nproc) | %d |\n| CPU model | %s |\n| memory | %.1f GiB |\n| kernel | %s |\n| Go | %s |\n| Java | %s |\n| load average (1 min) at start / end | %s / %s |\n",
		r.Machine.CPUs, r.Machine.CPUModel, float64(r.Machine.MemBytes)/(1<<30), r.Machine.Kernel, r.Machine.GoVer, r.Machine.Java, r.Machine.LoadAvg[0], r.Machine.LoadAvg[1])
	if r.Commit != "" {
		p("| kmirror commit | %s |\n", r.Commit)
	}
	p("\n**Brokers:** %s\n\n", r.Kafka)
	warm := ""
	if len(r.WarmUps) > 0 {
		warm = fmt.Sprintf("; before them, %s each copied the scenario's backlog once, the figures discarded, so that the first measured contender does not run on brokers that have not yet warmed up to the scenario's shape of work", strings.Join(r.WarmUps, " and "))
	}
	p("**Contenders** (each in turn, same clusters, same backlog; the destination topic is deleted between runs, and each contender starts once both brokers have used less than 15%% of a core for 2 s, waiting at most 5 minutes%s):\n\n", warm)
	for _, c := range r.Contenders {
		p("- **%s**: %s\n", c, r.Settings[c])
	}
	p("\n%s\n", howToRead)

	p("## Summary\n\nSteady-state catch-up throughput (MB/s of record payload, from the first record on the destination) and its ratio to MirrorMaker 2 and to the raw limit.\n\n")
	p("| scenario |")
	for _, c := range r.Contenders {
		p(" %s MB/s |", c)
	}
	p(" kmirror ÷ mm2 | kmirror ÷ raw | verdicts |\n|---|")
	for range r.Contenders {
		p("---:|")
	}
	p("---:|---:|---|\n")
	for _, s := range r.Scenarios {
		p("| %s |", s.Scenario.Name)
		for _, c := range r.Contenders {
			res, ok := s.result(c)
			if !ok {
				p(" – |")
				continue
			}
			p(" %s |", fmtFloat(res.SteadyMBps(), 1))
		}
		k, _ := s.result(Kmirror)
		m, _ := s.result(MM2)
		x, _ := s.result(Raw)
		p(" %s | %s | %s |\n", fmtRatio(k.SteadyMBps(), m.SteadyMBps()), fmtPercent(k.SteadyMBps(), x.SteadyMBps()), verdicts(s, r.Contenders))
	}
	p("\n")
	for _, c := range r.Charts {
		p("![%s](%s)\n\n", c.Title, c.File)
	}
	p("## Targets of issue #11\n\nJudged on this run's figures; a target whose scenario did not run, or whose contenders did not complete, is \"not measured\".\n\n| target | verdict | figures |\n|---|---|---|\n")
	for _, t := range judgeTargets(r.Scenarios) {
		p("| %s | **%s** | %s |\n", t.What, t.Verdict, t.Why)
	}
	p("\n")

	for _, s := range r.Scenarios {
		sc := s.Scenario
		variant := ""
		if r.Quick {
			variant = " (quick variant: the sizes below, not the name's, apply)"
		}
		p("## %s\n\n%s%s. %d partitions; backlog %s records of %s (%s of payload), %s, %s",
			sc.Name, sc.What, variant, sc.Partitions, fmtInt(sc.Records), scenario.SizeLabel(int64(sc.RecordSize)), scenario.SizeLabel(sc.PayloadBytes()), sc.Codec, sc.Batching())
		if sc.RoundRobin {
			p(", records spread round-robin over the partitions")
		}
		p(".")
		if s.SourceBatches > 0 {
			p(" Source batches average %s as stored (a sample of %s batches of partition 0); loading took %s.", scenario.SizeLabel(s.SourceBytes/s.SourceBatches), fmtInt(s.SourceBatches), fmtDur(s.Load))
		}
		p("\n\n")
		if s.Err != "" {
			p("**Not measured:** %s\n\n", s.Err)
			continue
		}
		p("| contender | total time | total MB/s | total records/s | steady MB/s | steady records/s | ÷ mm2 (steady) | ÷ raw (steady) | CPU s | CPU s/GB | ÷ mm2 (CPU/GB) | peak RSS | source broker CPU s | destination broker CPU s | destination |\n")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		m, _ := s.result(MM2)
		x, _ := s.result(Raw)
		for _, res := range s.Results {
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				res.Contender, fmtDur(res.Total), fmtFloat(res.TotalMBps(), 1), fmtFloat(res.TotalRecordsPerSec(), 0),
				fmtFloat(res.SteadyMBps(), 1), fmtFloat(res.SteadyRecordsPerSec(), 0),
				fmtRatio(res.SteadyMBps(), m.SteadyMBps()), fmtPercent(res.SteadyMBps(), x.SteadyMBps()),
				fmtFloat(res.CPU.Seconds(), 1), fmtFloat(res.CPUPerGB(), 1), fmtRatio(res.CPUPerGB(), m.CPUPerGB()),
				fmtMiB(res.PeakRSS), fmtFloat(res.SourceCPU.Seconds(), 1), fmtFloat(res.DestinationCPU.Seconds(), 1), res.Verdict())
		}
		p("\n%s", repeats(s))
		for _, res := range s.Results {
			if res.Detail != "" {
				p("%s failed: %s\n\n```\n%s\n```\n\n", res.Contender, res.Err, res.Detail)
			}
		}
		if sc.IdleFor > 0 {
			p("Idle after the catch-up, %s with nothing to copy:\n\n| contender | CPU s over the idle time | CPU share of one core | RSS at the end |\n|---|---:|---:|---:|\n", fmtDur(sc.IdleFor))
			for _, res := range s.Results {
				p("| %s | %s | %s | %s |\n", res.Contender, fmtFloat(res.IdleCPU.Seconds(), 2), fmtPercent(res.IdleCPU.Seconds(), sc.IdleFor.Seconds()), fmtMiB(res.IdleRSS))
			}
			p("\n")
		}
		if sc.Failover {
			p("Failover after the catch-up (`kmirror failover`: every partition STOPPING → STOPPED, last mirrored offsets recorded; MirrorMaker 2 has no such operation):\n\n| contender | failover time |\n|---|---:|\n")
			for _, res := range s.Results {
				p("| %s | %s |\n", res.Contender, fmtDur(res.Failover))
			}
			p("\n")
		}
		if sc.LatencyRate > 0 {
			var prod string
			for _, res := range s.Results {
				if res.Latency != nil {
					prod = res.Latency.ProducerSettings
				}
			}
			p("End-to-end latency after the catch-up: %s records/s for %s (%s), timed from the producer's send to a consumer on the destination, once one warm-up record per partition has been mirrored.\n\n",
				fmtInt(int64(sc.LatencyRate)), fmtDur(sc.LatencyFor), prod)
			p("| contender | p50 | p99 | p99.9 | max | received / sent |\n|---|---:|---:|---:|---:|---:|\n")
			for _, res := range s.Results {
				l := res.Latency
				if l == nil {
					p("| %s | – | – | – | – | – |\n", res.Contender)
					continue
				}
				p("| %s | %s | %s | %s | %s | %s / %s |\n", res.Contender, fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.P999), fmtDur(l.Max), fmtInt(l.Received), fmtInt(l.Sent))
			}
			p("\n")
		}
	}
	if len(r.NotMeasured) > 0 {
		p("## Not measured yet\n\n")
		for _, n := range r.NotMeasured {
			p("- %s\n", n)
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// verdicts lists the contenders whose destination is not exactly the
// source's, or "all complete".
func verdicts(s ScenarioResult, contenders []string) string {
	if s.Err != "" {
		return "not measured: " + s.Err
	}
	var bad []string
	for _, c := range contenders {
		if res, ok := s.result(c); ok && !res.OK() {
			bad = append(bad, c+": "+res.Verdict())
		}
	}
	if len(bad) == 0 {
		return "all complete"
	}
	return strings.Join(bad, "; ")
}

const howToRead = `How to read the figures:

- **total** runs from the contender's process start (JVM or daemon start, topic creation, preparation) to the moment the destination holds every record of the backlog; **steady** runs from the first record seen on the destination to the last, and counts only the records that arrived after the first was seen. MB/s are 10^6 bytes of record payload (values) per second; compressed scenarios move fewer bytes on the wire.
- **÷ mm2** is the contender's figure divided by MirrorMaker 2's (above 1× is faster; for CPU/GB, below 1× is cheaper); **÷ raw** is the contender's steady throughput as a share of the raw limit's.
- **CPU s** is utime+stime of the mirror process and its children (/proc/<pid>/stat) from its start to the end of the catch-up; **CPU s/GB** divides it by the payload in GB (10^9 bytes). **peak RSS** is the sum of VmHWM of the mirror's processes. Broker CPU is the brokers' JVMs over the same span.
- **destination** says whether the destination held every record of every partition at the end (record counts per partition against the source): a contender that loses or duplicates records says so here, and its speed counts for nothing.
`
