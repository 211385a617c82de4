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
	"os"
	"testing"
	"time"

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
var figures sandbox.Figures

// recordFigure notes a measured figure for the summary.
func recordFigure(format string, args ...any) { figures.Add(format, args...) }

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "faults", sandbox.Options{
		Environment: framework.Options{
			// A stopped guard may take its graceful shutdown delay.
			GuardStopTimeout: time.Minute,
		},
		ControlPlaneMachines: controlPlaneMachines,
		WorkerMachines:       workerMachines,
		MachineStartup:       machineStartup,
	}, &figures, func(s *sandbox.Sandbox) {
		sb, demo = s, s.Clusters[0]
		recordFigure("sandbox ready (%d control-plane + %d worker machines) after %s", controlPlaneMachines, workerMachines, s.ReadyAfter.Round(100*time.Millisecond))
	}))
}
