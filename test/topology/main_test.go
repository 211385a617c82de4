// Package topology runs ClusterClass clusters in the sandbox, with Cluster
// API's own webhooks and topology controller beside the guard: a chained
// upgrade across three minors made with one kubectl patch, the refusals the
// guard must still make on topology clusters (a jump on a class without a
// version list, a downgrade, an etcd downgrade, a hand-made worker pool left
// too far behind), and the revert of a version bump that has not rolled out,
// on a topology Cluster and on a KubeadmControlPlane, and `rollout undo` of
// each kind admitted by Cluster API's webhooks as by the guard.
//
// One sandbox is shared: the ClusterClass cluster demo-cc (1 control-plane
// and 1 worker machine, starting at v1.32.4) and the plain demo cluster
// (1 + 1 machines, v1.35.2). The tests run in file order (undo and a revert
// across etcd's minor, then revert, then refusals, then the chained
// upgrade, then downgrades) and each leaves the clusters ready for the next.
package topology

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The clusters the tests share: small, so the package stays within minutes
// on two cores.
const (
	cpMachinesPerCluster     = 1
	workerMachinesPerCluster = 1
	// startVersion is where demo-cc starts: one minor below the version its
	// revert test bumps to, four below the end of its class's list.
	startVersion = "v1.32.4"
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
	os.Exit(sandbox.RunTests(m, "topology", sandbox.Options{
		ControlPlaneMachines:      cpMachinesPerCluster,
		WorkerMachines:            workerMachinesPerCluster,
		ClassCluster:              true,
		ClassControlPlaneMachines: cpMachinesPerCluster,
		ClassWorkerMachines:       workerMachinesPerCluster,
		ClassKubernetesVersion:    startVersion,
	}, &timings, func(s *sandbox.Sandbox) {
		sb, demo, cc = s, s.Clusters[0], s.ClassClusters[0]
		recordTiming(fmt.Sprintf("sandbox ready (demo and demo-cc, %d+%d machines each)", cpMachinesPerCluster, workerMachinesPerCluster), s.ReadyAfter)
	}))
}
