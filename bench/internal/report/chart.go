package report

import (
	"math"

	"github.com/kmirror/kmirror/bench/internal/scenario"
	"github.com/kmirror/kmirror/internal/chart"
)

// reportCharts builds the report's charts from its scenarios: steady
// throughput, CPU per GB, peak RSS and, where measured, p99 latency.
func reportCharts(r Report) map[string]chart.Bar {
	var groups []string
	for _, s := range r.Scenarios {
		groups = append(groups, s.Scenario.Name)
	}
	values := func(f func(Result) float64) [][]float64 {
		out := make([][]float64, len(r.Scenarios))
		for g, s := range r.Scenarios {
			out[g] = make([]float64, len(r.Contenders))
			for i, c := range r.Contenders {
				res, ok := s.result(c)
				if !ok || res.Err != "" {
					out[g][i] = math.NaN()
					continue
				}
				out[g][i] = f(res)
			}
		}
		return out
	}
	charts := map[string]chart.Bar{
		"throughput.png": {Title: "Steady-state catch-up throughput (MB/s of payload, higher is better)", Unit: "MB/s", Groups: groups, Series: r.Contenders, Digits: 1,
			Values: values(Result.SteadyMBps)},
		"cpu-per-gb.png": {Title: "Mirror CPU-seconds per GB of payload (lower is better)", Unit: "s/GB", Groups: groups, Series: r.Contenders, Digits: 1,
			Values: values(Result.CPUPerGB)},
		"peak-rss.png": {Title: "Mirror peak RSS in MiB (lower is better)", Unit: "MiB", Groups: groups, Series: r.Contenders, Digits: 0,
			Values: values(func(res Result) float64 { return float64(res.PeakRSS) / scenario.MiB })},
	}
	var latGroups []string
	var latValues [][]float64
	for _, s := range r.Scenarios {
		if s.Scenario.LatencyRate == 0 {
			continue
		}
		latGroups = append(latGroups, s.Scenario.Name)
		row := make([]float64, len(r.Contenders))
		for i, c := range r.Contenders {
			row[i] = math.NaN()
			if res, ok := s.result(c); ok && res.Latency != nil && res.Latency.Received > 0 {
				row[i] = float64(res.Latency.P99) / 1e6
			}
		}
		latValues = append(latValues, row)
	}
	if len(latGroups) > 0 {
		charts["latency-p99.png"] = chart.Bar{Title: "End-to-end latency p99 in ms at a fixed produce rate (lower is better)", Unit: "ms", Groups: latGroups, Series: r.Contenders, Digits: 1, Values: latValues}
	}
	return charts
}

// chartOrder is the order charts appear in the report.
var chartOrder = []struct{ file, title string }{
	{"throughput.png", "steady-state throughput"},
	{"cpu-per-gb.png", "CPU per GB"},
	{"peak-rss.png", "peak RSS"},
	{"latency-p99.png", "latency p99"},
}
