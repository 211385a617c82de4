package framework

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// lockedWriter serialises writes to w, which the framework, the conversion
// webhook server and the guard process share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p to the shared writer, one caller at a time.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tailWriter keeps the last max lines written to it.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  []byte
}

func newTailWriter(max int) *tailWriter { return &tailWriter{max: max} }

// Write keeps the complete lines of p, dropping the oldest beyond max.
func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, string(t.part[:i]))
		t.part = t.part[i+1:]
	}
	if len(t.lines) > t.max {
		t.lines = append([]string(nil), t.lines[len(t.lines)-t.max:]...)
	}
	// Keep a runaway unterminated line from growing without bound.
	if len(t.part) > 64<<10 {
		t.part = t.part[len(t.part)-64<<10:]
	}
	return len(p), nil
}

// String returns the kept lines, the last one possibly unterminated.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := append([]string(nil), t.lines...)
	if len(t.part) > 0 {
		lines = append(lines, string(t.part))
	}
	return strings.Join(lines, "\n")
}

// reset forgets everything written so far.
func (t *tailWriter) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines, t.part = nil, nil
}
