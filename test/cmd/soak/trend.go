package main

import (
	"fmt"
	"math"
	"time"
)

// Trend is the least-squares line through a series after the warm-up, and
// whether its rise over that span stays within the series' bound.
type Trend struct {
	// Name of the series (e.g. "RSS MiB").
	Name string
	// N is the number of samples fitted (those after the warm-up with a value).
	N int
	// From is the time of the first fitted sample; Span the time from it
	// to the last.
	From, Span time.Duration
	// Mean is the mean of the fitted samples; First and Last their first
	// and last values; Min and Max their extremes.
	Mean, First, Last, Min, Max float64
	// Slope is the least-squares slope, per hour.
	Slope float64
	// Intercept is the fitted value at the first fitted sample.
	Intercept float64
	// Growth is Slope times Span: what the fitted line rises over the span.
	Growth float64
	// GrowthCI is the half-width of the 95% confidence interval of Growth
	// (1.96 standard errors of the slope, times Span), from the scatter of
	// the samples around the line.
	GrowthCI float64
	// Bound is the largest Growth that passes: max(Fraction of Mean, Floor).
	Bound float64
	// Pass reports Growth <= Bound (a falling series always passes).
	Pass bool
}

// Bound says how much a series may rise over the measured span and still
// count as flat: the larger of Fraction of its mean and Floor, in the
// series' unit.
type Bound struct {
	Fraction float64
	Floor    float64
}

// Point is one sample of a series: At is the time since the start of the
// load; Value is NaN when the sample is missing (e.g. the metrics endpoint
// could not be read while the API server was down).
type Point struct {
	At    time.Duration
	Value float64
}

// FitTrend fits a least-squares line through the points at or after
// warmup that have a value, and judges its rise against b. With fewer
// than 3 such points it returns an error: nothing can be said.
func FitTrend(name string, points []Point, warmup time.Duration, b Bound) (Trend, error) {
	t := Trend{Name: name, Min: math.Inf(1), Max: math.Inf(-1)}
	var xs, ys []float64
	for _, p := range points {
		if p.At < warmup || math.IsNaN(p.Value) {
			continue
		}
		xs = append(xs, p.At.Hours())
		ys = append(ys, p.Value)
	}
	t.N = len(xs)
	if t.N < 3 {
		return t, fmt.Errorf("%s: %d samples after the warm-up of %s, need at least 3", name, t.N, warmup)
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		t.Min = math.Min(t.Min, ys[i])
		t.Max = math.Max(t.Max, ys[i])
	}
	n := float64(t.N)
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	t.Mean, t.First, t.Last = my, ys[0], ys[t.N-1]
	t.From = time.Duration(xs[0] * float64(time.Hour))
	spanHours := xs[t.N-1] - xs[0]
	t.Span = time.Duration(spanHours * float64(time.Hour))
	if sxx > 0 {
		t.Slope = sxy / sxx
	}
	t.Intercept = my + t.Slope*(xs[0]-mx)
	t.Growth = t.Slope * spanHours
	if sxx > 0 && t.N > 2 {
		var sse float64
		for i := range xs {
			r := ys[i] - (my + t.Slope*(xs[i]-mx))
			sse += r * r
		}
		se := math.Sqrt(sse / (n - 2) / sxx)
		t.GrowthCI = 1.96 * se * spanHours
	}
	t.Bound = math.Max(b.Fraction*math.Abs(t.Mean), b.Floor)
	t.Pass = t.Growth <= t.Bound
	return t, nil
}

// String renders the trend on one line.
func (t Trend) String() string {
	verdict := "PASS"
	if !t.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s %s: %d samples over %s after warm-up; first %.1f last %.1f min %.1f max %.1f mean %.1f; slope %+.2f/h, rise over the span %+.2f (95%% CI ±%.2f), bound %.2f",
		verdict, t.Name, t.N, t.Span.Round(time.Second), t.First, t.Last, t.Min, t.Max, t.Mean, t.Slope, t.Growth, t.GrowthCI, t.Bound)
}

// Counter turns successive readings of a Prometheus counter into a total
// that survives resets of the process that counts (kube-apiserver restarts
// from zero): a reading below the previous one starts a new process, whose
// reading is all new. What the old process counted after its last reading
// is lost.
type Counter struct {
	last, total float64
	seen        bool
	// Resets counts the readings below the previous one.
	Resets int
}

// Observe takes a reading and returns the total so far (0 at the first reading).
func (c *Counter) Observe(v float64) float64 {
	switch {
	case !c.seen:
		c.seen = true
	case v >= c.last:
		c.total += v - c.last
	default:
		c.total += v
		c.Resets++
	}
	c.last = v
	return c.total
}

// Total is the total so far.
func (c *Counter) Total() float64 { return c.total }
