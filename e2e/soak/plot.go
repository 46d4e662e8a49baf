package soak

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/kmirror/kmirror/internal/chart"
)

// Event is a fault of the soak, for the plots' marks.
type Event struct {
	At   time.Duration
	Kind string
}

// markLabels are the one-letter labels of the fault kinds on the plots.
var markLabels = map[string]string{
	"daemon-kill":     "K",
	"broker-restart":  "B",
	"source-cut":      "S",
	"destination-cut": "D",
}

// Plots are the PNG files WritePlots writes, in order, with their titles.
var Plots = []struct{ File, Title string }{
	{"rss.png", "RSS of the daemon and its state-store plugin"},
	{"goroutines.png", "Goroutines of the daemon"},
	{"open-fds.png", "Open file descriptors of the daemon"},
	{"lag.png", "Lag over every mirrored partition"},
}

// WritePlots draws one PNG per figure into dir: the samples over time in
// minutes, a break in the line at each daemon restart, a mark at each
// fault (K daemon killed, B source broker restarted, S source cut, D
// destination cut).
func WritePlots(dir string, samples []Sample, events []Event) error {
	var marks []chart.Mark
	for _, e := range events {
		marks = append(marks, chart.Mark{X: e.At.Minutes(), Label: markLabels[e.Kind]})
	}
	series := func(name string, get func(Sample) (float64, bool)) chart.Series {
		var pts []chart.Point
		inst := 0
		for _, s := range samples {
			if s.Instance != inst && inst != 0 {
				pts = append(pts, chart.Point{X: s.At.Minutes(), Y: math.NaN()})
			}
			inst = s.Instance
			if v, ok := get(s); ok {
				pts = append(pts, chart.Point{X: s.At.Minutes(), Y: v})
			}
		}
		return chart.Series{Name: name, Points: pts}
	}
	charts := []chart.Line{
		{YUnit: "MiB", Series: []chart.Series{series("RSS (MiB)", func(s Sample) (float64, bool) { return float64(s.RSS) / (1 << 20), s.RSS > 0 })}},
		{YUnit: "goroutines", Series: []chart.Series{series("goroutines", func(s Sample) (float64, bool) { return float64(s.Goroutines), s.Goroutines > 0 })}},
		{YUnit: "fds", Series: []chart.Series{series("open file descriptors", func(s Sample) (float64, bool) { return float64(s.FDs), s.FDs > 0 })}},
		{YUnit: "offsets", Series: []chart.Series{
			series("lag kmirror reports (sum of kmirror_consumer_lag)", func(s Sample) (float64, bool) { return float64(s.Lag), s.Lag >= 0 }),
			series("end-offset gap (source end - destination end, summed)", func(s Sample) (float64, bool) { return float64(s.Gap), s.Gap >= 0 }),
		}},
	}
	for i, c := range charts {
		c.Title = Plots[i].Title + " (K daemon killed, B source broker restarted, S/D source/destination cut)"
		c.XUnit = "minutes"
		c.Marks = marks
		var buf bytes.Buffer
		if err := c.WritePNG(&buf); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, Plots[i].File), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
