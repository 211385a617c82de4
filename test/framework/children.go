package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ChildProcesses returns the command lines of this process's running
// children (etcd, kube-apiserver, the guard) by pid, so a test can check
// that stopping an environment left none behind (see Survivors). Empty
// where there is no /proc.
func ChildProcesses() map[int]string {
	children := map[int]string{}
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return children
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(pid); ok && ppid == self && state != "Z" {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			children[pid] = strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
		}
	}
	return children
}

// Survivors waits up to timeout for the processes of children to end and
// returns those still running, as "pid command line".
func Survivors(children map[int]string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for pid, cmd := range children {
			if _, state, ok := procStat(pid); ok && state != "Z" {
				left = append(left, fmt.Sprintf("%d %s", pid, cmd))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// procStat reads the parent pid and state of pid from /proc/<pid>/stat.
func procStat(pid int) (ppid int, state string, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, "", false
	}
	return ppid, fields[0], true
}
