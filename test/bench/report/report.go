// Package machine describes the machine a benchmark runs on, for the
// header of its output: benchmark figures mean little without the load and
// the processor they were taken under.
package machine

import (
	"os"
	"strings"
)

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
