package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// line returns n points every step from 0, value a + b*i + noise(i).
func linePoints(n int, step time.Duration, f func(i int) float64) []Point {
	out := make([]Point, n)
	for i := range out {
		out[i] = Point{At: time.Duration(i) * step, Value: f(i)}
	}
	return out
}

func TestFitTrendFlatWithNoisePasses(t *testing.T) {
	// 30 minutes every 5 s around 50 MiB, ±2 MiB of alternating noise.
	pts := linePoints(361, 5*time.Second, func(i int) float64 { return 50 + 2*float64(i%2*2-1) })
	tr, err := FitTrend("RSS MiB", pts, 6*time.Minute, Bound{Fraction: 0.05, Floor: 4})
	require.NoError(t, err)
	assert.True(t, tr.Pass, tr.String())
	assert.InDelta(t, 0, tr.Growth, 0.1)
	assert.InDelta(t, 50, tr.Mean, 0.1)
	assert.Equal(t, 6*time.Minute, tr.From)
	assert.Equal(t, 24*time.Minute, tr.Span)
	assert.Equal(t, 4.0, tr.Bound, "the floor: 5% of 50 is 2.5")
}

func TestFitTrendLeakFails(t *testing.T) {
	// 1 goroutine a minute: 24 over the measured span, bound max(5, 10).
	pts := linePoints(361, 5*time.Second, func(i int) float64 { return 100 + float64(i)*5/60 })
	tr, err := FitTrend("goroutines", pts, 6*time.Minute, Bound{Fraction: 0.05, Floor: 10})
	require.NoError(t, err)
	assert.False(t, tr.Pass, tr.String())
	assert.InDelta(t, 60, tr.Slope, 1e-6, "per hour")
	assert.InDelta(t, 24, tr.Growth, 1e-6)
	assert.InDelta(t, 0, tr.GrowthCI, 1e-6, "a perfect line has no scatter")
	assert.InDelta(t, 106, tr.Intercept, 1e-6, "the fitted value at the first sample after warm-up")
	assert.Contains(t, tr.String(), "FAIL goroutines")
}

func TestFitTrendSkipsWarmupAndMissingSamples(t *testing.T) {
	// A steep warm-up, then flat; missing samples (NaN) are skipped.
	pts := linePoints(100, time.Second, func(i int) float64 {
		switch {
		case i < 20:
			return float64(i) * 10
		case i%7 == 0:
			return math.NaN()
		default:
			return 200
		}
	})
	tr, err := FitTrend("fds", pts, 20*time.Second, Bound{Fraction: 0.05, Floor: 5})
	require.NoError(t, err)
	assert.True(t, tr.Pass)
	assert.Equal(t, 0.0, tr.Growth)
	assert.Equal(t, 80-12, tr.N, "80 samples after warm-up, 12 of them missing (multiples of 7)")

	_, err = FitTrend("fds", pts[:22], 20*time.Second, Bound{})
	assert.ErrorContains(t, err, "need at least 3")
}

func TestFitTrendFallingPasses(t *testing.T) {
	pts := linePoints(50, time.Minute, func(i int) float64 { return 100 - float64(i) })
	tr, err := FitTrend("RSS MiB", pts, 0, Bound{Fraction: 0.05, Floor: 1})
	require.NoError(t, err)
	assert.True(t, tr.Pass)
	assert.Less(t, tr.Growth, 0.0)
}

func TestCounterSurvivesResets(t *testing.T) {
	var c Counter
	assert.Equal(t, 0.0, c.Observe(100), "the first reading is the baseline")
	assert.Equal(t, 50.0, c.Observe(150))
	assert.Equal(t, 70.0, c.Observe(20), "a restart: 20 new since it")
	assert.Equal(t, 80.0, c.Observe(30))
	assert.Equal(t, 1, c.Resets)
	assert.Equal(t, 80.0, c.Total())
}

func TestClassify(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	windows := []Window{{From: at(100), To: at(120)}}
	cases := []struct {
		name       string
		msg        string
		conflict   bool
		start, end int
		want       string
	}{
		{"conflict anywhere", "the object has been modified", true, 10, 11, classConflict},
		{"false refusal even in a window", `admission webhook "validate..." denied the request: ... [rule WorkerNewerThanControlPlane]; ...`, false, 105, 106, classRefused},
		{"connection refused in a window", `Put "https://127.0.0.1:1/apis/...": dial tcp 127.0.0.1:1: connect: connection refused`, false, 110, 110, classAPIServerRestart},
		{"started before the window, ended in it", "EOF", false, 95, 101, classAPIServerRestart},
		{"ended just after the window", "EOF", false, 121, 122, classOther},
		{"webhook unreachable outside", `Internal error occurred: failed calling webhook "stamp.machinedeployment.rollout-guard.io": ...`, false, 10, 11, classWebhookFailed},
		{"CLI's unavailable outside", "exit 1: cannot restart MachineDeployment default/x: rollout-guard is unavailable: ...", false, 10, 11, classWebhookFailed},
		{"guard denied without a rule", `admission webhook "stamp.machinedeployment.rollout-guard.io" denied the request: rollout-guard could not record revision 3`, false, 10, 11, classGuardDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Classify(c.msg, c.conflict, at(c.start), at(c.end), windows))
		})
	}
}

func TestCountSeparatesGuardFailures(t *testing.T) {
	t0 := time.Now()
	windows := []Window{{From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second)}}
	o := func(kind string, sec int, err string, conflict bool) Outcome {
		at := t0.Add(time.Duration(sec) * time.Second)
		return Outcome{Writer: "w", Kind: kind, Object: "MachineDeployment/x", Start: at, End: at, Err: err, Conflict: conflict}
	}
	tally := Count([]Outcome{
		o(kindTemplate, 1, "", false),
		o(kindVersion, 2, "", false),
		o(kindTemplate, 12, "connection refused", false), // in the window
		o(kindVersion, 3, "conflict", true),              // conflict
		o(kindLabel, 30, "connection refused", false),    // not policed: reported, not the guard's
		o(kindTemplateLabel, 31, `failed calling webhook "stamp"`, false),
	}, windows)
	assert.Equal(t, 6, tally.Total())
	assert.Equal(t, 2, tally.Succeeded())
	assert.Equal(t, 5, tally.PolicedMade())
	assert.Equal(t, map[string]int{classAPIServerRestart: 1, classConflict: 1, classOther: 1, classWebhookFailed: 1}, tally.Failed)
	require.Len(t, tally.GuardFailures, 1)
	assert.Equal(t, kindTemplateLabel, tally.GuardFailures[0].Kind)
	assert.Equal(t, classWebhookFailed, tally.GuardFailures[0].Class)
}

func TestCheckHistory(t *testing.T) {
	seen := []Seen{{"A", 1}, {"A", 1}, {"B", 2}, {"A", 3}, {"C", 4}}
	good := []Recorded{{"A", []int64{1, 3}}, {"B", []int64{2}}, {"C", []int64{4}}}
	c, notes := CheckHistory("md", seen, good, 0)
	assert.Empty(t, c.Problems)
	assert.Empty(t, notes)
	assert.Equal(t, 3, c.Contents)
	assert.Equal(t, 3, c.Recorded)

	c, _ = CheckHistory("md", seen, []Recorded{{"A", []int64{1}}, {"B", []int64{2, 3}}}, 0)
	assert.Len(t, c.Problems, 2, "A's 3 recorded under B, C not in history: %v", c.Problems)
	assert.Contains(t, strings.Join(c.Problems, "\n"), "content A was stamped revision 3, history records it as [1]")
	assert.Contains(t, strings.Join(c.Problems, "\n"), "persisted content C (stamped [4]) is not in history")

	c, _ = CheckHistory("md", seen, []Recorded{{"A", []int64{1, 3}}, {"B", []int64{2, 3}}, {"C", []int64{4}}}, 0)
	require.Len(t, c.Problems, 1)
	assert.Contains(t, c.Problems[0], "revision 3 names both A and B")

	// A content switched back to more often than a record keeps numbers:
	// its older numbers are gone, noted; one missing among the newest is
	// a problem.
	var flips []Seen
	var kept []int64
	for n := int64(1); n <= 2*revisions.MaxNumbers+1; n++ {
		h := "A"
		if n%2 == 0 {
			h = "B"
		}
		flips = append(flips, Seen{h, n})
	}
	for n := int64(2*revisions.MaxNumbers + 1); len(kept) < revisions.MaxNumbers; n -= 2 {
		kept = append([]int64{n}, kept...)
	}
	var evens []int64
	for n := int64(2); n <= 2*revisions.MaxNumbers; n += 2 {
		evens = append(evens, n)
	}
	c, notes = CheckHistory("md", flips, []Recorded{{"A", kept}, {"B", evens}}, 0)
	assert.Empty(t, c.Problems)
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "content A keeps its newest 100 numbers; 1 older ones")
	c, _ = CheckHistory("md", flips, []Recorded{{"A", kept[1:]}, {"B", evens}}, 0)
	assert.NotEmpty(t, c.Problems, "a number among the newest missing")

	// History holding content never seen: a problem, or unverifiable after
	// a watch gap.
	extra := append(append([]Recorded(nil), good...), Recorded{"D", []int64{5}})
	c, _ = CheckHistory("md", seen, extra, 0)
	assert.Len(t, c.Problems, 1)
	c, notes = CheckHistory("md", seen, extra, 1)
	assert.Empty(t, c.Problems)
	assert.Len(t, notes, 1)
}

func TestSumMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 123
apiserver_request_total{code="200",resource="machinedeployments",verb="GET"} 10
apiserver_request_total{code="201",resource="rolloutrevisions",verb="POST"} 4
apiserver_request_total{code="200",resource="rolloutrevisions",verb="LIST"} 6
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.machinedeployment.rollout-guard.io",operation="UPDATE",rejected="false",type="admit"} 7
apiserver_admission_webhook_admission_duration_seconds_count{name="default.machinedeployment.cluster.x-k8s.io",operation="UPDATE",rejected="false",type="admit"} 9
`
	got, err := SumMetrics(strings.NewReader(text), append(append([]MetricSum{}, apiServerMetrics...), MetricSum{Name: "go_goroutines"}, MetricSum{Name: "absent"}))
	require.NoError(t, err)
	assert.Equal(t, 20.0, got[0])
	assert.Equal(t, 10.0, got[1])
	assert.Equal(t, 7.0, got[2])
	assert.Equal(t, 123.0, got[3])
	assert.True(t, math.IsNaN(got[4]))
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, []Sample{
		{At: 0, PID: 42, RSSBytes: 50 * mib, RSSAnonBytes: 20 * mib, RSSFileBytes: 30 * mib, FDs: 20, WebhookConns: 1, APIConns: 2, Goroutines: 100, HeapInuseBytes: 10 * mib, GuardRequests: 5, LiveDecisions: 0, APIRequests: 0, CRRequests: 0, WebhookCalls: 0},
		{At: 5 * time.Second, PID: 42, RSSBytes: 51.5 * mib, RSSAnonBytes: math.NaN(), RSSFileBytes: math.NaN(), FDs: 21, WebhookConns: math.NaN(), APIConns: math.NaN(), Goroutines: math.NaN(), HeapInuseBytes: math.NaN(), GuardRequests: math.NaN(), LiveDecisions: math.NaN(),
			APIRequests: 300, CRRequests: 12, WebhookCalls: 8, Edits: 4, PolicedEdits: 3, Failed: 1, Event: "apiserver-restart"},
	}))
	rows, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, csvHeader, rows[0])
	assert.Equal(t, []string{"0.0", "42", "50.00", "20.00", "30.00", "20", "1", "2", "100", "10.00", "5", "0", "0", "0", "0", "0", "0", "0", ""}, rows[1])
	assert.Equal(t, []string{"5.0", "42", "51.50", "", "", "21", "", "", "", "", "", "", "300", "12", "8", "4", "3", "1", "apiserver-restart"}, rows[2])
}

func TestRatio(t *testing.T) {
	samples := []Sample{
		{At: 0, APIRequests: 0, Edits: 0},
		{At: time.Minute, APIRequests: math.NaN(), Edits: 10},
		{At: 2 * time.Minute, APIRequests: 200, Edits: 20},
		{At: 3 * time.Minute, APIRequests: 500, Edits: 30},
	}
	req := func(x Sample) float64 { return x.APIRequests }
	edits := func(x Sample) float64 { return float64(x.Edits) }
	assert.InDelta(t, 500.0/30, Ratio(samples, req, edits, 0, 3*time.Minute), 1e-9)
	assert.InDelta(t, 30.0, Ratio(samples, req, edits, 2*time.Minute, 3*time.Minute), 1e-9)
	assert.True(t, math.IsNaN(Ratio(samples, req, edits, 3*time.Minute, 3*time.Minute)))
}

func TestPlotRendersADecodablePNG(t *testing.T) {
	samples := make([]Sample, 0, 100)
	for i := range 100 {
		g := 120 + float64(i%5)
		if i == 50 {
			g = math.NaN()
		}
		samples = append(samples, Sample{At: time.Duration(i) * 5 * time.Second, RSSBytes: (40 + float64(i%3)) * mib, HeapInuseBytes: 12 * mib, Goroutines: g, FDs: 25})
	}
	tr, err := FitTrend("RSS MiB", series(samples, func(x Sample) float64 { return x.RSSBytes / mib }), time.Minute, Bound{0.05, 4})
	require.NoError(t, err)
	p := Plot{
		Width: 640, Height: 480, Title: "soak test plot",
		Legend:  []LegendItem{{"RSS", colBlue}},
		Panels:  []Panel{{Title: "memory (MiB)", Lines: []Line{{Points: series(samples, func(x Sample) float64 { return x.RSSBytes / mib }), Color: colBlue}}, Trend: &tr}, {Title: "goroutines", Lines: []Line{{Points: series(samples, func(x Sample) float64 { return x.Goroutines }), Color: colBlue}}}},
		Markers: []Marker{{At: 2 * time.Minute, Color: colRed}},
		Warmup:  time.Minute, Total: samples[len(samples)-1].At,
	}
	var b bytes.Buffer
	require.NoError(t, p.WritePNG(&b))
	img, err := png.Decode(&b)
	require.NoError(t, err)
	assert.Equal(t, 640, img.Bounds().Dx())
	assert.Equal(t, 480, img.Bounds().Dy())
	// Something was drawn in the series' colour.
	blue := 0
	for y := range 480 {
		for x := range 640 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == uint32(colBlue.R) && g>>8 == uint32(colBlue.G) && bl>>8 == uint32(colBlue.B) {
				blue++
			}
		}
	}
	assert.Greater(t, blue, 200)
}

func TestEvaluate(t *testing.T) {
	o := options{warmup: 0.2, rssBound: Bound{0.05, 4}, goroutineBound: Bound{0.05, 10}, fdBound: Bound{0.05, 5}}
	t0 := time.Now()
	flat := func(leak float64) []Sample {
		var out []Sample
		for i := range 121 {
			out = append(out, Sample{At: time.Duration(i) * 5 * time.Second, PID: 7, RSSBytes: (50 + leak*float64(i)) * mib,
				Goroutines: 150 + float64(i%3), FDs: 30, Edits: i * 4, PolicedEdits: i * 3, APIRequests: float64(i * 40)})
		}
		return out
	}
	okLoad := func() []Outcome {
		var out []Outcome
		for _, k := range []string{kindTemplate, kindVersion, kindTemplateLabel, kindLabel, kindRestart} {
			out = append(out, Outcome{Kind: k, Start: t0, End: t0})
		}
		return out
	}
	s := &soak{o: o, begin: t0, outcomes: okLoad(),
		events: []Event{{Name: "apiserver-restart"}, {Name: "cert-rotation"}}}
	hist := []objectHistory{{object: "MachineDeployment/x", check: Completeness{Contents: 3, Recorded: 3}}}

	r := s.evaluate(flat(0), hist, 7, false)
	assert.True(t, r.pass, "%+v", r.verdicts)

	// 0.1 MiB per sample: 9.6 MiB over the measured 8 minutes.
	r = s.evaluate(flat(0.1), hist, 7, false)
	assert.False(t, r.pass)
	assert.False(t, verdict(t, r, "no growth of RSS MiB").Pass)

	// Goroutines dip while kube-apiserver restarts early in the measured
	// span (the guard's watches end): without its window the dip reads as
	// growth; samples in the window are left out.
	dipped := flat(0)
	for i := 30; i < 40; i++ {
		dipped[i].Goroutines = 60
	}
	r = s.evaluate(dipped, hist, 7, false)
	assert.False(t, verdict(t, r, "no growth of goroutines").Pass, "%+v", r.trends)
	s.windows = []Window{{From: t0.Add(30 * 5 * time.Second), Ready: t0.Add(35 * 5 * time.Second), To: t0.Add(36 * 5 * time.Second)}}
	s.o.trendSettle = 20 * time.Second // until sample 39
	r = s.evaluate(dipped, hist, 7, false)
	assert.True(t, verdict(t, r, "no growth of goroutines").Pass, "%+v", r.trends)
	assert.Equal(t, 10, r.excluded)
	s.windows, s.o.trendSettle = nil, 0

	// A guard restarted midway.
	samples := flat(0)
	samples[60].PID = 8
	r = s.evaluate(samples, hist, 7, false)
	assert.False(t, verdict(t, r, "one guard process throughout").Pass)

	// A policed edit failing outside any window.
	s.outcomes = append(okLoad(), Outcome{Kind: kindVersion, Start: t0, End: t0, Err: `failed calling webhook "x"`})
	r = s.evaluate(flat(0), hist, 7, false)
	assert.False(t, verdict(t, r, "no failed policed edit while the guard was up").Pass)

	// The same inside an API server restart window: expected.
	s.windows = []Window{{From: t0.Add(-time.Second), Ready: t0, To: t0.Add(time.Second)}}
	r = s.evaluate(flat(0), hist, 7, false)
	assert.True(t, r.pass, "%+v", r.verdicts)

	// History with a problem; a failed fault; an interrupted run.
	r = s.evaluate(flat(0), []objectHistory{{object: "x", check: Completeness{Problems: []string{"lost"}}}}, 7, false)
	assert.False(t, verdict(t, r, "history complete").Pass)
	s.events = append(s.events, Event{Name: "cert-rotation", Failed: true})
	r = s.evaluate(flat(0), hist, 7, true)
	assert.False(t, verdict(t, r, "faults injected").Pass)
	assert.False(t, verdict(t, r, "the run went its whole duration").Pass)
	assert.False(t, r.pass)
}

func verdict(t *testing.T, r result, name string) Verdict {
	t.Helper()
	for _, v := range r.verdicts {
		if v.Name == name {
			return v
		}
	}
	require.Failf(t, "no verdict", "%q among %+v", name, r.verdicts)
	return Verdict{}
}

func TestParseProcTCP(t *testing.T) {
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:24D4 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:24D4 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:9C40 0100007F:1A0B 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
`
	socks, err := parseProcTCP(strings.NewReader(text))
	require.NoError(t, err)
	assert.Equal(t, map[string]tcpSocket{
		"1001": {localPort: 9428, remotePort: 0, state: "0A"},
		"1002": {localPort: 9428, remotePort: 50000, state: tcpEstablished},
		"1003": {localPort: 40000, remotePort: 6667, state: tcpEstablished},
	}, socks)
}

func TestParseStatus(t *testing.T) {
	st := procStats{rss: math.NaN(), rssAnon: math.NaN(), rssFile: math.NaN()}
	parseStatus("Name:\twebhook\nVmRSS:\t   40264 kB\nRssAnon:\t   12372 kB\nRssFile:\t   27892 kB\nRssShmem:\t       0 kB\n", &st)
	assert.Equal(t, 40264.0*1024, st.rss)
	assert.Equal(t, 12372.0*1024, st.rssAnon)
	assert.Equal(t, 27892.0*1024, st.rssFile)
}
