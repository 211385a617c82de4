package framework

// GuardPID returns the process id of the running guard, 0 when the guard is
// not running. Benchmarks read the guard's memory from /proc/PID/status.
func (e *Environment) GuardPID() int {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if e.guard == nil || e.guard.cmd == nil || e.guard.cmd.Process == nil || e.guard.exited() {
		return 0
	}
	return e.guard.cmd.Process.Pid
}
