package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Instruments the CPU meter reads a process's CPU time with.
const (
	// instrumentCgroupV1 is cgroup v1's cpuacct.usage of a cgroup made for
	// the process: nanoseconds the kernel charged its every thread, child
	// processes included, exited ones too.
	instrumentCgroupV1 = "cgroup v1 cpuacct.usage"
	// instrumentCgroupV2 is cgroup v2's cpu.stat usage_usec of such a
	// cgroup: the same, in microseconds.
	instrumentCgroupV2 = "cgroup v2 cpu.stat usage_usec"
	// instrumentProc is utime+stime of /proc/PID/stat, in clock ticks
	// (10 ms): the fallback where no cgroup can be made.
	instrumentProc = "/proc/PID/stat utime+stime"
)

// cpuMeter reads the CPU time of each process the benchmark starts (the
// API server, etcd, the webhooks, the watcher, and this process) from a
// cgroup of its own, made under this process's cgroup for the run and
// removed at its end (close); a process it could not place is read from
// /proc.
type cpuMeter struct {
	// instrument is the cgroup instrument, or instrumentProc when there
	// is no writable cgroup hierarchy.
	instrument string
	// home is this process's own cgroup directory, where close moves the
	// processes still running back; run is the run's directory under it.
	home, run string
	// groups are the cgroup directories made so far, by process name.
	groups map[string]string
	// pids are the last pid placed under each name, for the fallback.
	pids map[string]int
	// unplaced are the names whose process could not be moved into
	// their cgroup: read from /proc.
	unplaced map[string]bool
}

// newCPUMeter makes the run's cgroup directory in the first writable
// hierarchy of cgroup v1 cpuacct and cgroup v2, or returns a meter that
// reads /proc, with the reason why.
func newCPUMeter() (*cpuMeter, error) {
	return newCPUMeterFrom(cgroupV1Home, cgroupV2Home)
}

// newCPUMeterFrom is newCPUMeter trying the hierarchies homes find, in
// order.
func newCPUMeterFrom(homes ...func() (string, string, error)) (*cpuMeter, error) {
	var errs []error
	for _, try := range homes {
		instrument, home, err := try()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		run := filepath.Join(home, fmt.Sprintf("rollout-bench-%d", os.Getpid()))
		if err := os.Mkdir(run, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, fmt.Errorf("%s: %w", instrument, err))
			continue
		}
		return &cpuMeter{instrument: instrument, home: home, run: run, groups: map[string]string{}, pids: map[string]int{}, unplaced: map[string]bool{}}, nil
	}
	return &cpuMeter{instrument: instrumentProc, groups: map[string]string{}, pids: map[string]int{}, unplaced: map[string]bool{}}, errors.Join(errs...)
}

// cgroupV1Home is this process's cgroup directory in cgroup v1's cpuacct
// hierarchy.
func cgroupV1Home() (string, string, error) {
	for _, mount := range []string{"/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"} {
		if _, err := os.Stat(filepath.Join(mount, "cpuacct.usage")); err != nil {
			continue
		}
		path, err := ownCgroup(func(controllers string) bool {
			return strings.Contains(","+controllers+",", ",cpuacct,")
		})
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", instrumentCgroupV1, err)
		}
		return instrumentCgroupV1, filepath.Join(mount, path), nil
	}
	return "", "", fmt.Errorf("%s: no cpuacct hierarchy mounted", instrumentCgroupV1)
}

// cgroupV2Home is this process's cgroup directory in the unified
// hierarchy, where one is mounted.
func cgroupV2Home() (string, string, error) {
	for _, mount := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err != nil {
			continue
		}
		path, err := ownCgroup(func(controllers string) bool { return controllers == "" })
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", instrumentCgroupV2, err)
		}
		home := filepath.Join(mount, path)
		if _, err := os.Stat(filepath.Join(home, "cpu.stat")); err != nil {
			return "", "", fmt.Errorf("%s: %w", instrumentCgroupV2, err)
		}
		return instrumentCgroupV2, home, nil
	}
	return "", "", fmt.Errorf("%s: no unified hierarchy mounted", instrumentCgroupV2)
}

// ownCgroup is this process's path in the hierarchy whose controllers
// field of /proc/self/cgroup matches.
func ownCgroup(match func(controllers string) bool) (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && match(parts[1]) {
			return parts[2], nil
		}
	}
	return "", errors.New("not in /proc/self/cgroup")
}

// place moves process pid (all its threads) into the cgroup of name, made
// on first use; several processes may share a name (the guard, started
// again in each of its slices). Without a cgroup hierarchy it only notes
// the pid.
func (m *cpuMeter) place(name string, pid int) error {
	if pid <= 0 {
		return fmt.Errorf("placing %s: no process", name)
	}
	m.pids[name] = pid
	if m.run == "" {
		return nil
	}
	dir, ok := m.groups[name]
	if !ok {
		dir = filepath.Join(m.run, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("making the cgroup of %s: %w", name, err)
		}
		m.groups[name] = dir
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("moving %s (pid %d) into %s: %w", name, pid, dir, err)
	}
	return nil
}

// track is place, falling back to /proc for name (with a warning on
// standard error) when the process cannot be moved.
func (m *cpuMeter) track(name string, pid int) {
	if err := m.place(name, pid); err != nil {
		fmt.Fprintf(os.Stderr, "bench-admission: reading the CPU time of %s from /proc: %v\n", name, err)
		m.unplaced[name] = true
	}
}

// instrumentOf names how name's CPU time is read.
func (m *cpuMeter) instrumentOf(name string) string {
	if _, ok := m.groups[name]; ok && !m.unplaced[name] {
		return m.instrument
	}
	return instrumentProc
}

// read returns the CPU time of every placed process, by name: its
// cgroup's usage, or, for a name without a cgroup, the /proc time of the
// processes procNames finds (this process's children by command name,
// and names' pids).
func (m *cpuMeter) read(names map[int]string) map[string]time.Duration {
	out := map[string]time.Duration{}
	var proc map[string]time.Duration
	for name := range m.pids {
		if dir, ok := m.groups[name]; ok && !m.unplaced[name] {
			if t, err := cgroupUsage(m.instrument, dir); err == nil {
				out[name] = t
				continue
			}
		}
		if proc == nil {
			proc = processCPU(names)
		}
		if t, ok := proc[name]; ok {
			out[name] = t
		}
	}
	return out
}

// cgroupUsage reads the CPU time charged to the cgroup at dir.
func cgroupUsage(instrument, dir string) (time.Duration, error) {
	switch instrument {
	case instrumentCgroupV1:
		raw, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(ns), err
	case instrumentCgroupV2:
		raw, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(us) * time.Microsecond, err
			}
		}
		return 0, fmt.Errorf("no usage_usec in %s/cpu.stat", dir)
	}
	return 0, fmt.Errorf("no cgroup instrument %q", instrument)
}

// close moves the processes still in the run's cgroups back to this
// process's own cgroup and removes the run's cgroups.
func (m *cpuMeter) close() error {
	if m.run == "" {
		return nil
	}
	var errs []error
	for name, dir := range m.groups {
		raw, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for pid := range strings.FieldsSeq(string(raw)) {
			// A process that exits meanwhile cannot be moved; fine.
			_ = os.WriteFile(filepath.Join(m.home, "cgroup.procs"), []byte(pid), 0o644)
		}
		if err := removeCgroup(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing the cgroup of %s: %w", name, err))
		}
	}
	if err := removeCgroup(m.run); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", m.run, err))
	}
	return errors.Join(errs...)
}

// removeCgroup removes an empty cgroup directory, retrying briefly while
// the kernel finishes moving or reaping its last processes.
func removeCgroup(dir string) error {
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
