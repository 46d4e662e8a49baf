package chart

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
)

// Line is a time-series chart: one line per series over a shared x axis
// (time), y from zero, with vertical marks at events (the soak's injected
// faults).
type Line struct {
	Title string
	// XUnit and YUnit name the axes' units ("min", "MiB").
	XUnit, YUnit string
	Series       []Series
	Marks        []Mark
}

// Series is one line of a Line chart. A point whose Y is NaN breaks the
// line: the points either side of it are not joined (a process restarted).
type Series struct {
	Name   string
	Points []Point
}

// Point is one sample.
type Point struct{ X, Y float64 }

// Mark is a vertical line at X with a short label above the plot.
type Mark struct {
	X     float64
	Label string
}

// Layout of a Line, in pixels.
const (
	lineWidth   = 1000
	lineHeight  = 340
	axisLeft    = 72 // y tick labels
	axisBottom  = 34 // x tick labels and unit
	markLabelH  = 14 // mark labels above the plot
	lineTitleH  = 22
	lineLegendH = 20
)

// Size returns the image's dimensions.
func (c Line) Size() (w, h int) { return lineWidth, lineHeight }

// PlotRect is the rectangle inside the axes that the data is drawn in.
func (c Line) PlotRect() image.Rectangle {
	top := chartMargin + lineTitleH + lineLegendH + markLabelH
	return image.Rect(chartMargin+axisLeft, top, lineWidth-chartMargin-8, lineHeight-chartMargin-axisBottom)
}

// bounds returns the data's x range and the y axis' top (at least 1, a
// nice number above the largest y).
func (c Line) bounds() (x0, x1, yTop float64) {
	x0, x1 = math.Inf(1), math.Inf(-1)
	maxY := 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
				continue
			}
			x0, x1 = math.Min(x0, p.X), math.Max(x1, p.X)
			maxY = math.Max(maxY, p.Y)
		}
	}
	if x0 > x1 {
		x0, x1 = 0, 1
	}
	if x1 == x0 {
		x1 = x0 + 1
	}
	step := niceStep(maxY / 4)
	yTop = math.Max(step*math.Ceil(maxY/step), step)
	if yTop <= 0 {
		yTop = 1
	}
	return x0, x1, yTop
}

// Draw renders the chart.
func (c Line) Draw() *image.RGBA {
	w, h := c.Size()
	img := blank(w, h)
	text(img, chartMargin, chartMargin+13, c.Title, ink)
	names := make([]string, len(c.Series))
	for i, s := range c.Series {
		names[i] = s.Name
	}
	legend(img, chartMargin+axisLeft, chartMargin+lineTitleH, names)

	r := c.PlotRect()
	x0, x1, yTop := c.bounds()
	px := func(x float64) int { return r.Min.X + int(math.Round((x-x0)/(x1-x0)*float64(r.Dx()-1))) }
	py := func(y float64) int { return r.Max.Y - 1 - int(math.Round(y/yTop*float64(r.Dy()-1))) }

	// Grid and y ticks.
	ystep := niceStep(yTop / 4)
	for y := 0.0; y <= yTop+ystep/2; y += ystep {
		gy := py(y)
		fill(img, image.Rect(r.Min.X, gy, r.Max.X, gy+1), grid)
		l := formatTick(y)
		text(img, r.Min.X-6-7*len(l), gy+5, l, ink)
	}
	if c.YUnit != "" {
		text(img, chartMargin, r.Min.Y-markLabelH+10, c.YUnit, ink)
	}
	// X ticks.
	xstep := niceStep((x1 - x0) / 8)
	for x := math.Ceil(x0/xstep) * xstep; x <= x1+xstep/1e6; x += xstep {
		gx := px(x)
		fill(img, image.Rect(gx, r.Min.Y, gx+1, r.Max.Y), grid)
		l := formatTick(x)
		text(img, gx-7*len(l)/2, r.Max.Y+15, l, ink)
	}
	if c.XUnit != "" {
		text(img, r.Max.X-7*len(c.XUnit), r.Max.Y+30, c.XUnit, ink)
	}
	// Axes.
	fill(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), ink)
	fill(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), ink)

	// Marks: dashed vertical lines, labels above the plot.
	for _, m := range c.Marks {
		if m.X < x0 || m.X > x1 {
			continue
		}
		gx := px(m.X)
		for y := r.Min.Y; y < r.Max.Y; y += 6 {
			fill(img, image.Rect(gx, y, gx+1, min(y+3, r.Max.Y)), markInk)
		}
		text(img, gx-3, r.Min.Y-3, m.Label, markInk)
	}

	// Lines, 2 pixels thick.
	for i, s := range c.Series {
		col := colour(i)
		prev, have := image.Point{}, false
		for _, p := range s.Points {
			if math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
				have = false
				continue
			}
			cur := image.Pt(px(p.X), py(math.Max(0, p.Y)))
			if have {
				segment(img, prev, cur, col)
			} else {
				fill(img, image.Rect(cur.X, cur.Y, cur.X+2, cur.Y+2), col)
			}
			prev, have = cur, true
		}
	}
	return img
}

// WritePNG encodes the chart as PNG.
func (c Line) WritePNG(w io.Writer) error { return png.Encode(w, c.Draw()) }

// segment draws a 2-pixel line from a to b (Bresenham).
func segment(img *image.RGBA, a, b image.Point, col color.Color) {
	dx, dy := abs(b.X-a.X), -abs(b.Y-a.Y)
	sx, sy := sign(b.X-a.X), sign(b.Y-a.Y)
	e := dx + dy
	x, y := a.X, a.Y
	for {
		fill(img, image.Rect(x, y, x+2, y+2), col)
		if x == b.X && y == b.Y {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x += sx
		} else {
			e += dx
			y += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// niceStep returns 1, 2 or 5 times a power of ten, the smallest not below
// raw (1 for raw <= 0).
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// formatTick prints a tick value compactly: 1500 → "1.5k", 2e6 → "2M".
func formatTick(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	case a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
