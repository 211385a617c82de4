package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestCPUMeterOnARealCgroup: a busy child process placed in its own
// cgroup is charged its CPU time there, and close removes the cgroups;
// in each hierarchy, skipped with the reason where it is not writable.
func TestCPUMeterOnARealCgroup(t *testing.T) {
	t.Run("v1", func(t *testing.T) { testCPUMeter(t, cgroupV1Home) })
	t.Run("v2", func(t *testing.T) { testCPUMeter(t, cgroupV2Home) })
}

func testCPUMeter(t *testing.T, home func() (string, string, error)) {
	m, err := newCPUMeterFrom(home)
	if m.instrument == instrumentProc {
		t.Skipf("not writable here (%v); the report reads /proc", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = m.close()
		}
	}()
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Skipf("no shell to burn CPU with: %v", err)
	}
	defer func() { _ = busy.Process.Kill(); _ = busy.Wait() }()
	if err := m.place("busy", busy.Process.Pid); err != nil {
		t.Skipf("%s not writable here: %v", m.instrument, err)
	}
	// The busy process is charged in its cgroup as fast as it runs (on a
	// shared machine, however slowly that is), and as much as /proc says
	// it ran (whose ticks are 10 ms).
	before := m.read(nil)["busy"]
	deadline := time.Now().Add(20 * time.Second)
	var after time.Duration
	for {
		time.Sleep(50 * time.Millisecond)
		after = m.read(nil)["busy"]
		if after-before >= 200*time.Millisecond || time.Now().After(deadline) {
			break
		}
	}
	if after-before < 200*time.Millisecond {
		t.Fatalf("%s: the busy process was charged %s in 20s", m.instrument, after-before)
	}
	proc, _, _, ok := readStat(busy.Process.Pid)
	cg := m.read(nil)["busy"]
	if diff := cg - proc; !ok || diff < -50*time.Millisecond || diff > 50*time.Millisecond {
		t.Errorf("%s: cgroup %s, /proc %s (ok %v): want them within 50ms", m.instrument, cg, proc, ok)
	}
	if m.instrumentOf("busy") != m.instrument || m.instrumentOf("unplaced") != instrumentProc {
		t.Errorf("instruments: busy %q, unplaced %q", m.instrumentOf("busy"), m.instrumentOf("unplaced"))
	}
	_ = busy.Process.Kill()
	_ = busy.Wait()
	// An exited process's time stays charged to its cgroup.
	if gone := m.read(nil)["busy"]; gone < after {
		t.Errorf("after exit: %s < %s", gone, after)
	}
	run := m.run
	closed = true
	if err := m.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("%s still exists after close (%v)", run, err)
	}
}

// TestCgroupUsage reads both instruments' files.
func TestCgroupUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cpuacct.usage"), []byte("1500000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := cgroupUsage(instrumentCgroupV1, dir); err != nil || got != 1500*time.Millisecond {
		t.Errorf("v1: %s, %v; want 1.5s", got, err)
	}
	if got, err := cgroupUsage(instrumentCgroupV2, dir); err != nil || got != 2500*time.Millisecond {
		t.Errorf("v2: %s, %v; want 2.5s", got, err)
	}
}
