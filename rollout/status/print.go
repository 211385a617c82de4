package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// How rollout status prints: a line per change for people (and, on a
// terminal, the live view of live.go), or with -o json one JSON
// object per change.

// Line is the machine's line: "machine NAME: PHASE, not ready: Reason: message",
// or "machine NAME: PHASE, being deleted".
func (m MachineStatus) Line() string {
	s := fmt.Sprintf("machine %s: %s", m.Name, m.Phase)
	if m.Deleting {
		return s + ", being deleted" + m.causeText()
	}
	var what []string
	if m.Updating {
		what = append(what, "updating in place")
	}
	if !m.Ready {
		what = append(what, "not ready")
	}
	if !m.UpToDate && !m.Updating {
		what = append(what, "not up to date")
	}
	if len(what) > 0 {
		s += ", " + strings.Join(what, ", ")
	}
	if why := strings.TrimPrefix(strings.TrimSuffix(m.Reason+": "+m.Message, ": "), ": "); why != "" {
		s += ": " + why
	}
	return s + m.causeText()
}

// causeText is "; replaced because CAUSE" for a machine replaced without an
// edit, "" otherwise.
func (m MachineStatus) causeText() string {
	if m.Cause == "" {
		return ""
	}
	return "; replaced because " + m.Cause
}

// lineKey is what must change for the machine's line to be printed again:
// its line without the message, which Cluster API rewrites often.
func (m MachineStatus) lineKey() string {
	m.Message = ""
	return m.Line()
}

// blocking lists the machines that hold a rollout back, one per line.
func blocking(s StatusReport) string {
	var b strings.Builder
	for _, m := range s.Machines {
		if m.Ready && m.UpToDate && !m.Deleting && !m.Updating {
			continue
		}
		b.WriteString("\n  " + m.Line())
	}
	if b.Len() == 0 {
		return ""
	}
	return "; blocked by:" + b.String()
}

// StatusPrinter prints the states of rollouts, each line only when it
// changed.
type StatusPrinter struct {
	// Out is where it prints; JSON prints one JSON event a line (-o json).
	Out  io.Writer
	JSON bool
	// Last is the last line printed per key (the object's summary, each
	// machine), so that no line is printed twice in a row.
	Last map[string]string
	// live, when set, redraws the live view instead of printing lines.
	live *LiveTerminal
}

// PrintCluster writes what changed in a ClusterClass cluster's report: the
// cluster's line or event, then its objects'.
func (p *StatusPrinter) PrintCluster(r ClusterReport, now time.Time) error {
	if p.live != nil {
		return p.live.showCluster(r, now)
	}
	for _, s := range append([]StatusReport{r.Cluster}, r.Objects...) {
		if err := p.Print(s, now); err != nil {
			return err
		}
	}
	return nil
}

// Print writes what changed in s.
func (p *StatusPrinter) Print(s StatusReport, now time.Time) error {
	if p.live != nil {
		return p.live.Show(s, now)
	}
	if p.JSON {
		s.Time = time.Time{}
		key, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if p.Last[s.Object] == string(key) {
			return nil
		}
		p.Last[s.Object] = string(key)
		s.Time = now.UTC().Truncate(time.Millisecond)
		data, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.Out, "%s\n", data)
		return err
	}
	var lines []string
	if line := s.Object + ": " + s.Summary(); p.Last[s.Object] != line {
		p.Last[s.Object] = line
		lines = append(lines, line)
	}
	for _, m := range s.Machines {
		k := s.Object + " " + m.Name
		key, line := "", ""
		if !m.Ready || m.Updating || m.Cause != "" {
			key, line = m.lineKey(), "  "+m.Line()
		}
		if p.Last[k] != key {
			p.Last[k] = key
			if line != "" {
				lines = append(lines, line)
			}
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(p.Out, l); err != nil {
			return err
		}
	}
	return nil
}

// WriteRolledOut prints the verdict of a cluster rolled out: each of its
// objects, then the cluster.
func WriteRolledOut(out io.Writer, r ClusterReport) error {
	for _, obj := range r.Objects {
		if _, err := fmt.Fprintf(out, "%s successfully rolled out%s\n", obj.Object, revisionText(obj.Revision)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "%s successfully rolled out: %s\n", r.Cluster.Object, r.Cluster.Summary())
	return err
}

// revisionText is " (revision N)", or "" without a revision.
func revisionText(rev string) string {
	if rev == "" {
		return ""
	}
	return " (revision " + rev + ")"
}

// blocking says what holds a cluster's rollout back: the topology
// controller's TopologyReconciled condition, and the machines of each
// object that are not ready, not up to date or being deleted.
func (r ClusterReport) blocking() string {
	var b strings.Builder
	if u := r.Cluster.Upgrade; u != nil && u.TopologyReconciled != "" {
		b.WriteString("\n  TopologyReconciled: " + u.TopologyReconciled)
	}
	for _, s := range r.Objects {
		if m := blocking(s); m != "" {
			b.WriteString("\n  " + s.Object + ":" + strings.ReplaceAll(strings.TrimPrefix(m, "; blocked by:"), "\n  ", "\n    "))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "; blocked by:" + b.String()
}
