package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Edit kinds.
const (
	kindTemplate      = "template"       // switch a pool's or the control plane's infrastructure template
	kindVersion       = "version"        // a patch-level version change
	kindTemplateLabel = "template-label" // a label of the pool's machine template (new content, in place)
	kindLabel         = "label"          // an object label (never reaches the guard: matchConditions)
	kindRestart       = "restart"        // rollout restart through the CLI
)

// policed reports whether edits of kind change what the guard polices, so
// that the API server sends them to it.
func policed(kind string) bool { return kind != kindLabel }

// Classes of a failed edit.
const (
	// classConflict: the object kept changing under the writer (conflicts
	// until the writer gave up). Not a failure of anything: optimistic
	// concurrency at work.
	classConflict = "conflict"
	// classAPIServerRestart: failed while kube-apiserver was being
	// restarted (from the signal until Grace after /readyz answered
	// again). Expected: nothing can be edited without an API server.
	classAPIServerRestart = "apiserver-restart"
	// classRefused: a guard refusal naming a rule of an edit the policy
	// allows: a false refusal. Always a failure.
	classRefused = "refused"
	// classWebhookFailed: the API server could not call the guard (it
	// failed closed) while nothing was being restarted. A failure.
	classWebhookFailed = "webhook-failed"
	// classGuardDenied: the guard denied the edit without a rule (e.g. it
	// could not record the replaced revision) while nothing was being
	// restarted. A failure.
	classGuardDenied = "guard-denied"
	// classOther: any other error outside a restart window. A failure.
	classOther = "other"
)

// guardFailure reports whether a failed edit of class counts against the
// guard.
func guardFailure(class string) bool {
	return class != classConflict && class != classAPIServerRestart
}

// Outcome is one edit attempt.
type Outcome struct {
	Writer string
	Kind   string
	Object string
	Start  time.Time
	End    time.Time
	// Err is "" for success.
	Err string
	// Conflict reports that it failed because the object kept changing.
	Conflict bool
	// Class is set by Classify for failures.
	Class string
}

// Window is an interval in which failures are expected (a kube-apiserver
// restart, from its signal To its grace after it was Ready again).
type Window struct {
	From, Ready, To time.Time
}

// overlaps reports whether [start, end] meets w.
func (w Window) overlaps(start, end time.Time) bool {
	return !end.Before(w.From) && !start.After(w.To)
}

// Classify names the class of a failed edit that ran from start to end
// with error message msg; conflict says the writer gave up on conflicts.
// A refusal naming a rule is a false refusal wherever it falls; any other
// failure during an API server restart window is expected; outside them
// it is the guard's (unreachable, or denying) or unexplained.
func Classify(msg string, conflict bool, start, end time.Time, windows []Window) string {
	switch {
	case conflict:
		return classConflict
	case strings.Contains(msg, "[rule "):
		return classRefused
	}
	for _, w := range windows {
		if w.overlaps(start, end) {
			return classAPIServerRestart
		}
	}
	switch {
	case strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "rollout-guard is unavailable"):
		return classWebhookFailed
	case strings.Contains(msg, "denied the request"):
		return classGuardDenied
	default:
		return classOther
	}
}

// Tally counts edits by kind and failures by class.
type Tally struct {
	// Made counts attempts per kind; OK successes per kind.
	Made, OK map[string]int
	// Failed counts failures per class, and per class and kind.
	Failed       map[string]int
	FailedByKind map[string]map[string]int
	// GuardFailures are the failures that count against the guard: those
	// of policed edits in a failure class.
	GuardFailures []Outcome
	// Examples keeps the first few messages of each class.
	Examples map[string][]string
}

// Count classifies every failed outcome (setting Class) and tallies them.
func Count(outcomes []Outcome, windows []Window) Tally {
	t := Tally{Made: map[string]int{}, OK: map[string]int{}, Failed: map[string]int{},
		FailedByKind: map[string]map[string]int{}, Examples: map[string][]string{}}
	for i := range outcomes {
		o := &outcomes[i]
		t.Made[o.Kind]++
		if o.Err == "" {
			t.OK[o.Kind]++
			continue
		}
		o.Class = Classify(o.Err, o.Conflict, o.Start, o.End, windows)
		t.Failed[o.Class]++
		if t.FailedByKind[o.Class] == nil {
			t.FailedByKind[o.Class] = map[string]int{}
		}
		t.FailedByKind[o.Class][o.Kind]++
		if len(t.Examples[o.Class]) < 3 {
			t.Examples[o.Class] = append(t.Examples[o.Class], fmt.Sprintf("%s %s %s %s: %s", o.End.Format("15:04:05.000"), o.Writer, o.Kind, o.Object, o.Err))
		}
		if policed(o.Kind) && guardFailure(o.Class) {
			t.GuardFailures = append(t.GuardFailures, *o)
		}
	}
	return t
}

// Total is the number of attempts; Succeeded of successes.
func (t Tally) Total() int     { return sum(t.Made) }
func (t Tally) Succeeded() int { return sum(t.OK) }

// PolicedMade is the number of attempted edits the guard polices.
func (t Tally) PolicedMade() int {
	n := 0
	for k, v := range t.Made {
		if policed(k) {
			n += v
		}
	}
	return n
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
