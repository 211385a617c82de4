package framework

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// indexFilledLine is what the guard logs once its revision Index (package
// history) holds every RolloutRevision: until then it reads records from
// the API server instead.
const indexFilledLine = "revision index filled"

// indexWatcher watches the guard's output for indexFilledLine, since the
// guard's last start.
type indexWatcher struct {
	mu     sync.Mutex
	part   []byte
	filled bool
}

// Write scans p's complete lines for indexFilledLine.
func (w *indexWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = eachLine(w.part, p, func(line string) {
		if strings.Contains(line, indexFilledLine) {
			w.filled = true
		}
	})
	return len(p), nil
}

// reset forgets what an earlier guard process logged.
func (w *indexWatcher) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part, w.filled = nil, false
}

func (w *indexWatcher) isFilled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.filled
}

// WaitGuardIndexFilled waits until the running guard has filled its
// revision Index. A guard answers admission requests before that, reading
// records from the API server; a test that counts the requests the guard's
// recording costs in steady state waits for it first.
func (e *Environment) WaitGuardIndexFilled(t testing.TB) {
	t.Helper()
	WaitFor(t, 2*time.Minute, 100*time.Millisecond, "the guard's revision Index", func() (bool, string) {
		if e.guardIndex.isFilled() {
			return true, ""
		}
		return false, "the guard has not logged " + `"` + indexFilledLine + `"` + " since it started"
	})
}
