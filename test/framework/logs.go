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
	t.part = eachLine(t.part, p, func(line string) { t.lines = append(t.lines, line) })
	if len(t.lines) > t.max {
		t.lines = append([]string(nil), t.lines[len(t.lines)-t.max:]...)
	}
	return len(p), nil
}

// eachLine appends p to part, the unterminated line written so far, calls
// each with every complete line, and returns what is left unterminated:
// at most its last 64 KiB, so that a runaway line cannot grow without
// bound.
func eachLine(part, p []byte, each func(line string)) []byte {
	part = append(part, p...)
	for {
		i := bytes.IndexByte(part, '\n')
		if i < 0 {
			break
		}
		each(string(part[:i]))
		part = part[i+1:]
	}
	if len(part) > 64<<10 {
		part = part[len(part)-64<<10:]
	}
	return part
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
