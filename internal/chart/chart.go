// Package chart draws the small PNG charts of kmirror's reports, with the
// standard library's image packages and a fixed bitmap font (no plotting
// dependency): grouped horizontal bar charts ([Bar], the benchmark's report)
// and time-series line charts ([Line], the soak's samples). Charts are
// values; Draw renders one and WritePNG encodes it.
package chart

import (
	"image"
	"image/color"
	"image/draw"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Colours are the series colours, in order: distinguishable in print and
// for common colour blindness (Okabe–Ito). Series beyond the last reuse
// them from the first.
var Colours = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{230, 159, 0, 255},   // orange
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{86, 180, 233, 255},  // sky
}

var (
	ink  = color.RGBA{30, 30, 30, 255}
	grid = color.RGBA{225, 225, 225, 255}
	// markInk draws a Line's marks (events such as injected faults).
	markInk = color.RGBA{213, 94, 0, 255} // vermillion
)

// face is the font of every chart: 7 pixels wide, 13 high.
var face font.Face = basicfont.Face7x13

// colour returns series i's colour.
func colour(i int) color.RGBA { return Colours[i%len(Colours)] }

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// blank returns a white image of w×h pixels.
func blank(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	return img
}
