// Package clusterctl runs Cluster API's own command line, clusterctl (built
// by `make clusterctl` at the Cluster API version the test module pins),
// against a sandbox whose CRDs and provider inventory are as `clusterctl
// init` leaves them, with the guard installed: `describe cluster`, `alpha
// rollout pause|resume|restart` of a MachineDeployment and a
// KubeadmControlPlane, and what the guard records of them. One sandbox
// with a small demo cluster is shared by the package's tests, which run in
// file order and each leave the cluster ready.
package clusterctl

import (
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The demo the tests share: one machine of each, so a restart is quick.
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

// timings collects the durations the tests measure, printed at the end.
var timings sandbox.Figures

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "clusterctl", sandbox.Options{
		ControlPlaneMachines: controlPlaneMachines,
		WorkerMachines:       workerMachines,
		MachineStartup:       machineStartup,
	}, &timings, func(s *sandbox.Sandbox) {
		sb, demo = s, s.Clusters[0]
		timings.Add("sandbox ready after %s", s.ReadyAfter.Round(100*time.Millisecond))
	}))
}
