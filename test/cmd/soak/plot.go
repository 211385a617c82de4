package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"time"
)

// Panel is one chart of the plot: its series over time, drawn on a shared
// time axis.
type Panel struct {
	Title string
	Lines []Line
	// Trend, if set, is drawn over the measured span (after the warm-up).
	Trend *Trend
}

// Line is one series of a panel.
type Line struct {
	Points []Point
	Color  color.RGBA
}

// Marker is a vertical tick across every panel at a moment of the run
// (an API server restart, a certificate rotation).
type Marker struct {
	At    time.Duration
	Color color.RGBA
}

// Plot is the whole figure.
type Plot struct {
	Width, Height int
	Title         string
	Panels        []Panel
	Markers       []Marker
	// Legend is drawn under the title: text and its colour.
	Legend []LegendItem
	// Warmup is shaded; Total is the length of the time axis.
	Warmup, Total time.Duration
	// Excluded are spans left out of the trends, shaded like the warm-up.
	Excluded []Span
}

// Span is an interval of the run.
type Span struct{ From, To time.Duration }

// LegendItem is one entry of the legend.
type LegendItem struct {
	Text  string
	Color color.RGBA
}

var (
	colWhite  = color.RGBA{255, 255, 255, 255}
	colBlack  = color.RGBA{0, 0, 0, 255}
	colGrid   = color.RGBA{225, 225, 225, 255}
	colWarmup = color.RGBA{232, 232, 232, 255}
	colBlue   = color.RGBA{31, 119, 180, 255}
	colOrange = color.RGBA{255, 127, 14, 255}
	colGreen  = color.RGBA{44, 160, 44, 255}
	colRed    = color.RGBA{214, 39, 40, 255}
	colPurple = color.RGBA{148, 103, 189, 255}
	colTeal   = color.RGBA{23, 190, 207, 255}
)

const (
	marginLeft   = 70
	marginRight  = 20
	headerHeight = 58
	footerHeight = 34
	panelGap     = 30
)

// Render draws the plot.
func (p Plot) Render() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, p.Width, p.Height))
	draw.Draw(img, img.Bounds(), &image.Uniform{colWhite}, image.Point{}, draw.Src)
	drawText(img, marginLeft, 8, p.Title, colBlack, 2)
	x, y := marginLeft, 31
	for _, l := range p.Legend {
		w := 16 + len(l.Text)*glyphAdvance
		if x+w > p.Width-marginRight && x > marginLeft {
			x, y = marginLeft, y+12 // the legend's second row
		}
		fillRect(img, x, y+1, x+12, y+6, l.Color)
		drawText(img, x+16, y, l.Text, colBlack, 1)
		x += w + 18
	}
	if len(p.Panels) == 0 {
		return img
	}
	total := p.Total
	if total <= 0 {
		total = time.Second
	}
	plotW := p.Width - marginLeft - marginRight
	panelH := (p.Height - headerHeight - footerHeight - panelGap*(len(p.Panels)-1)) / len(p.Panels)
	xOf := func(at time.Duration) int {
		return marginLeft + int(math.Round(float64(plotW)*float64(at)/float64(total)))
	}
	xStep := niceStep(total.Minutes(), 8)
	for i, panel := range p.Panels {
		top := headerHeight + i*(panelH+panelGap) + 12
		bottom := top + panelH - 12
		left, right := marginLeft, marginLeft+plotW
		drawText(img, left, top-11, panel.Title, colBlack, 1)
		// Warm-up and excluded spans.
		if p.Warmup > 0 {
			fillRect(img, left, top, xOf(p.Warmup), bottom, colWarmup)
		}
		for _, sp := range p.Excluded {
			fillRect(img, max(xOf(sp.From), left), top, min(xOf(sp.To), right), bottom, colWarmup)
		}
		lo, hi := valueRange(panel)
		yOf := func(v float64) int {
			return bottom - int(math.Round(float64(bottom-top)*(v-lo)/(hi-lo)))
		}
		// Grid and y labels.
		step := niceStep(hi-lo, 4)
		for v := math.Ceil(lo/step) * step; v <= hi+step/1e6; v += step {
			y := yOf(v)
			hline(img, left, right, y, colGrid)
			label := formatTick(v, step)
			drawText(img, left-6-len(label)*glyphAdvance, y-3, label, colBlack, 1)
		}
		for m := 0.0; m <= total.Minutes()+xStep/1e6; m += xStep {
			vline(img, xOf(time.Duration(m*float64(time.Minute))), top, bottom, colGrid)
		}
		for _, mk := range p.Markers {
			x := xOf(mk.At)
			for y := top; y <= bottom; y += 4 {
				vline(img, x, y, min(y+1, bottom), mk.Color)
			}
		}
		// Axes.
		vline(img, left, top, bottom, colBlack)
		hline(img, left, right, bottom, colBlack)
		for _, l := range panel.Lines {
			prevOK := false
			var px, py int
			for _, pt := range l.Points {
				if math.IsNaN(pt.Value) {
					prevOK = false
					continue
				}
				x, y := xOf(pt.At), yOf(pt.Value)
				if prevOK {
					line(img, px, py, x, y, l.Color)
					line(img, px, py+1, x, y+1, l.Color)
				} else {
					fillRect(img, x, y, x+1, y+1, l.Color)
				}
				px, py, prevOK = x, y, true
			}
		}
		if t := panel.Trend; t != nil && t.N >= 3 {
			x0, x1 := xOf(t.From), min(xOf(t.From+t.Span), right)
			y0, y1 := yOf(t.Intercept), yOf(t.Intercept+t.Growth)
			line(img, x0, y0, x1, y1, colGreen)
			line(img, x0, y0-1, x1, y1-1, colGreen)
		}
	}
	// Time axis labels under the last panel.
	bottom := headerHeight + len(p.Panels)*(panelH+panelGap) - panelGap
	for m := 0.0; m <= total.Minutes()+xStep/1e6; m += xStep {
		label := formatTick(m, xStep)
		x := xOf(time.Duration(m * float64(time.Minute)))
		drawText(img, x-len(label)*glyphAdvance/2, bottom+4, label, colBlack, 1)
	}
	drawText(img, marginLeft+plotW/2-30, bottom+18, "minutes", colBlack, 1)
	return img
}

// WritePNG renders the plot as PNG to w.
func (p Plot) WritePNG(w io.Writer) error {
	return png.Encode(w, p.Render())
}

// valueRange returns the y range of a panel: its values (and trend) with
// some room, never empty.
func valueRange(panel Panel) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range panel.Lines {
		for _, pt := range l.Points {
			if !math.IsNaN(pt.Value) {
				lo, hi = math.Min(lo, pt.Value), math.Max(hi, pt.Value)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	if t := panel.Trend; t != nil {
		lo = math.Min(lo, math.Min(t.Intercept, t.Intercept+t.Growth))
		hi = math.Max(hi, math.Max(t.Intercept, t.Intercept+t.Growth))
	}
	pad := (hi - lo) * 0.1
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.1, 1)
	}
	// Counts and sizes start at zero: a rise reads against the whole.
	return math.Min(0, lo-pad), hi + pad
}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// formatTick prints v with as many decimals as step needs.
func formatTick(v, step float64) string {
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	if math.Abs(v) < step/1e6 {
		v = 0
	}
	return fmt.Sprintf("%.*f", dec, v)
}

// drawText draws s with its top-left corner at (x, y), each font pixel
// scale pixels wide.
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, r := range s {
		g := glyphRows(r)
		for row := range g {
			for col := range glyphWidth {
				if g[row]&(1<<(glyphWidth-1-col)) != 0 {
					fillRect(img, x+col*scale, y+row*scale, x+col*scale+scale-1, y+row*scale+scale-1, c)
				}
			}
		}
		x += glyphAdvance * scale
	}
}

// fillRect fills the rectangle with corners (x0, y0) and (x1, y1), inclusive.
func fillRect(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	r := image.Rect(min(x0, x1), min(y0, y1), max(x0, x1)+1, max(y0, y1)+1).Intersect(img.Bounds())
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) { fillRect(img, x0, y, x1, y, c) }
func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) { fillRect(img, x, y0, x, y1, c) }

// line draws a line from (x0, y0) to (x1, y1) (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		if (image.Point{x0, y0}).In(img.Bounds()) {
			img.SetRGBA(x0, y0, c)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
