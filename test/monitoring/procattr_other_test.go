//go:build !linux

package monitoring

import "syscall"

// childProcAttr has nothing to add where no parent-death signal exists; the
// test's cleanup stops kube-state-metrics.
func childProcAttr() *syscall.SysProcAttr { return nil }
