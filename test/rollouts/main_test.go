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

	children := framework.ChildProcesses()
	code := m.Run()
	if err := sb.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the sandbox:", err)
		code = max(code, 1)
	}
	if left := framework.Survivors(children, 10*time.Second); len(left) > 0 {
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
