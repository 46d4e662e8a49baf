package chart

import (
	"bytes"
	"image/png"
	"math"
	"testing"
)

// A bar chart is a PNG of the announced size whose bars are as long as
// their values, in their series' colours; the largest reaches the plot's
// right end.
func TestBarLengthsFollowTheValuesInTheSeriesColours(t *testing.T) {
	t.Parallel()
	c := Bar{Title: "t", Unit: "MB/s", Groups: []string{"a", "b"}, Series: []string{"x", "y"},
		Values: [][]float64{{128, 64}, {math.NaN(), 1}}}
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w, h := c.Size()
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("PNG is %v, want %dx%d", b, w, h)
	}
	rgba := c.Draw()
	plotX0 := chartMargin + labelWidth
	plotW := chartWidth - plotX0 - valueWidth - chartMargin
	y := chartMargin + titleHeight + legendHeight + barHeight/2
	if got := rgba.RGBAAt(plotX0+plotW-1, y); got != Colours[0] {
		t.Errorf("x's bar end is %v, want %v", got, Colours[0])
	}
	if got := rgba.RGBAAt(plotX0+plotW/2-2, y+barHeight+barGap); got != Colours[1] {
		t.Errorf("y's bar (half the maximum) is %v at its middle, want %v", got, Colours[1])
	}
	if got := rgba.RGBAAt(plotX0+plotW/2+10, y+barHeight+barGap); got == Colours[1] {
		t.Error("y's bar runs past half the plot width")
	}
}

// A line chart draws each series in its colour from its first to its last
// point, leaves a gap where a point is NaN, and draws its marks.
func TestLineDrawsSeriesGapsAndMarks(t *testing.T) {
	t.Parallel()
	flat := Series{Name: "flat", Points: []Point{{0, 10}, {5, 10}, {6, math.NaN()}, {7, 10}, {10, 10}}}
	rising := Series{Name: "rising", Points: []Point{{0, 0}, {10, 20}}}
	c := Line{Title: "t", XUnit: "min", YUnit: "MiB", Series: []Series{flat, rising}, Marks: []Mark{{X: 2.5, Label: "K"}}}
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Fatal(err)
	}
	img := c.Draw()
	r := c.PlotRect()
	_, _, yTop := c.bounds()
	if yTop != 20 {
		t.Fatalf("y axis top %v, want 20 (a nice number at the largest value)", yTop)
	}
	px := func(x float64) int { return r.Min.X + int(math.Round(x/10*float64(r.Dx()-1))) }
	py := func(y float64) int { return r.Max.Y - 1 - int(math.Round(y/yTop*float64(r.Dy()-1))) }
	// flat at y=10: drawn at x=1 and x=8, not between 5 and 7.
	for _, x := range []float64{1, 8} {
		if got := img.RGBAAt(px(x), py(10)); got != Colours[0] {
			t.Errorf("flat at x=%v is %v, want %v", x, got, Colours[0])
		}
	}
	if got := img.RGBAAt(px(6), py(10)); got == Colours[0] {
		t.Error("flat is drawn across its NaN point")
	}
	// rising: from (0,0) to (10,20), through (7.5,15).
	near := func(x, y int) bool { // a 3×3 neighbourhood: lines are rounded to pixels
		for dx := -1; dx <= 1; dx++ {
			for dy := -1; dy <= 1; dy++ {
				if img.RGBAAt(x+dx, y+dy) == Colours[1] {
					return true
				}
			}
		}
		return false
	}
	if !near(px(7.5), py(15)) {
		t.Errorf("rising is not drawn at (7.5, 15)")
	}
	// The mark is a dashed line at x=2.5.
	found := false
	for y := r.Min.Y; y < r.Max.Y; y++ {
		if img.RGBAAt(px(2.5), y) == markInk {
			found = true
			break
		}
	}
	if !found {
		t.Error("no mark drawn at x=2.5")
	}
}

func TestNiceStepsAndTicks(t *testing.T) {
	t.Parallel()
	for raw, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 120: 200} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0", 5: "5", 0.5: "0.5", 15000: "15k", 2e6: "2M"} {
		if got := formatTick(v); got != want {
			t.Errorf("formatTick(%v) = %q, want %q", v, got, want)
		}
	}
}
