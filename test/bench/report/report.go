// Package report is what the benchmark harnesses share for their output:
// where it goes, and the machine it was taken on (figures mean little
// without the load and the processor they were taken under).
package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Output returns standard output, and also the file at path when path is
// not empty (created with its directory); close closes that file.
func Output(path string) (out io.Writer, close func() error, err error) {
	if path == "" {
		return os.Stdout, func() error { return nil }, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s: %w", path, err)
	}
	return io.MultiWriter(os.Stdout, f), f.Close, nil
}

// LoadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg, or "unknown".
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// CPUModel returns the processor's model name from /proc/cpuinfo, or
// "unknown".
func CPUModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
