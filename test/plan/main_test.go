// Package plan runs `rollout plan` in the sandbox, with Cluster API's own
// controllers and webhooks beside the guard, and then makes each change it
// previewed to hold the preview against what really happens:
//
//   - a worker pool's template switch lists exactly the worker machines,
//     and exactly those are replaced;
//   - a label-only change (as an edited manifest, -f, with the control
//     plane's manifest beside it) replaces none, and none is replaced;
//   - a control-plane version bump lists the control-plane machines, one
//     step and its etcd version, and exactly those are replaced; right
//     after it, a worker change names the MachineSet preflight check that
//     would hold it;
//   - an undo of that bump is refused by the guard (a Kubernetes and etcd
//     downgrade): the plan shows the guard's rules and message, exits 6,
//     and the object's resourceVersion and history are unchanged;
//   - the worker pool's other changes, previewed only: a bootstrap
//     template switch, a version (admitted at the control plane's minor,
//     refused above it) and an undo the guard admits each list every
//     worker machine as replaced, with the preflight check that would hold
//     them;
//   - a user who may only read what a plan reads and patch the kinds it
//     plans (no write of RolloutRevisions) gets the admin's plans, the
//     refused undo included, and writes nothing;
//   - a chained upgrade of the ClusterClass cluster lists the steps the
//     topology controller then takes, as the control plane's recorded
//     history shows them afterwards.
//
// Every -o json output of a real run is validated against the documented
// schema, rollout/api/v1alpha1/plan.schema.json, before it is decoded.
//
// One sandbox is shared: the plain cluster demo (3 control-plane and 3
// worker machines, starting at v1.33.5) and the ClusterClass cluster demo-cc
// (1 + 1 machines, v1.33.5). The tests run in file order, each leaving the
// clusters ready for the next.
package plan

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The clusters the tests share: small, so the package stays within minutes
// on two cores. The control plane has 3 machines, as operators run it, so
// that its bump replaces several one at a time; against 1 machine that
// costs about 25–50 s of the package's time (about 3 min on two cores).
const (
	cpMachines     = 3
	workerMachines = 3
	// startVersion is where both clusters start: a kubeadm etcd 3.5 minor,
	// so that undoing the bump to v1.34 is an etcd downgrade.
	startVersion = "v1.33.5"
)

var (
	sb   *sandbox.Sandbox
	demo sandbox.ClusterSpec
	cc   sandbox.ClassClusterSpec
)

var timings sandbox.Figures

// recordTiming notes a measured duration for the summary.
func recordTiming(what string, d time.Duration) {
	timings.Add("%-58s %s", what, d.Round(100*time.Millisecond))
}

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "plan", sandbox.Options{
		ControlPlaneMachines:      cpMachines,
		WorkerMachines:            workerMachines,
		KubernetesVersion:         startVersion,
		ClassCluster:              true,
		ClassControlPlaneMachines: 1,
		ClassWorkerMachines:       1,
		ClassKubernetesVersion:    startVersion,
	}, &timings, func(s *sandbox.Sandbox) {
		sb, demo, cc = s, s.Clusters[0], s.ClassClusters[0]
		recordTiming(fmt.Sprintf("sandbox ready (demo %d+%d, demo-cc 1+1 machines)", cpMachines, workerMachines), s.ReadyAfter)
	}))
}
