// Package faults breaks things while the guard works and checks what
// survives: the guard killed (the Cluster API controllers carry on, policed
// edits fail closed, history catches up), kube-apiserver restarted under a
// `rollout status` and under the guard's caches, a guard replica killed
// during a burst of edits, and writers racing on one object. One sandbox
// (real Cluster API controllers, in-memory machines) with a small demo
// cluster is shared by the package's tests, which run in file order and
// each leave the cluster ready with one guard serving.
package faults

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The demo the tests share: the smallest that still has a control plane
// and a worker pool, so the package stays within a few minutes on two cores.
const (
	controlPlaneMachines = 1
	workerMachines       = 1
	machineStartup       = time.Second
)

// sb is the sandbox every test of this package shares; demo is its cluster.
var (
	sb   *sandbox.Sandbox
	demo sandbox.ClusterSpec
)

// figures collects what the tests measure, printed at the end (and quoted
// in docs/reliability.md).
var figures = struct {
	sync.Mutex
	lines []string
}{}

// recordFigure notes a measured figure for the summary.
func recordFigure(format string, args ...any) {
	figures.Lock()
	defer figures.Unlock()
	figures.lines = append(figures.lines, fmt.Sprintf(format, args...))
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logFile, err := os.CreateTemp("", "rollout-guard-faults-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	fmt.Fprintln(os.Stderr, "sandbox logs (controllers, guard):", logFile.Name())
	logger := zap.New(zap.WriteTo(logFile), zap.ConsoleEncoder())
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("klog"))
	// The in-memory workload clusters' API servers log through the standard logger.
	log.SetOutput(logFile)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	begin := time.Now()
	sb, err = sandbox.Start(ctx, sandbox.Options{
		Environment: framework.Options{
			Log: logFile,
			// A stopped guard may take its graceful shutdown delay.
			GuardStopTimeout: time.Minute,
		},
		ControlPlaneMachines: controlPlaneMachines,
		WorkerMachines:       workerMachines,
		MachineStartup:       machineStartup,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the sandbox:", err)
		return 1
	}
	demo = sb.Clusters[0]
	recordFigure("sandbox ready (%d control-plane + %d worker machines) after %s", controlPlaneMachines, workerMachines, time.Since(begin).Round(100*time.Millisecond))

	children := childProcesses()
	code := m.Run()
	// A restarted kube-apiserver or guard replicas are children too: look again.
	for pid, cmd := range childProcesses() {
		children[pid] = cmd
	}
	if err := sb.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the sandbox:", err)
		code = max(code, 1)
	}
	if left := survivors(children, 10*time.Second); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "processes left running after Stop:", strings.Join(left, "; "))
		code = max(code, 1)
	}

	figures.Lock()
	fmt.Fprintln(os.Stderr, "figures:")
	for _, line := range figures.lines {
		fmt.Fprintln(os.Stderr, "  "+line)
	}
	figures.Unlock()
	return code
}

// childProcesses returns the command lines of this process's children
// (etcd, kube-apiserver, the guard) by pid.
func childProcesses() map[int]string {
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

// survivors waits up to timeout for the processes of children to end and
// returns those still running.
func survivors(children map[int]string, timeout time.Duration) []string {
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
