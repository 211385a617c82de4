package main

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Reporter shows the steps as they run.
type Reporter interface {
	// Begin is given the whole plan before anything runs.
	Begin(steps []Step)
	// UpToDate says step n of total was skipped: its binary is current.
	UpToDate(n, total int, s Step)
	// Start says step n of total is building; the build reports to the
	// StepProgress returned.
	Start(n, total int, s Step) StepProgress
	// Wait returns once everything reported is shown.
	Wait()
}

// StepProgress is the display of one running build.
type StepProgress interface {
	BuildEvents
	Done(took time.Duration)
	Failed(err error)
}

// stepPrefix is "[n/total]", n counted from 1.
func stepPrefix(n, total int) string { return fmt.Sprintf("[%d/%d]", n+1, total) }

// roundDuration rounds a step's time for its line: tenths of a second
// under a minute, seconds above.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// PlainReporter writes a line when a step starts and one when it ends:
// for logs and anything that is not a terminal.
type PlainReporter struct {
	mu  sync.Mutex
	out io.Writer
}

// NewPlainReporter reports to out.
func NewPlainReporter(out io.Writer) *PlainReporter { return &PlainReporter{out: out} }

func (p *PlainReporter) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}

// Begin implements Reporter: the plain lines come as the steps do.
func (p *PlainReporter) Begin([]Step) {}

// UpToDate implements Reporter.
func (p *PlainReporter) UpToDate(n, total int, s Step) {
	p.printf("%s %s: up to date\n", stepPrefix(n, total), s.Label())
}

// Start implements Reporter.
func (p *PlainReporter) Start(n, total int, s Step) StepProgress {
	p.printf("%s building %s …\n", stepPrefix(n, total), s.Label())
	return &plainStep{r: p, prefix: stepPrefix(n, total), step: s}
}

// Wait implements Reporter.
func (p *PlainReporter) Wait() {}

type plainStep struct {
	r         *PlainReporter
	prefix    string
	step      Step
	compiled  atomic.Int64
	downloads atomic.Int64
}

func (s *plainStep) Listed(int)         {}
func (s *plainStep) Downloading(string) { s.downloads.Add(1) }
func (s *plainStep) Compiled(string)    { s.compiled.Add(1) }
func (s *plainStep) Failed(err error) {
	s.r.printf("%s %s: %s\n", s.prefix, s.step.Label(), failure(err))
}
func (s *plainStep) Done(took time.Duration) {
	s.r.printf("%s %s: built in %s%s\n", s.prefix, s.step.Label(), roundDuration(took), s.counts())
}

func (s *plainStep) counts() string { return counts(s.compiled.Load(), s.downloads.Load()) }

// counts is what a finished build did, for its line.
func counts(c, d int64) string {
	switch {
	case c == 0 && d == 0:
		return " (nothing to compile)"
	case d == 0:
		return fmt.Sprintf(" (%d packages compiled)", c)
	}
	return fmt.Sprintf(" (%d packages compiled, %d modules downloaded)", c, d)
}

// BarReporter shows the plan on a terminal (mpb): a row per step, in plan
// order, that waits, then is a progress bar while its build runs — its
// packages compiled out of those it may compile, the module being
// downloaded, the time so far — and ends as the step's result.
type BarReporter struct {
	p     *mpb.Progress
	steps []*barStep
}

// NewBarReporter draws on out, a terminal.
func NewBarReporter(out io.Writer) *BarReporter {
	return &BarReporter{p: mpb.New(mpb.WithOutput(out), mpb.WithWidth(32), mpb.WithRefreshRate(200*time.Millisecond))}
}

// Begin implements Reporter: a waiting row per step.
func (b *BarReporter) Begin(steps []Step) {
	for i, s := range steps {
		st := &barStep{prefix: stepPrefix(i, len(steps)), step: s}
		st.label.Store(st.prefix + " " + s.Label())
		st.status.Store("waiting")
		st.bar = b.p.New(0, mpb.BarStyle().Lbound("[").Rbound("]"),
			mpb.BarFillerClearOnComplete(),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return st.label.Load().(string) + " " }, decor.WCSyncSpaceR)),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return " " + st.elapsed() + st.status.Load().(string) })),
		)
		b.steps = append(b.steps, st)
	}
}

// UpToDate implements Reporter.
func (b *BarReporter) UpToDate(n, total int, s Step) {
	st := b.steps[n]
	st.label.Store(st.prefix + " " + s.Label() + ": up to date")
	st.status.Store("")
	st.bar.SetTotal(-1, true)
}

// Start implements Reporter.
func (b *BarReporter) Start(n, total int, s Step) StepProgress {
	st := b.steps[n]
	st.start.Store(time.Now())
	st.label.Store(st.prefix + " building " + s.Label())
	st.status.Store("starting go build")
	return st
}

// Wait implements Reporter.
func (b *BarReporter) Wait() { b.p.Wait() }

type barStep struct {
	bar       *mpb.Bar
	prefix    string
	step      Step
	label     atomic.Value // string
	status    atomic.Value // string
	start     atomic.Value // time.Time, once started
	done      atomic.Bool
	listed    atomic.Int64
	compiled  atomic.Int64
	downloads atomic.Int64
}

// elapsed is the running step's time so far, "" before it starts and once
// it is done (its status then says how long it took).
func (s *barStep) elapsed() string {
	start, ok := s.start.Load().(time.Time)
	if !ok || s.done.Load() {
		return ""
	}
	return fmt.Sprintf("%6s ", time.Since(start).Round(time.Second))
}

func (s *barStep) Listed(total int) {
	s.listed.Store(int64(total))
	s.bar.SetTotal(int64(total), false)
	s.update()
}

func (s *barStep) Downloading(module string) {
	s.downloads.Add(1)
	s.status.Store(fmt.Sprintf("downloading %s (%d modules)", module, s.downloads.Load()))
}

func (s *barStep) Compiled(string) {
	s.compiled.Add(1)
	s.bar.Increment()
	s.update()
}

func (s *barStep) update() {
	if l := s.listed.Load(); l > 0 {
		s.status.Store(fmt.Sprintf("%d/%d packages", s.compiled.Load(), l))
	} else {
		s.status.Store(fmt.Sprintf("%d packages", s.compiled.Load()))
	}
}

func (s *barStep) Done(took time.Duration) {
	s.done.Store(true)
	s.label.Store(s.prefix + " " + s.step.Label() + ":")
	s.status.Store("built in " + roundDuration(took).String() + counts(s.compiled.Load(), s.downloads.Load()))
	s.bar.SetTotal(-1, true)
}

func (s *barStep) Failed(err error) {
	s.done.Store(true)
	s.label.Store(s.prefix + " " + s.step.Label() + ":")
	s.status.Store(failure(err))
	s.bar.Abort(false)
}

// failure is what a step's line says when its build did not finish.
func failure(err error) string {
	if errors.Is(err, ErrInterrupted) {
		return "interrupted"
	}
	return "failed"
}
