//go:build unix && !linux

package framework

import "syscall"

// childProcAttr puts a child in its own process group, so a terminal's
// Ctrl-C reaches only this process (which then stops the child in order) and
// the whole group can be signalled.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
