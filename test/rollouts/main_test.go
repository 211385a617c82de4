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
	"fmt"
	"os"
	"testing"
	"time"

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
var timings sandbox.Figures

// recordTiming notes a measured duration for the summary.
func recordTiming(what string, d time.Duration) {
	timings.Add("%-58s %s", what, d.Round(100*time.Millisecond))
}

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "rollouts", sandbox.Options{
		ControlPlaneMachines: controlPlaneMachines,
		WorkerMachines:       workerMachines,
		MachineStartup:       machineStartup,
	}, &timings, func(s *sandbox.Sandbox) {
		sb, demo = s, s.Clusters[0]
		recordTiming("environment (etcd, kube-apiserver, guard) ready", s.EnvironmentReadyAfter)
		recordTiming(fmt.Sprintf("sandbox ready (%d control-plane + %d worker machines)", controlPlaneMachines, workerMachines), s.ReadyAfter)
	}))
}
