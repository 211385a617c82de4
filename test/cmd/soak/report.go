package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
)

// Verdict is one pass criterion and how the run did.
type Verdict struct {
	Name   string
	Pass   bool
	Detail string
}

// result is everything the summary reports.
type result struct {
	pass        bool
	interrupted bool
	warmup      time.Duration
	tally       Tally
	outcomes    []Outcome
	trends      []Trend // RSS, goroutines, fds: judged
	reported    []Trend // heap in use, RSS parts: reported only
	trendErrs   []string
	histories   []objectHistory
	events      []Event
	watchGaps   int
	guardPID    int
	otherPIDs   []int
	samples     int
	excluded    int // samples after warm-up left out of the trends (API server restarts)
	spans       []Span
	verdicts    []Verdict

	loadAtStart, loadAtEnd string
	settled, readyAfter    time.Duration
	first, warm, last      Sample
	ratios                 []string
}

// evaluate computes the trends, tallies the edits and decides.
func (s *soak) evaluate(samples []Sample, histories []objectHistory, guardPID int, interrupted bool) result {
	s.mu.Lock()
	outcomes := append([]Outcome(nil), s.outcomes...)
	windows := append([]Window(nil), s.windows...)
	events := append([]Event(nil), s.events...)
	gaps := s.watchGaps
	s.mu.Unlock()

	r := result{interrupted: interrupted, histories: histories, events: events, watchGaps: gaps, guardPID: guardPID, samples: len(samples)}
	total := samples[len(samples)-1].At
	r.warmup = time.Duration(float64(total) * s.o.warmup)
	r.tally = Count(outcomes, windows)
	r.outcomes = outcomes
	r.first, r.last = samples[0], samples[len(samples)-1]
	for _, smp := range samples {
		if smp.At >= r.warmup {
			r.warm = smp
			break
		}
	}

	judged := []struct {
		name  string
		value func(Sample) float64
		bound Bound
	}{
		{"RSS MiB", func(x Sample) float64 { return x.RSSBytes / mib }, s.o.rssBound},
		{"goroutines", func(x Sample) float64 { return x.Goroutines }, s.o.goroutineBound},
		{"open fds", func(x Sample) float64 { return x.FDs }, s.o.fdBound},
	}
	// Samples taken from a kube-apiserver restart until trendSettle after
	// it was ready again are left out of the trends: the guard is cut off
	// from the API server (its watches end, their goroutines and
	// connections go) and reconnects with client-go's backoff (at most
	// 30 s): a state of the outage rather than of the guard.
	inWindow := func(at time.Duration) bool {
		t := s.begin.Add(at)
		for _, w := range windows {
			if !t.Before(w.From) && !t.After(w.Ready.Add(s.o.trendSettle)) {
				return true
			}
		}
		return false
	}
	steady := func(value func(Sample) float64) []Point {
		pts := series(samples, value)
		for i := range pts {
			if inWindow(pts[i].At) {
				pts[i].Value = math.NaN()
			}
		}
		return pts
	}
	for _, w := range windows {
		r.spans = append(r.spans, Span{From: w.From.Sub(s.begin), To: w.Ready.Add(s.o.trendSettle).Sub(s.begin)})
	}
	for _, smp := range samples {
		if smp.At >= r.warmup && inWindow(smp.At) {
			r.excluded++
		}
	}
	for _, j := range judged {
		t, err := FitTrend(j.name, steady(j.value), r.warmup, j.bound)
		if err != nil {
			r.trendErrs = append(r.trendErrs, err.Error())
			continue
		}
		r.trends = append(r.trends, t)
		r.verdicts = append(r.verdicts, Verdict{Name: "no growth of " + j.name, Pass: t.Pass,
			Detail: fmt.Sprintf("rise over the %s after warm-up %+.2f, bound %.2f (max(%.0f%% of mean %.1f, %g))", t.Span.Round(time.Second), t.Growth, t.Bound, j.bound.Fraction*100, t.Mean, j.bound.Floor)})
	}
	if len(r.trendErrs) > 0 {
		r.verdicts = append(r.verdicts, Verdict{Name: "enough samples for the trends", Pass: false, Detail: strings.Join(r.trendErrs, "; ")})
	}
	for _, rep := range []struct {
		name  string
		value func(Sample) float64
	}{
		{"heap in use MiB", func(x Sample) float64 { return x.HeapInuseBytes / mib }},
		{"RssAnon MiB", func(x Sample) float64 { return x.RSSAnonBytes / mib }},
		{"RssFile MiB", func(x Sample) float64 { return x.RSSFileBytes / mib }},
	} {
		if t, err := FitTrend(rep.name, steady(rep.value), r.warmup, s.o.rssBound); err == nil {
			r.reported = append(r.reported, t)
		}
	}

	pids := map[int]bool{}
	for _, smp := range samples {
		if smp.PID != guardPID {
			pids[smp.PID] = true
		}
	}
	for pid := range pids {
		r.otherPIDs = append(r.otherPIDs, pid)
	}
	r.verdicts = append(r.verdicts, Verdict{Name: "one guard process throughout", Pass: guardPID != 0 && len(r.otherPIDs) == 0,
		Detail: fmt.Sprintf("pid %d in every sample%s", guardPID, map[bool]string{true: "", false: fmt.Sprintf("; also saw %v", r.otherPIDs)}[len(r.otherPIDs) == 0])})

	var missing []string
	for _, k := range []string{kindTemplate, kindVersion, kindTemplateLabel, kindLabel, kindRestart} {
		if r.tally.OK[k] == 0 {
			missing = append(missing, k)
		}
	}
	r.verdicts = append(r.verdicts, Verdict{Name: "the load ran", Pass: len(missing) == 0,
		Detail: fmt.Sprintf("%d edits made, %d succeeded%s", r.tally.Total(), r.tally.Succeeded(), map[bool]string{true: "", false: "; no successful " + strings.Join(missing, ", ")}[len(missing) == 0])})
	r.verdicts = append(r.verdicts, Verdict{Name: "no failed policed edit while the guard was up", Pass: len(r.tally.GuardFailures) == 0,
		Detail: fmt.Sprintf("%d of %d policed edits failed outside the API server restart windows (false refusals included)", len(r.tally.GuardFailures), r.tally.PolicedMade())})

	var problems, notes []string
	for _, h := range histories {
		problems = append(problems, h.check.Problems...)
		notes = append(notes, h.notes...)
	}
	detail := fmt.Sprintf("%d objects: every persisted content recorded under every number it was stamped with, no number naming two contents", len(histories))
	if len(problems) > 0 {
		detail = strings.Join(problems, "; ")
	}
	r.verdicts = append(r.verdicts, Verdict{Name: "history complete", Pass: len(problems) == 0, Detail: detail})

	var apiRestarts, rotations, failedFaults int
	for _, e := range events {
		switch {
		case e.Failed:
			failedFaults++
		case e.Name == "apiserver-restart":
			apiRestarts++
		case e.Name == "cert-rotation":
			rotations++
		}
	}
	r.verdicts = append(r.verdicts, Verdict{Name: "faults injected", Pass: failedFaults == 0 && apiRestarts > 0 && rotations > 0,
		Detail: fmt.Sprintf("%d kube-apiserver restarts, %d certificate rotations, %d failed", apiRestarts, rotations, failedFaults)})
	if interrupted {
		r.verdicts = append(r.verdicts, Verdict{Name: "the run went its whole duration", Pass: false, Detail: "interrupted"})
	}
	r.pass = true
	for _, v := range r.verdicts {
		r.pass = r.pass && v.Pass
	}

	// API requests per edit, over the whole load and over the two halves
	// of the measured span (a rise from one half to the other is a leak of
	// requests: a loop, a relist storm).
	mid := r.warmup + (total-r.warmup)/2
	for _, q := range []struct {
		what  string
		value func(Sample) float64
		per   func(Sample) float64
		unit  string
	}{
		{"API server requests (apiserver_request_total, every client)", func(x Sample) float64 { return x.APIRequests }, func(x Sample) float64 { return float64(x.Edits) }, "per successful edit"},
		{"of which RolloutRevision requests (the guard's history)", func(x Sample) float64 { return x.CRRequests }, func(x Sample) float64 { return float64(x.PolicedEdits) }, "per successful policed edit"},
		{"calls of the guard's webhooks by the API server", func(x Sample) float64 { return x.WebhookCalls }, func(x Sample) float64 { return float64(x.PolicedEdits) }, "per successful policed edit"},
		{"the guard's own API requests (its rest_client_requests_total; metrics reviews included)", func(x Sample) float64 { return x.GuardRequests }, func(x Sample) float64 { return float64(x.PolicedEdits) }, "per successful policed edit"},
	} {
		all := Ratio(samples, q.value, q.per, 0, total)
		h1 := Ratio(samples, q.value, q.per, r.warmup, mid)
		h2 := Ratio(samples, q.value, q.per, mid, total)
		r.ratios = append(r.ratios, fmt.Sprintf("%s: %s %s over the run; %s in the first half of the measured span, %s in the second",
			q.what, ratioText(all), q.unit, ratioText(h1), ratioText(h2)))
	}
	return r
}

// minSteadySamples is how many samples after the warm-up and outside the
// restart windows a trend verdict needs to mean something (2 minutes of
// steady state at the default 5 s); fewer earn a caution in the summary.
const minSteadySamples = 24

// Ratio is the rise of value over the rise of per between the first and
// the last samples in [from, to] where both are known; NaN when per did
// not rise.
func Ratio(samples []Sample, value, per func(Sample) float64, from, to time.Duration) float64 {
	var a, b *Sample
	for i := range samples {
		x := &samples[i]
		if x.At < from || x.At > to || math.IsNaN(value(*x)) || math.IsNaN(per(*x)) {
			continue
		}
		if a == nil {
			a = x
		}
		b = x
	}
	if a == nil || per(*b) <= per(*a) {
		return math.NaN()
	}
	return (value(*b) - value(*a)) / (per(*b) - per(*a))
}

func ratioText(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func nanOf() float64 { return math.NaN() }

func zeroIfNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// print writes the summary.
func (r result) print(w io.Writer, s *soak) {
	o := s.o
	fmt.Fprintf(w, "# rollout-guard soak, %s\n\n", s.begin.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "machine: %s, %d CPUs; load average %s at the start, %s at the end\n", report.CPUModel(), runtime.NumCPU(), r.loadAtStart, r.loadAtEnd)
	fmt.Fprintf(w, "sandbox: demo cluster of %d control-plane + %d worker machines (machine start-up step %s), ready after %s; guard pid %d\n",
		o.controlPlaneMachines, o.workerMachines, o.machineStartup, r.readyAfter.Round(100*time.Millisecond), r.guardPID)
	fmt.Fprintf(w, "load: %s; %d writers (mean pause %s) on pools %s, the control plane every %s; rollout restart every %s of %s (every 4th of %s); kube-apiserver restart every %s (down %s; failures until %s after ready count as the restart's); certificate rotation every %s\n",
		r.last.At.Round(time.Second), o.writers, o.editPause, strings.Join(s.pools, ", "), o.kcpEvery, o.restartEvery, s.restartPool, s.demo.MachineDeploymentName(), o.apiEvery, o.apiDown, o.restartGrace, o.rotateEvery)
	fmt.Fprintf(w, "samples: %d, every %s; left out of the trends: the warm-up, the first %s (%.0f%%), and %d later samples taken from a kube-apiserver restart until %s after it was ready\n",
		r.samples, o.sampleEvery, r.warmup.Round(time.Second), o.warmup*100, r.excluded, o.trendSettle)

	fmt.Fprintf(w, "\n## Faults\n\n")
	for _, e := range r.events {
		fmt.Fprintf(w, "- %7s %s: %s\n", e.At.Round(time.Second), e.Name, e.Detail)
	}

	fmt.Fprintf(w, "\n## Edits\n\n| kind | policed | made | succeeded | failed |\n|---|---|---|---|---|\n")
	for _, k := range sortedKeys(r.tally.Made) {
		fmt.Fprintf(w, "| %s | %v | %d | %d | %d |\n", k, policed(k), r.tally.Made[k], r.tally.OK[k], r.tally.Made[k]-r.tally.OK[k])
	}
	fmt.Fprintf(w, "| all | | %d | %d | %d |\n", r.tally.Total(), r.tally.Succeeded(), r.tally.Total()-r.tally.Succeeded())
	if len(r.tally.Failed) > 0 {
		fmt.Fprintf(w, "\nfailures by class:\n")
		for _, c := range sortedKeys(r.tally.Failed) {
			var byKind []string
			for _, k := range sortedKeys(r.tally.FailedByKind[c]) {
				byKind = append(byKind, fmt.Sprintf("%s %d", k, r.tally.FailedByKind[c][k]))
			}
			against := "expected, not the guard's"
			if guardFailure(c) {
				against = "COUNTS AGAINST THE GUARD (for policed edits)"
			}
			fmt.Fprintf(w, "- %s: %d (%s) — %s\n", c, r.tally.Failed[c], strings.Join(byKind, ", "), against)
			for _, ex := range r.tally.Examples[c] {
				fmt.Fprintf(w, "    e.g. %s\n", ex)
			}
		}
	}

	fmt.Fprintf(w, "\n## API requests per edit\n\n")
	for _, line := range r.ratios {
		fmt.Fprintf(w, "- %s\n", line)
	}
	fmt.Fprintf(w, "(kube-apiserver's counters restart with it: what it counted between the last sample before a restart and the restart is missed.)\n")

	fmt.Fprintf(w, "\n## The guard\n\n| | at start | end of warm-up (%s) | at end |\n|---|---|---|---|\n", r.warm.At.Round(time.Second))
	row := func(name string, v func(Sample) float64, prec int) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, num(v(r.first), prec), num(v(r.warm), prec), num(v(r.last), prec))
	}
	row("RSS MiB", func(x Sample) float64 { return x.RSSBytes / mib }, 1)
	row("of which RssAnon MiB", func(x Sample) float64 { return x.RSSAnonBytes / mib }, 1)
	row("of which RssFile MiB (the binary's pages)", func(x Sample) float64 { return x.RSSFileBytes / mib }, 1)
	row("heap in use MiB", func(x Sample) float64 { return x.HeapInuseBytes / mib }, 1)
	row("goroutines", func(x Sample) float64 { return x.Goroutines }, 0)
	row("open fds", func(x Sample) float64 { return x.FDs }, 0)
	row("connections from kube-apiserver (webhook port)", func(x Sample) float64 { return x.WebhookConns }, 0)
	row("connections to kube-apiserver", func(x Sample) float64 { return x.APIConns }, 0)
	fmt.Fprintln(w)
	for _, t := range r.trends {
		fmt.Fprintf(w, "- %s\n", t)
	}
	if len(r.trends) > 0 && r.trends[0].N < minSteadySamples {
		fmt.Fprintf(w, "- CAUTION: only %d steady samples after the warm-up (fewer than %d): in a run this short, faults leave little steady time and the trend verdicts mean little; judge leaks on the default 30 minutes\n",
			r.trends[0].N, minSteadySamples)
	}
	fmt.Fprintf(w, "- decisions the guard made from live reads because one of its watches was down (rollout_guard_live_decisions_total): %s over the run\n", num(r.last.LiveDecisions, 0))
	for _, t := range r.reported {
		fmt.Fprintf(w, "- (reported, not judged) %s\n", strings.TrimPrefix(strings.TrimPrefix(t.String(), "PASS "), "FAIL "))
	}
	for _, e := range r.trendErrs {
		fmt.Fprintf(w, "- %s\n", e)
	}

	fmt.Fprintf(w, "\n## History\n\n| object | contents persisted | revisions recorded | highest revision number | longest number list of one revision | restarts recorded | problems |\n|---|---|---|---|---|---|---|\n")
	for _, h := range r.histories {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d |\n", h.object, h.check.Contents, h.check.Recorded, h.highest, h.longestList, h.restarts, len(h.check.Problems))
	}
	fmt.Fprintf(w, "history settled %s after the load; watch gaps (410 Gone after an API server restart, relisted): %d\n", r.settled.Round(time.Second), r.watchGaps)
	for _, h := range r.histories {
		for _, p := range h.check.Problems {
			fmt.Fprintf(w, "- PROBLEM %s\n", p)
		}
		for _, n := range h.notes {
			fmt.Fprintf(w, "- note: %s\n", n)
		}
	}

	fmt.Fprintf(w, "\n## Verdicts\n\n")
	for _, v := range r.verdicts {
		fmt.Fprintf(w, "- %s %s: %s\n", map[bool]string{true: "PASS", false: "FAIL"}[v.Pass], v.Name, v.Detail)
	}
	fmt.Fprintf(w, "\nsoak: %s\n", map[bool]string{true: "PASS", false: "FAIL"}[r.pass])
}

// writeOutcomes writes every edit as CSV.
func writeOutcomes(w io.Writer, begin time.Time, outcomes []Outcome) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"start_seconds", "took_ms", "writer", "kind", "object", "class", "error"}); err != nil {
		return err
	}
	for _, o := range outcomes {
		err := cw.Write([]string{
			strconv.FormatFloat(o.Start.Sub(begin).Seconds(), 'f', 3, 64),
			strconv.FormatInt(o.End.Sub(o.Start).Milliseconds(), 10),
			o.Writer, o.Kind, o.Object, o.Class, o.Err,
		})
		if err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// plot is the figure of the run: memory, goroutines and descriptors.
func (s *soak) plot(samples []Sample, r result) Plot {
	var markers []Marker
	for _, e := range r.events {
		c := colRed
		if e.Name == "cert-rotation" {
			c = colPurple
		}
		markers = append(markers, Marker{At: e.At, Color: c})
	}
	trendOf := func(name string) *Trend {
		for i := range r.trends {
			if r.trends[i].Name == name {
				return &r.trends[i]
			}
		}
		return nil
	}
	return Plot{
		Width: s.o.plotWidth, Height: s.o.plotHeight,
		Title: fmt.Sprintf("rollout-guard soak: %s, %d edits", r.last.At.Round(time.Second), r.tally.Total()),
		Legend: []LegendItem{
			{"RSS, goroutines, fds", colBlue}, {"heap in use; conns from API server", colOrange}, {"conns to API server", colTeal}, {"trend after warm-up", colGreen},
			{"API server restart", colRed}, {"certificate rotation", colPurple}, {"left out of the trends (warm-up, API server restarts)", colWarmup},
		},
		Panels: []Panel{
			{Title: "guard memory (MiB)", Lines: []Line{
				{Points: series(samples, func(x Sample) float64 { return x.RSSBytes / mib }), Color: colBlue},
				{Points: series(samples, func(x Sample) float64 { return x.HeapInuseBytes / mib }), Color: colOrange},
			}, Trend: trendOf("RSS MiB")},
			{Title: "guard goroutines", Lines: []Line{{Points: series(samples, func(x Sample) float64 { return x.Goroutines }), Color: colBlue}}, Trend: trendOf("goroutines")},
			{Title: "guard open file descriptors; its connections from and to kube-apiserver", Lines: []Line{
				{Points: series(samples, func(x Sample) float64 { return x.FDs }), Color: colBlue},
				{Points: series(samples, func(x Sample) float64 { return x.WebhookConns }), Color: colOrange},
				{Points: series(samples, func(x Sample) float64 { return x.APIConns }), Color: colTeal},
			}, Trend: trendOf("open fds")},
		},
		Markers:  markers,
		Warmup:   r.warmup,
		Excluded: r.spans,
		Total:    r.last.At,
	}
}
