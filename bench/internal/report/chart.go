package report

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/kmirror/kmirror/bench/internal/scenario"
)

// barChart is a horizontal grouped bar chart: one group of bars per
// scenario (a row label on the left), one bar per contender (a colour,
// named in the legend). Values[g][s] is group g's value for series s; NaN or
// a value <= 0 draws no bar and writes "n/a".
type barChart struct {
	Title  string
	Unit   string // written after each value
	Groups []string
	Series []string
	Values [][]float64
	// Digits after the decimal point of the printed values.
	Digits int
}

// Layout, in pixels.
const (
	chartWidth   = 1000
	chartMargin  = 12
	labelWidth   = 150 // group labels
	valueWidth   = 110 // room for the printed value right of the longest bar
	barHeight    = 14
	barGap       = 2
	groupGap     = 12
	titleHeight  = 24
	legendHeight = 22
)

// seriesColours are distinguishable in print and for common colour
// blindness (Okabe–Ito).
var seriesColours = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{230, 159, 0, 255},   // orange
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{86, 180, 233, 255},  // sky
}

var (
	ink  = color.RGBA{30, 30, 30, 255}
	grid = color.RGBA{225, 225, 225, 255}
)

// Size returns the image's dimensions.
func (c barChart) Size() (w, h int) {
	groupH := len(c.Series)*(barHeight+barGap) - barGap
	h = chartMargin + titleHeight + legendHeight + len(c.Groups)*(groupH+groupGap) + chartMargin
	return chartWidth, h
}

// Draw renders the chart.
func (c barChart) Draw() *image.RGBA {
	w, h := c.Size()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	face := basicfont.Face7x13

	text(img, face, chartMargin, chartMargin+13, c.Title, ink)
	x := chartMargin
	for i, s := range c.Series {
		y := chartMargin + titleHeight
		fill(img, image.Rect(x, y+2, x+12, y+14), seriesColours[i%len(seriesColours)])
		text(img, face, x+16, y+13, s, ink)
		x += 16 + 7*len(s) + 18
	}

	maxV := 0.0
	for _, row := range c.Values {
		for _, v := range row {
			if v > maxV && !math.IsInf(v, 0) {
				maxV = v
			}
		}
	}
	if maxV <= 0 {
		maxV = 1
	}
	plotX0 := chartMargin + labelWidth
	plotW := w - plotX0 - valueWidth - chartMargin
	top := chartMargin + titleHeight + legendHeight
	bottom := h - chartMargin
	for i := 0; i <= 4; i++ { // vertical grid lines at quarters
		gx := plotX0 + plotW*i/4
		fill(img, image.Rect(gx, top, gx+1, bottom), grid)
	}
	groupH := len(c.Series)*(barHeight+barGap) - barGap
	for g, label := range c.Groups {
		y0 := top + g*(groupH+groupGap)
		l := label
		if max := (labelWidth - 8) / 7; len(l) > max {
			l = l[:max-1] + "~"
		}
		text(img, face, chartMargin, y0+groupH/2+5, l, ink)
		for s := range c.Series {
			v := math.NaN()
			if g < len(c.Values) && s < len(c.Values[g]) {
				v = c.Values[g][s]
			}
			by := y0 + s*(barHeight+barGap)
			if math.IsNaN(v) || v <= 0 {
				text(img, face, plotX0+4, by+barHeight-2, "n/a", ink)
				continue
			}
			bw := max(1, int(math.Round(float64(plotW)*v/maxV)))
			fill(img, image.Rect(plotX0, by, plotX0+bw, by+barHeight), seriesColours[s%len(seriesColours)])
			text(img, face, plotX0+bw+4, by+barHeight-2, fmt.Sprintf("%.*f %s", c.Digits, v, c.Unit), ink)
		}
	}
	return img
}

// WritePNG encodes the chart as PNG.
func (c barChart) WritePNG(w io.Writer) error { return png.Encode(w, c.Draw()) }

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func text(img *image.RGBA, face font.Face, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// reportCharts builds the report's charts from its scenarios: steady
// throughput, CPU per GB, peak RSS and, where measured, p99 latency.
func reportCharts(r Report) map[string]barChart {
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
	charts := map[string]barChart{
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
		charts["latency-p99.png"] = barChart{Title: "End-to-end latency p99 in ms at a fixed produce rate (lower is better)", Unit: "ms", Groups: latGroups, Series: r.Contenders, Digits: 1, Values: latValues}
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
