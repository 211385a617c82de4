package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// Following a rollout to its verdict: the states a watcher reads are
// evaluated on every change and judged by a StatusTracker, until the
// rollout is done, paused or stalled, or --timeout ends the watch.

// statusView is what status shows and judges at one moment: one object's
// report, or a ClusterClass cluster's with its objects'.
type statusView interface {
	// report is the report the verdict is about.
	report() *StatusReport
	// setPhase sets the verdict on every report of the view.
	setPhase(phase string, done bool)
	// print writes what changed.
	print(p *StatusPrinter, now time.Time) error
	// writeDone prints the verdict of a rollout done.
	writeDone(out io.Writer) error
	// blocking says what holds the rollout back (the timed-out verdict),
	// stalled after how long it made no progress (the stalled verdict).
	blocking() string
	stalled() string
}

// objectView is one object's rollout.
type objectView struct{ s StatusReport }

func (v *objectView) report() *StatusReport                       { return &v.s }
func (v *objectView) setPhase(phase string, done bool)            { v.s.Phase, v.s.Done = phase, done }
func (v *objectView) print(p *StatusPrinter, now time.Time) error { return p.Print(v.s, now) }
func (v *objectView) blocking() string                            { return blocking(v.s) }
func (v *objectView) stalled() string                             { return blocking(v.s) }
func (v *objectView) writeDone(out io.Writer) error {
	_, err := fmt.Fprintf(out, "%s successfully rolled out%s\n", v.s.Object, revisionText(v.s.Revision))
	return err
}

// follow watches with w until a verdict: it evaluates view on every change
// w reports and at the tracker's deadlines (and, for the live view,
// redraws the elapsed time every second). A watch w cannot keep up ends it
// with its error; the tracker, and so the verdict, carries over every
// resumed watch.
func (o *StatusOptions) follow(ctx context.Context, w *watcher, view func(now time.Time) (statusView, error), p *StatusPrinter) error {
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	w.run(watchCtx)
	tr := &StatusTracker{Grace: o.Grace, ProgressDeadline: o.ProgressDeadline}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var tick <-chan time.Time
	if p.live != nil {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		tick = ticker.C
	}
	var last statusView
	for {
		if w.allSynced() {
			now := time.Now()
			v, err := view(now)
			if err != nil {
				if v != nil {
					v.setPhase(PhaseProgressing, false)
					_ = v.print(p, now)
				}
				return err
			}
			last = v
			s := v.report()
			verdict := tr.Observe(*s, now)
			v.setPhase(verdict.Phase, verdict.Phase == PhaseRolledOut)
			if !s.Done || p.JSON || p.live != nil {
				if err := v.print(p, now); err != nil {
					return err
				}
			}
			switch verdict.Phase {
			case PhaseRolledOut:
				if !p.JSON {
					return v.writeDone(p.Out)
				}
				return nil
			case PhasePaused:
				return core.StatusError{Code: ExitPaused, Msg: fmt.Sprintf("%s is paused (%s): it will not roll out until resumed", s.Object, s.Paused)}
			case PhaseWaitingForDeletion:
				return onDeleteVerdict(*s, s.namespace)
			case PhaseStalled:
				return core.StatusError{Code: ExitStalled, Msg: fmt.Sprintf("%s made no progress for %s (--progress-deadline)%s", s.Object, o.ProgressDeadline, v.stalled())}
			}
			if !verdict.Wake.IsZero() {
				timer.Reset(max(time.Until(verdict.Wake), time.Millisecond))
			}
		}
		if err := o.await(ctx, w, tick, timer.C, p); err != nil {
			return o.endWatch(ctx, err, last, p)
		}
	}
}

// await waits until the view may have changed: a change w reports, or the
// timer; meanwhile it redraws the live view's elapsed time. It returns ctx's
// error when ctx ends, and w's failure.
func (o *StatusOptions) await(ctx context.Context, w *watcher, tick, timer <-chan time.Time, p *StatusPrinter) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-w.failed:
			return err
		case now := <-tick:
			if err := p.live.Tick(now); err != nil {
				return err
			}
		case <-timer:
			return nil
		case <-w.changed:
			return nil
		}
	}
}

// endWatch is the verdict of a watch that ended with err before the
// rollout's own verdict: the --timeout (with the last view, when there is
// one), or the failure.
func (o *StatusOptions) endWatch(ctx context.Context, err error, last statusView, p *StatusPrinter) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || last == nil {
		return o.timedOut(ctx, err)
	}
	if p.JSON || p.live != nil {
		last.setPhase(PhaseTimedOut, false)
		_ = last.print(p, time.Now())
	}
	s := last.report()
	return core.StatusError{Code: ExitTimeout, Msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s); last state: %s%s", s.Object, o.Timeout, s.Summary(), last.blocking())}
}
