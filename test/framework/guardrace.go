package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

const (
	// raceGuardBinary is the guard built with the race detector (make
	// build-race: go build -race -o bin/webhook-race ./cmd/webhook), run
	// instead of bin/webhook when Options.GuardRace is set.
	raceGuardBinary = "webhook-race"
	// raceReportStart and raceReportEnd frame each report the race
	// detector writes to the process's standard error.
	raceReportStart = "WARNING: DATA RACE"
	raceReportEnd   = "=================="
	// maxRaceReports bounds the reports kept (each one in full).
	maxRaceReports = 10
)

// GuardRaceEnv, when set, overrides Options.GuardRace for every
// environment of a test process: "1" runs the race-enabled guard in every
// package, "0" the plain one in every package.
const GuardRaceEnv = "E2E_GUARD_RACE"

// guardRace says whether the environment runs the race-enabled guard.
func (e *Environment) guardRace() bool {
	switch os.Getenv(GuardRaceEnv) {
	case "1":
		return true
	case "0":
		return false
	}
	return e.opts.GuardRace || e.raceTest.Load()
}

// guardBinary is the file name, in BinDir, of the guard the environment runs.
func (e *Environment) guardBinary() string {
	if e.guardRace() {
		return raceGuardBinary
	}
	return "webhook"
}

// raceWatcher reads a race-enabled guard's output, line by line, and keeps
// each data race report the race detector writes.
type raceWatcher struct {
	mu      sync.Mutex
	part    []byte
	current []string // the report being read, nil outside one
	reports []string
	count   int
}

// Write scans p's complete lines for race reports.
func (w *raceWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = eachLine(w.part, p, func(line string) {
		switch {
		case strings.HasPrefix(line, raceReportStart):
			w.count++
			w.current = []string{line}
		case w.current != nil && strings.HasPrefix(line, raceReportEnd):
			if len(w.reports) < maxRaceReports {
				w.reports = append(w.reports, strings.Join(w.current, "\n"))
			}
			w.current = nil
		case w.current != nil:
			w.current = append(w.current, line)
		}
	})
	return len(p), nil
}

// err is an error naming every race reported so far, nil when none was.
func (w *raceWatcher) err() error { return w.since(0) }

// reported is how many races were reported so far.
func (w *raceWatcher) reported() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// since is an error naming the races reported after the first n, nil
// when there were none.
func (w *raceWatcher) since(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.count <= n {
		return nil
	}
	kept := w.reports[min(n, len(w.reports)):]
	return fmt.Errorf("the race detector reported %d data race(s) in the guard (the first %d follow):\n%s",
		w.count-n, len(kept), strings.Join(kept, "\n"+raceReportEnd+"\n"))
}

// WithRaceGuard runs the rest of test t against the guard built with the
// race detector (BinDir/webhook-race, make build-race): it restarts the
// guard with it now and, when t ends, fails t with every data race it
// reported meanwhile, both stacks each, and restarts the guard as it was.
// For a test whose concurrency is where the guard's races would show, in a
// package whose other tests cannot afford the detector's slowness (the
// guard answers each call within the webhooks' shipped timeout).
func (e *Environment) WithRaceGuard(t testing.TB) {
	t.Helper()
	if e.guardRace() {
		return // the environment's guard has the detector already
	}
	before := e.races.reported()
	e.raceTest.Store(true)
	t.Cleanup(func() {
		e.raceTest.Store(false)
		if err := e.races.since(before); err != nil {
			t.Error(err)
		}
		if err := e.StartGuard(context.Background()); err != nil {
			t.Errorf("starting the guard without the race detector again: %v", err)
		}
	})
	if err := e.StartGuard(context.Background()); err != nil {
		t.Fatalf("starting the guard with the race detector: %v", err)
	}
}

// GuardRaces returns an error with the data races the race detector
// reported in any guard process of the environment (Options.GuardRace) so
// far, nil when it reported none or the guard runs without it. Stop
// returns the same error.
func (e *Environment) GuardRaces() error { return e.races.err() }
