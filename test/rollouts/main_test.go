// Package rollouts runs real rollouts in the sandbox: the Cluster API
// controllers replace simulated machines while the guard (bin/webhook,
// registered from config/webhook) stamps and polices every edit. One
// sandbox with a small demo cluster is shared by the package's tests, which
// run in file order and each leave the cluster ready: the worker pool rolls
// to a spare template before the control plane moves to the next minor
// (Cluster API's MachineSet preflight checks hold back new workers whose
// minor differs from the control plane's).
package rollouts

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

// The demo the tests share: small, so the package stays within a few
// minutes on two cores.
const (
	controlPlaneMachines = 1
	workerMachines       = 2
	machineStartup       = time.Second
)

// sb is the sandbox every test of this package shares; demo is its cluster.
var (
	sb   *sandbox.Sandbox
	demo sandbox.ClusterSpec
)

// timings collects the durations the tests measure, printed at the end.
var timings = struct {
	sync.Mutex
	lines []string
}{}

// recordTiming notes a measured duration for the summary.
func recordTiming(what string, d time.Duration) {
	timings.Lock()
	defer timings.Unlock()
	timings.lines = append(timings.lines, fmt.Sprintf("%-58s %s", what, d.Round(100*time.Millisecond)))
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logFile, err := os.CreateTemp("", "rollout-guard-rollouts-*.log")
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
	sb, err = sandbox.Start(ctx, sandbox.Options{
		Environment:          framework.Options{Log: logFile},
		ControlPlaneMachines: controlPlaneMachines,
		WorkerMachines:       workerMachines,
		MachineStartup:       machineStartup,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the sandbox:", err)
		return 1
	}
	demo = sb.Clusters[0]
	recordTiming("environment (etcd, kube-apiserver, guard) ready", sb.EnvironmentReadyAfter)
	recordTiming(fmt.Sprintf("sandbox ready (%d control-plane + %d worker machines)", controlPlaneMachines, workerMachines), sb.ReadyAfter)

	children := childProcesses()
	code := m.Run()
	if err := sb.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the sandbox:", err)
		code = max(code, 1)
	}
	if left := survivors(children, 10*time.Second); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "processes left running after Stop:", strings.Join(left, "; "))
		code = max(code, 1)
	}

	timings.Lock()
	fmt.Fprintln(os.Stderr, "timings:")
	for _, line := range timings.lines {
		fmt.Fprintln(os.Stderr, "  "+line)
	}
	timings.Unlock()
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
