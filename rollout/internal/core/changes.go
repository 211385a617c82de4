package core

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
)

// The field diff of two revisions' content, as plan, history --diff and
// undo print it: one row per field that differs, named as history names it,
// marked "(rolls out)" when Cluster API replaces machines for it.

// FieldChanges returns every field in which to differs from from
// (revisions.Diff), each marked RollsOut when it is among the changes that
// replace machines, and those changes themselves (revisions.RolloutChanges).
func FieldChanges(from, to revisions.Snapshot) ([]v1alpha1.PlanFieldChange, []revisions.Change, error) {
	changes, err := revisions.Diff(from, to)
	if err != nil {
		return nil, nil, err
	}
	rollout, err := revisions.RolloutChanges(from, to)
	if err != nil {
		return nil, nil, err
	}
	rolls := map[string]bool{}
	for _, ch := range rollout {
		rolls[ch.Path] = true
	}
	out := make([]v1alpha1.PlanFieldChange, 0, len(changes))
	for _, ch := range changes {
		out = append(out, v1alpha1.PlanFieldChange{Path: ch.Path, From: ch.From, To: ch.To, RollsOut: rolls[ch.Path]})
	}
	return out, rollout, nil
}

// WriteFieldTable prints changes as a table FIELD, fromCol, toCol, every
// line after indent. A value reads in full, line by line: a file's content
// or a script one row per line, as an editor shows it (valueLines).
func WriteFieldTable(out io.Writer, indent, fromCol, toCol string, changes []v1alpha1.PlanFieldChange) error {
	var table bytes.Buffer
	w := printers.GetNewTabWriter(&table)
	fmt.Fprintf(w, "%sFIELD\t%s\t%s\n", indent, fromCol, toCol)
	for _, c := range changes {
		from, to := valueLines(c.From), valueLines(c.To)
		for i := range max(len(from), len(to)) {
			path, mark := "", ""
			if i == 0 {
				path = c.Path
				if c.RollsOut {
					mark = "(rolls out)"
				}
			}
			// Every row ends its value with a tab, so that the marks of
			// the rows below and above a value of several lines align.
			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\n", indent, path, lineAt(from, i), lineAt(to, i), mark)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(out, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// valueLines is one value of a field table, line by line: "<none>" when
// absent; else its lines (without the newline that ends the last), each
// with its spaces as they are and every other character a terminal would
// not show as itself — a tab, a carriage return, an escape sequence, a
// bidirectional override — as its escape (visible).
func valueLines(s string) []string {
	if s == "" {
		return []string{OrNone(s)}
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = visible(l)
	}
	return lines
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}
