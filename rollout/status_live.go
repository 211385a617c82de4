package rollout

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
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
	phase := s.Phase
	if phase == "" {
		phase = PhaseProgressing
	}
	head += "  " + phase + "  elapsed " + elapsed.Truncate(time.Second).String()
	lines := []string{head, "  " + s.Summary()}

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
	nameW, phaseW := 0, 0
	for _, m := range s.Machines {
		nameW, phaseW = max(nameW, len(m.Name)), max(phaseW, len(m.Phase))
	}
	machineLines := make([]string, 0, len(s.Machines))
	for _, m := range s.Machines {
		age := "new"
		if m.old {
			age = "old"
		}
		machineLines = append(machineLines, fmt.Sprintf("  %s  %-*s  %-*s  %s", age, nameW, m.Name, phaseW, m.Phase, machineState(m)))
	}
	if room := height - 1 - len(lines); height > 0 && len(machineLines) > room {
		hidden := len(machineLines) - max(room-1, 0)
		machineLines = append(machineLines[:max(room-1, 0)], fmt.Sprintf("  ... %d more %s", hidden, plural(hidden, "machine", "machines")))
		if room <= 0 {
			machineLines = nil
		}
	}
	lines = append(lines, machineLines...)
	if height > 0 && len(lines) > height-1 {
		lines = lines[:max(height-1, 0)]
	}
	for i, l := range lines {
		lines[i] = truncate(l, width)
	}
	return lines
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

// liveTerminal redraws the live view in place on a terminal.
type liveTerminal struct {
	out   io.Writer
	fd    int
	start time.Time
	// last is the state drawn last; drawn is how many lines it took
	// (the cursor is at the start of the line below them).
	last  *StatusReport
	drawn int
}

// newLiveTerminal returns the live view on out, or nil when out is not a
// terminal (then status prints one line per change).
func newLiveTerminal(out io.Writer, start time.Time) *liveTerminal {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &liveTerminal{out: out, fd: int(f.Fd()), start: start}
}

// show draws state s; a new object starts a new view below the previous
// one's last frame and verdict.
func (l *liveTerminal) show(s StatusReport, now time.Time) error {
	if l.last != nil && l.last.Object != s.Object {
		l.drawn = 0
	}
	l.last = &s
	return l.draw(now)
}

// tick redraws the last state with the new elapsed time.
func (l *liveTerminal) tick(now time.Time) error {
	if l == nil || l.last == nil {
		return nil
	}
	return l.draw(now)
}

// draw moves the cursor up over the previous frame, clears to the end of
// the screen and writes the new frame.
func (l *liveTerminal) draw(now time.Time) error {
	width, height, err := term.GetSize(l.fd)
	if err != nil || width <= 0 {
		width, height = 80, 24
	}
	var b strings.Builder
	if l.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", l.drawn)
	}
	b.WriteString("\x1b[J")
	lines := RenderLive(*l.last, now.Sub(l.start), width-1, height)
	for _, line := range lines {
		b.WriteString(line + "\n")
	}
	l.drawn = len(lines)
	_, err = io.WriteString(l.out, b.String())
	if err != nil {
		return fmt.Errorf("drawing the live view: %w", err)
	}
	return nil
}
