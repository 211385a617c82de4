package main

import (
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
func (s *plainStep) Failed(err error)   { s.r.printf("%s %s: failed\n", s.prefix, s.step.Label()) }
func (s *plainStep) Done(took time.Duration) {
	s.r.printf("%s %s: built in %s%s\n", s.prefix, s.step.Label(), roundDuration(took), s.counts())
}

func (s *plainStep) counts() string {
	c, d := s.compiled.Load(), s.downloads.Load()
	switch {
	case c == 0 && d == 0:
		return " (nothing to compile)"
	case d == 0:
		return fmt.Sprintf(" (%d packages compiled)", c)
	}
	return fmt.Sprintf(" (%d packages compiled, %d modules downloaded)", c, d)
}

// BarReporter shows each running build as a progress bar on a terminal
// (mpb): the step, its packages compiled out of those it may compile, the
// modules being downloaded and the time so far.
type BarReporter struct {
	p *mpb.Progress
}

// NewBarReporter draws on out, a terminal.
func NewBarReporter(out io.Writer) *BarReporter {
	return &BarReporter{p: mpb.New(mpb.WithOutput(out), mpb.WithWidth(32), mpb.WithRefreshRate(200*time.Millisecond))}
}

// UpToDate implements Reporter: a bar born complete, so that the steps
// stay in their order on the screen.
func (b *BarReporter) UpToDate(n, total int, s Step) {
	bar := b.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Name(stepPrefix(n, total)+" "+s.Label()+": up to date")))
	bar.SetTotal(-1, true)
}

// Start implements Reporter: a bar for the step, which stays with its time
// once the step is done.
func (b *BarReporter) Start(n, total int, s Step) StepProgress {
	st := &barStep{}
	st.status.Store("starting go build")
	prefix := stepPrefix(n, total)
	st.bar = b.p.New(0, mpb.BarStyle().Lbound("[").Rbound("]"),
		mpb.BarFillerClearOnComplete(),
		mpb.PrependDecorators(
			decor.Name(prefix+" "),
			decor.OnCompleteMeta(decor.Name("building "+s.Label()), func(string) string { return s.Label() }),
			decor.Name(" "),
		),
		mpb.AppendDecorators(
			decor.OnComplete(decor.Elapsed(decor.ET_STYLE_GO, decor.WC{W: 6}), ""),
			decor.Any(func(decor.Statistics) string { return " " + st.status.Load().(string) }),
		),
	)
	return st
}

// Wait implements Reporter.
func (b *BarReporter) Wait() { b.p.Wait() }

type barStep struct {
	bar       *mpb.Bar
	status    atomic.Value // string
	listed    atomic.Int64
	compiled  atomic.Int64
	downloads atomic.Int64
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
	s.status.Store(fmt.Sprintf("built in %s (%d packages compiled)", roundDuration(took), s.compiled.Load()))
	s.bar.SetTotal(-1, true)
}

func (s *barStep) Failed(err error) {
	s.status.Store("failed")
	s.bar.Abort(false)
}
