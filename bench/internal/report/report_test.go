package report

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/bench/internal/proc"
	"github.com/kmirror/kmirror/bench/internal/scenario"
)

func sampleReport() Report {
	sc := scenario.Scenario{Name: "1k-none-16k", What: "test", Partitions: 4, Records: 1_000_000, RecordSize: scenario.KiB, Codec: "none", BatchSize: scenario.DefaultBatch, Linger: scenario.DefaultLinger, LatencyRate: 1000, LatencyFor: time.Second}
	mk := func(name string, steady time.Duration, cpu time.Duration) Result {
		return Result{Contender: name, Records: sc.Records, Bytes: sc.PayloadBytes(), Total: steady + 2*time.Second, Steady: steady, SteadyRecords: sc.Records, CPU: cpu, PeakRSS: 100 * scenario.MiB}
	}
	k := mk(Kmirror, 8*time.Second, 4*time.Second)
	k.Latency = &Latency{Rate: 1000, Sent: 1000, Received: 1000, P50: 3 * time.Millisecond, P99: 12 * time.Millisecond, P999: 20 * time.Millisecond, Max: 25 * time.Millisecond}
	m := mk(MM2, 16*time.Second, 40*time.Second)
	m.Lost, m.LostPartitions = 10, 1
	x := mk(Raw, 8*time.Second/2*2*5/5, 2*time.Second) // same as kmirror: 100%
	return Report{
		Title: "t", Command: "make bench", Contenders: []string{Kmirror, MM2, Raw},
		Settings:  map[string]string{Kmirror: "defaults", MM2: "tuned", Raw: "raw"},
		Scenarios: []ScenarioResult{{Scenario: sc, Results: []Result{k, m, x}, SourceBatches: 10, SourceBytes: 160 * scenario.KiB}, {Scenario: scenario.Scenario{Name: "broken"}, Err: "load failed"}},
		Machine:   proc.Machine{CPUs: 2, CPUModel: "AMD EPYC", MemBytes: 24 << 30},
	}
}

// The ratios the report prints are the contender's figure over MirrorMaker
// 2's and over the raw limit's.
func TestResultFiguresAndRatios(t *testing.T) {
	r := sampleReport()
	k, _ := r.Scenarios[0].result(Kmirror)
	m, _ := r.Scenarios[0].result(MM2)
	if got := k.SteadyMBps(); math.Abs(got-128) > 1e-9 { // 1,024,000,000 bytes in 8 s
		t.Errorf("kmirror steady %v MB/s, want 128", got)
	}
	if got := k.TotalMBps(); math.Abs(got-102.4) > 1e-9 {
		t.Errorf("kmirror total %v MB/s, want 102.4", got)
	}
	if got := k.CPUPerGB(); math.Abs(got-4/1.024) > 1e-9 {
		t.Errorf("kmirror CPU/GB %v, want %v", got, 4/1.024)
	}
	if got := fmtRatio(k.SteadyMBps(), m.SteadyMBps()); got != "2.00×" {
		t.Errorf("kmirror ÷ mm2 = %s, want 2.00×", got)
	}
	if got := fmtRatio(k.CPUPerGB(), m.CPUPerGB()); got != "0.10×" {
		t.Errorf("CPU/GB ÷ mm2 = %s, want 0.10×", got)
	}
	if got := fmtPercent(k.SteadyMBps(), 0); got != "–" {
		t.Errorf("a ratio to a missing figure = %s, want –", got)
	}
}

// Steady throughput counts only the records that arrived after the first
// was seen.
func TestSteadyCountsRecordsAfterTheFirstSeen(t *testing.T) {
	r := Result{Records: 1000, Bytes: 1000 * 1000, Steady: time.Second, SteadyRecords: 900}
	if got := r.SteadyMBps(); math.Abs(got-0.9) > 1e-9 {
		t.Errorf("steady %v MB/s, want 0.9", got)
	}
	if got := r.SteadyRecordsPerSec(); got != 900 {
		t.Errorf("steady %v records/s, want 900", got)
	}
}

func TestVerdictNamesLossAndDuplicates(t *testing.T) {
	cases := []struct {
		r    Result
		want string
		ok   bool
	}{
		{Result{}, "complete", true},
		{Result{Lost: 5, LostPartitions: 2}, "LOST 5 records on 2 partitions", false},
		{Result{Duplicates: 3}, "3 extra records (duplicates)", false},
		{Result{Err: "not caught up after 3m0s", Lost: 1, LostPartitions: 1}, "FAILED: not caught up after 3m0s; LOST 1 records on 1 partitions", false},
	}
	for _, c := range cases {
		if got := c.r.Verdict(); got != c.want {
			t.Errorf("Verdict() = %q, want %q", got, c.want)
		}
		if c.r.OK() != c.ok {
			t.Errorf("%q: OK() = %v", c.want, c.r.OK())
		}
	}
}

func TestMarkdownHasTheMachineTheCommandAndATablePerScenario(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"make bench",
		"| CPUs (nproc) | 2 |",
		"AMD EPYC",
		"## 1k-none-16k",
		"| kmirror | 10.0 s | 102.4 | 100000 | 128.0 | 125000 | 2.00× | 100% |",
		"LOST 10 records on 1 partitions",
		"mm2: LOST 10 records on 1 partitions",
		"| kmirror | 3 ms | 12 ms | 20 ms | 25 ms | 1,000 / 1,000 |",
		"## broken",
		"**Not measured:** load failed",
		"Source batches average 16 KiB as stored",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", md)
	}
}

func TestFmtInt(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := fmtInt(n); got != want {
			t.Errorf("fmtInt(%d) = %q, want %q", n, got, want)
		}
	}
}

// Charts are PNGs of the announced size, with one bar per contender and
// scenario; missing figures draw no bar.
func TestChartsArePNGsWithBarsInTheSeriesColours(t *testing.T) {
	charts := reportCharts(sampleReport())
	for _, name := range []string{"throughput.png", "cpu-per-gb.png", "peak-rss.png", "latency-p99.png"} {
		c, ok := charts[name]
		if !ok {
			t.Fatalf("no chart %s", name)
		}
		var buf bytes.Buffer
		if err := c.WritePNG(&buf); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w, h := c.Size()
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Errorf("%s is %v, want %dx%d", name, b, w, h)
		}
	}
	if _, ok := charts["latency-p99.png"]; !ok {
		t.Error("no latency chart for a scenario with a latency phase")
	}
}

// Targets are judged only on complete runs: below the bar is "not met",
// with the figures; a scenario that did not run is "not measured".
func TestTargetsJudgeCompleteRunsOnly(t *testing.T) {
	r := sampleReport()
	ts := judgeTargets(r.Scenarios)
	raw := ts[0]
	if raw.Verdict != "met" || !strings.Contains(raw.Why, "1k-none-16k 100%") {
		t.Errorf("raw-limit target = %+v, want met at 100%%", raw)
	}
	// MirrorMaker 2 lost records in the sample: no comparison with it.
	mm := ts[1]
	if mm.Verdict != "not measured" {
		t.Errorf("MirrorMaker 2 target = %+v, want not measured (mm2 lost records)", mm)
	}
	for _, tg := range ts {
		if strings.Contains(tg.What, "failover") && tg.Verdict != "not measured" {
			t.Errorf("failover target = %+v", tg)
		}
	}

	// kmirror at half the raw limit, three times MirrorMaker 2, a tenth
	// of its CPU: the raw target is not met, the MirrorMaker 2 one is.
	sc := r.Scenarios[0]
	sc.Results[1].Lost, sc.Results[1].LostPartitions = 0, 0
	sc.Results[1].Steady = 24 * time.Second // mm2: 42.7 MB/s, kmirror 128
	sc.Results[2].Steady = 4 * time.Second  // raw: 256 MB/s
	ts = judgeTargets([]ScenarioResult{sc})
	if ts[0].Verdict != "not met" || !strings.Contains(ts[0].Why, "50%") {
		t.Errorf("raw-limit target = %+v, want not met at 50%%", ts[0])
	}
	if ts[1].Verdict != "met" {
		t.Errorf("MirrorMaker 2 target = %+v, want met", ts[1])
	}
}

// The failover target is judged only on the full-size scenario.
func TestFailoverTargetNeedsTenThousandPartitions(t *testing.T) {
	quick, err := scenario.Select("failover-10000", true)
	if err != nil || quick[0].Partitions != 1000 {
		t.Fatalf("quick failover-10000 = %+v, %v; want 1000 partitions", quick, err)
	}
	full, _ := scenario.Select("failover-10000", false)
	find := func(ts []Target) Target {
		for _, tg := range ts {
			if strings.Contains(tg.What, "failover-10000") {
				return tg
			}
		}
		t.Fatal("no failover target")
		return Target{}
	}
	res := Result{Contender: Kmirror, Total: time.Minute, Failover: 12 * time.Second}
	if got := find(judgeTargets([]ScenarioResult{{Scenario: quick[0], Results: []Result{res}}})); got.Verdict != "not measured" {
		t.Errorf("quick variant: %+v, want not measured", got)
	}
	if got := find(judgeTargets([]ScenarioResult{{Scenario: full[0], Results: []Result{res}}})); got.Verdict != "met" {
		t.Errorf("12 s on 10,000 partitions: %+v, want met", got)
	}
	res.Failover = 45 * time.Second
	if got := find(judgeTargets([]ScenarioResult{{Scenario: full[0], Results: []Result{res}}})); got.Verdict != "not met" || !strings.Contains(got.Why, "45.0 s") {
		t.Errorf("45 s: %+v, want not met with the figure", got)
	}
}

// TestMedianKeepsTheMiddleCompleteRunAndListsEveryRun: of three kmirror
// runs (one incomplete), the median of the complete ones is kept, every
// run is listed under the scenario's table with its place in its round,
// and a contender that ran once gets no such line.
func TestMedianKeepsTheMiddleCompleteRunAndListsEveryRun(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	k := rep.Scenarios[0].Results[0]
	var rs []Result
	for i, steady := range []time.Duration{8 * time.Second, 4 * time.Second, 2 * time.Second, 10 * time.Second} {
		r := k
		r.Steady = steady
		r.PeakRSS = int64(100+i) * scenario.MiB
		if i == 2 {
			r.Lost, r.LostPartitions = 1, 1 // the fastest run lost a record: not a candidate
		}
		r.Runs = RunOf(r, i+1, (i%3)+1)
		rs = append(rs, r)
	}
	m := Median(rs)
	// Complete runs' steady throughputs, ascending: 10 s, 8 s, 4 s → the
	// lower middle of three is the 8 s run.
	if m.Steady != 8*time.Second || m.PeakRSS != 100*scenario.MiB {
		t.Errorf("median run: steady %s, RSS %d; want the 8 s run (100 MiB)", m.Steady, m.PeakRSS/scenario.MiB)
	}
	if len(m.Runs) != 4 || m.Runs[2].OK || m.Runs[2].Round != 3 || m.Runs[1].Position != 2 {
		t.Errorf("runs: %+v", m.Runs)
	}
	rep.Scenarios[0].Results[0] = m
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Repeated runs, the order of the contenders rotated each round",
		"| kmirror | 128.0 (1st), 256.0 (2nd), 512.0 (3rd) incomplete, 102.4 (1st) | 100 MiB, 101 MiB, 102 MiB, 103 MiB |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if rows := strings.Count(repeats(rep.Scenarios[0]), "\n| "); rows != 2 { // the header and kmirror's row
		t.Errorf("the repeated runs' table has %d rows; want the header and kmirror's (mm2 and raw ran once):\n%s", rows, repeats(rep.Scenarios[0]))
	}
	if one := Median(rs[:1]); one.Steady != rs[0].Steady || len(one.Runs) != 1 {
		t.Errorf("one run: %+v", one)
	}
}
