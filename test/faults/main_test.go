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

	children := framework.ChildProcesses()
	code := m.Run()
	// A restarted kube-apiserver or guard replicas are children too: look again.
	for pid, cmd := range framework.ChildProcesses() {
		children[pid] = cmd
	}
	if err := sb.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the sandbox:", err)
		code = max(code, 1)
	}
	if left := framework.Survivors(children, 10*time.Second); len(left) > 0 {
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
