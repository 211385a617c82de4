// Package fleet runs `rollout plan` on changes the topology controller
// carries out across a fleet of ClusterClass clusters — a ClusterClass
// template rotated, a topology variable set, a Cluster rebased onto another
// class, a variable whose patch would take a control plane's etcd below
// the minor it has run — in a sandbox with Cluster API's own controllers and
// webhooks and the guard, and then makes each change it previewed to hold
// the preview against what really happens: the machines the plan names
// are exactly the machines replaced, and a refusal the plan shows is the
// refusal the topology controller meets.
//
// One sandbox is shared: three ClusterClass clusters demo-cc, demo-cc-2 and
// demo-cc-3 on demo-class (1 control-plane and 1 worker machine each). The
// tests run in file order, each leaving the clusters ready for the next.
package fleet

import (
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

var (
	sb       *sandbox.Sandbox
	clusters []sandbox.ClassClusterSpec
)

var timings sandbox.Figures

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "fleet", sandbox.Options{
		Clusters:                  -1,
		ClassClusters:             3,
		ClassControlPlaneMachines: 1,
		ClassWorkerMachines:       1,
	}, &timings, func(s *sandbox.Sandbox) {
		sb, clusters = s, s.ClassClusters
		timings.Add("%-58s %s", "sandbox ready (3 class clusters, 1+1 machines each)", s.ReadyAfter.Round(100*time.Millisecond))
	}))
}
