package chart

import (
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
)

// Bar is a horizontal grouped bar chart: one group of bars per row label on
// the left (a benchmark scenario), one bar per series (a colour, named in
// the legend). Values[g][s] is group g's value for series s; NaN or a value
// <= 0 draws no bar and writes "n/a".
type Bar struct {
	Title  string
	Unit   string // written after each value
	Groups []string
	Series []string
	Values [][]float64
	// Digits after the decimal point of the printed values.
	Digits int
}

// Layout of a Bar, in pixels.
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

// Size returns the image's dimensions.
func (c Bar) Size() (w, h int) {
	groupH := len(c.Series)*(barHeight+barGap) - barGap
	h = chartMargin + titleHeight + legendHeight + len(c.Groups)*(groupH+groupGap) + chartMargin
	return chartWidth, h
}

// Draw renders the chart.
func (c Bar) Draw() *image.RGBA {
	w, h := c.Size()
	img := blank(w, h)
	text(img, chartMargin, chartMargin+13, c.Title, ink)
	legend(img, chartMargin, chartMargin+titleHeight, c.Series)

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
		text(img, chartMargin, y0+groupH/2+5, l, ink)
		for s := range c.Series {
			v := math.NaN()
			if g < len(c.Values) && s < len(c.Values[g]) {
				v = c.Values[g][s]
			}
			by := y0 + s*(barHeight+barGap)
			if math.IsNaN(v) || v <= 0 {
				text(img, plotX0+4, by+barHeight-2, "n/a", ink)
				continue
			}
			bw := max(1, int(math.Round(float64(plotW)*v/maxV)))
			fill(img, image.Rect(plotX0, by, plotX0+bw, by+barHeight), colour(s))
			text(img, plotX0+bw+4, by+barHeight-2, fmt.Sprintf("%.*f %s", c.Digits, v, c.Unit), ink)
		}
	}
	return img
}

// WritePNG encodes the chart as PNG.
func (c Bar) WritePNG(w io.Writer) error { return png.Encode(w, c.Draw()) }

// legend draws one colour swatch and name per series from (x, y) rightwards.
func legend(img *image.RGBA, x, y int, series []string) {
	for i, s := range series {
		fill(img, image.Rect(x, y+2, x+12, y+14), colour(i))
		text(img, x+16, y+13, s, ink)
		x += 16 + 7*len(s) + 18
	}
}
