package status

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// barWidth is the width of a progress bar, in cells; every bar is scaled
// to the larger of spec.replicas and the number of machines, so a surge
// shows as available short of full while the machines bar is full.
const barWidth = 24

// RenderLive draws the live view of one rollout's state s, elapsed after
// status started, for a terminal width columns wide and height lines high.
// It is a pure function of its arguments: the terminal code only moves the
// cursor and writes what it returns. Lines never exceed width (so none
// wraps and the redraw can move up over exactly the lines it drew), and
// there are at most height-1 of them (the cursor cannot move above the
// top of the screen); machines that do not fit are counted on the last line.
func RenderLive(s StatusReport, elapsed time.Duration, width, height int) []string {
	head := s.Object
	if s.Revision != "" {
		head += "  revision " + s.Revision
	}
	lines := append([]string{head + "  " + phaseOf(s) + "  elapsed " + elapsed.Truncate(time.Second).String()}, liveBody(s)...)
	machineLines := liveMachines(s, false)
	if room := height - 1 - len(lines); height > 0 && len(machineLines) > room {
		hidden := len(machineLines) - max(room-1, 0)
		machineLines = append(machineLines[:max(room-1, 0)], fmt.Sprintf("  ... %d more %s", hidden, core.Plural(hidden, "machine", "machines")))
		if room <= 0 {
			machineLines = nil
		}
	}
	lines = append(lines, machineLines...)
	return fitLines(lines, width, height)
}

// phaseOf is the report's phase, Progressing until one is set.
func phaseOf(s StatusReport) string {
	if s.Phase == "" {
		return PhaseProgressing
	}
	return s.Phase
}

// fitLines cuts lines to height-1 lines (the cursor cannot move above the
// top of the screen) and each line to width; 0 leaves either whole.
func fitLines(lines []string, width, height int) []string {
	if height > 0 && len(lines) > height-1 {
		lines = lines[:max(height-1, 0)]
	}
	for i, l := range lines {
		lines[i] = truncate(l, width)
	}
	return lines
}

// liveBody is the view of one object below its head: the summary line,
// the progress bars and a MachineDeployment's MachineSets.
func liveBody(s StatusReport) []string {
	lines := []string{"  " + s.Summary()}
	scale := max(int(s.Replicas), len(s.Machines), 1)
	bar := func(label string, n int) string {
		fill := min(barWidth, (n*barWidth+scale/2)/scale)
		return fmt.Sprintf("  %-10s [%s%s] %d/%d", label, strings.Repeat("#", fill), strings.Repeat(".", barWidth-fill), n, s.Replicas)
	}
	lines = append(lines,
		bar("up to date", int(s.UpToDate)),
		bar("available", int(s.Available)),
		bar("machines", len(s.Machines)),
	)
	for _, ms := range s.MachineSets {
		age := "old"
		if ms.New {
			age = "new"
		}
		// No revision here: Cluster API numbers MachineSets apart from
		// rollout-guard's revisions in the header, and two numbers would
		// only confuse.
		lines = append(lines, fmt.Sprintf("  machineset %s  %s  wants %d, has %d, %d up to date, %d available", ms.Name, age, ms.Replicas, ms.Current, ms.UpToDate, ms.Available))
	}
	return lines
}

// liveMachines is one line per machine: new or old, name, phase, state;
// with onlyPending, only the machines that are old, not ready or not up to
// date.
func liveMachines(s StatusReport, onlyPending bool) []string {
	nameW, phaseW := 0, 0
	for _, m := range s.Machines {
		nameW, phaseW = max(nameW, len(m.Name)), max(phaseW, len(m.Phase))
	}
	lines := make([]string, 0, len(s.Machines))
	for _, m := range s.Machines {
		if onlyPending && m.Ready && m.UpToDate && !m.Deleting && !m.Old && !m.Updating {
			continue
		}
		age := "new"
		if m.Old {
			age = "old"
		}
		lines = append(lines, fmt.Sprintf("  %s  %-*s  %-*s  %s", age, nameW, m.Name, phaseW, m.Phase, machineState(m)))
	}
	return lines
}

// RenderLiveCluster draws the live view of a ClusterClass cluster's state
// r, elapsed after status started, for a terminal width columns wide and
// height lines high: the cluster's head and summary, the steps of its
// upgrade (done, now, next), the TopologyReconciled condition while it is
// not True, then each object as RenderLive draws it, under a head with its
// revision, version and its machines' versions. Like RenderLive it is pure,
// no line exceeds width and there are at most height-1 lines: when the
// whole view does not fit, each object shows only its summary and the
// machines that are not ready, not up to date or old, and then the view is
// cut.
func RenderLiveCluster(r ClusterReport, elapsed time.Duration, width, height int) []string {
	s := r.Cluster
	lines := []string{s.Object + "  " + phaseOf(s) + "  elapsed " + elapsed.Truncate(time.Second).String(), "  " + s.Summary()}
	versions := map[string]PartVersion{}
	if u := s.Upgrade; u != nil {
		verW := 0
		for _, st := range u.Steps {
			verW = max(verW, len(st.Version))
		}
		for _, st := range u.Steps {
			mark := "next"
			switch {
			case st.Current:
				mark = "now"
			case st.State == StepRolledOut:
				mark = "done"
			}
			lines = append(lines, fmt.Sprintf("  %-4s  %-*s  %-13s  %s", mark, verW, st.Version, core.PartName(st.Part), st.stateText()))
		}
		if u.TopologyReconciled != "" {
			lines = append(lines, "  TopologyReconciled: "+u.TopologyReconciled)
		}
		if u.ControlPlane != nil {
			versions[u.ControlPlane.Object] = *u.ControlPlane
		}
		for _, w := range u.Workers {
			versions[w.Object] = w
		}
	}
	objects := func(compact bool) []string {
		var out []string
		for _, o := range r.Objects {
			head := o.Object
			if o.Revision != "" {
				head += "  revision " + o.Revision
			}
			if v, ok := versions[o.Object]; ok {
				head += "  version " + core.OrNone(v.Version)
				if len(v.Machines) > 0 {
					head += "  machines " + versionsText(v.Machines)
				}
			}
			out = append(out, head)
			if compact {
				out = append(out, "  "+o.Summary())
			} else {
				out = append(out, liveBody(o)...)
			}
			out = append(out, liveMachines(o, compact)...)
		}
		return out
	}
	all := append(append([]string(nil), lines...), objects(false)...)
	if height > 0 && len(all) > height-1 {
		all = append(lines, objects(true)...)
	}
	if height > 0 && len(all) > height-1 {
		hidden := len(all) - max(height-2, 0)
		all = append(all[:max(height-2, 0)], fmt.Sprintf("  ... %d more %s", hidden, core.Plural(hidden, "line", "lines")))
	}
	return fitLines(all, width, height)
}

// machineState is what the live view says of a machine after its phase:
// "ready", "being deleted", or what is missing and why.
func machineState(m MachineStatus) string {
	if m.Deleting {
		return "being deleted"
	}
	var what []string
	if m.Ready {
		what = append(what, "ready")
	} else {
		what = append(what, "not ready")
	}
	if !m.UpToDate {
		what = append(what, "not up to date")
	}
	line := strings.Join(what, ", ")
	if why := strings.TrimPrefix(strings.TrimSuffix(m.Reason+": "+m.Message, ": "), ": "); why != "" && (!m.Ready || !m.UpToDate) {
		line += ": " + why
	}
	return line
}

// truncate cuts s to width runes, marking the cut with "…"; width <= 0
// leaves s whole.
func truncate(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

// LiveTerminal redraws the live view in place on a terminal.
type LiveTerminal struct {
	// Out is the terminal, FD its file descriptor (for its width), Start
	// when status started (the elapsed time shown).
	Out   io.Writer
	FD    int
	Start time.Time
	// object is the object drawn last and render draws its last state;
	// drawn is how many lines it took (the cursor is at the start of the
	// line below them).
	object string
	render func(elapsed time.Duration, width, height int) []string
	drawn  int
}

// NewLiveTerminal returns the live view on out, or nil when out is not a
// terminal (then status prints one line per change).
func NewLiveTerminal(out io.Writer, start time.Time) *LiveTerminal {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &LiveTerminal{Out: out, FD: int(f.Fd()), Start: start}
}

// Show draws state s; a new object starts a new view below the previous
// one's last frame and verdict.
func (l *LiveTerminal) Show(s StatusReport, now time.Time) error {
	return l.showFrame(s.Object, func(elapsed time.Duration, width, height int) []string {
		return RenderLive(s, elapsed, width, height)
	}, now)
}

// showCluster draws the state of a ClusterClass cluster.
func (l *LiveTerminal) showCluster(r ClusterReport, now time.Time) error {
	return l.showFrame(r.Cluster.Object, func(elapsed time.Duration, width, height int) []string {
		return RenderLiveCluster(r, elapsed, width, height)
	}, now)
}

func (l *LiveTerminal) showFrame(object string, render func(time.Duration, int, int) []string, now time.Time) error {
	if l.render != nil && l.object != object {
		l.drawn = 0
	}
	l.object, l.render = object, render
	return l.draw(now)
}

// Tick redraws the last state with the new elapsed time.
func (l *LiveTerminal) Tick(now time.Time) error {
	if l == nil || l.render == nil {
		return nil
	}
	return l.draw(now)
}

// draw moves the cursor up over the previous frame, clears to the end of
// the screen and writes the new frame.
func (l *LiveTerminal) draw(now time.Time) error {
	width, height, err := term.GetSize(l.FD)
	if err != nil || width <= 0 {
		width, height = 80, 24
	}
	var b strings.Builder
	if l.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", l.drawn)
	}
	b.WriteString("\x1b[J")
	lines := l.render(now.Sub(l.Start), width-1, height)
	for _, line := range lines {
		b.WriteString(line + "\n")
	}
	l.drawn = len(lines)
	_, err = io.WriteString(l.Out, b.String())
	if err != nil {
		return fmt.Errorf("drawing the live view: %w", err)
	}
	return nil
}
