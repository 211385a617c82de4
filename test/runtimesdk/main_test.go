// Package runtimesdk runs the sandbox in its Runtime SDK mode
// (sandbox.Options.RuntimeSDK): Cluster API's own core manager, bin/capi-core
// (make capi-core), with the RuntimeSDK feature gate on, in place of the
// in-process core controllers, and a Runtime Extension served by the test
// itself, registered with an ExtensionConfig and called over TLS by the
// topology controller.
//
// One sandbox is shared: three ClusterClass clusters, demo-cc, demo-cc-2 and
// demo-cc-3 on demo-class (1 control-plane and 1 worker machine each), no
// plain cluster, and the guard serving its BeforeClusterUpgrade extension
// (--wave-hold, --wave-soak waveSoak). The tests run in file order.
package runtimesdk

import (
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

var sb *sandbox.Sandbox

var timings sandbox.Figures

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "runtimesdk", sandbox.Options{
		Clusters:                  -1,
		ClassClusters:             3,
		ClassControlPlaneMachines: 1,
		ClassWorkerMachines:       1,
		RuntimeSDK:                true,
		Environment:               framework.Options{GuardArgs: []string{"--wave-hold", "--wave-soak=" + waveSoak.String()}},
	}, &timings, func(s *sandbox.Sandbox) {
		sb = s
		timings.Add("%-58s %s", "sandbox ready (bin/capi-core, 3 class clusters, 1+1)", s.ReadyAfter.Round(100*time.Millisecond))
	}))
}
