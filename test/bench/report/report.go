// Package report is what the benchmark harnesses share for their output:
// where it goes, and the machine it was taken on (figures mean little
// without the load and the processor they were taken under).
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
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

// Machine is what a run ran on and under which load: figures taken on a
// shared machine mean little without it.
type Machine struct {
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	CPUModel string `json:"cpu_model"`
	Cores    int    `json:"cores"`
	// LoadAtStart and LoadAtEnd are /proc/loadavg's 1, 5 and 15 minute
	// load averages when the run started and ended.
	LoadAtStart string `json:"load_at_start"`
	LoadAtEnd   string `json:"load_at_end,omitempty"`
}

// ThisMachine describes this machine now (LoadAtEnd left empty).
func ThisMachine() Machine {
	return Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUModel: CPUModel(), Cores: runtime.NumCPU(), LoadAtStart: LoadAverage()}
}

// UpdateSummary sets one section of the JSON object in the file at path
// (created with its directory if missing) and keeps the others, so that
// each harness of make bench adds its part to one bench/summary.json.
func UpdateSummary(path, section string, v any) error {
	all := map[string]json.RawMessage{}
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &all); err != nil {
			return fmt.Errorf("reading the summary %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the summary %s: %w", path, err)
	}
	part, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the %s summary: %w", section, err)
	}
	all[section] = part
	out, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the summary: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the summary %s: %w", path, err)
	}
	return nil
}

// Spread is a figure over rounds: pooled over all of them, and the lowest
// and highest single round.
type Spread struct {
	Pooled float64 `json:"pooled"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// NewSpread is the spread of perRound around pooled, every figure rounded
// to 3 decimals (more would be noise on a shared machine).
func NewSpread(pooled float64, perRound []float64) Spread {
	s := Spread{Pooled: Round3(pooled)}
	for i, v := range perRound {
		if i == 0 || v < s.Min {
			s.Min = v
		}
		if i == 0 || v > s.Max {
			s.Max = v
		}
	}
	s.Min, s.Max = Round3(s.Min), Round3(s.Max)
	return s
}

// Round3 rounds v to 3 decimals.
func Round3(v float64) float64 { return math.Round(v*1000) / 1000 }
