//go:build linux

package monitoring

import "syscall"

// childProcAttr kills kube-state-metrics if the test binary dies before its
// cleanup runs (a panic, a timeout), so that no scraper outlives the sandbox.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
