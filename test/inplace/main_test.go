// Package inplace runs the sandbox with Cluster API's in-place updates
// (sandbox.Options.InPlaceUpdates): Cluster API's core manager
// (bin/capi-core) and kubeadm control plane manager (bin/capi-kcp) with the
// RuntimeSDK and InPlaceUpdates feature gates on, and Cluster API's own
// test extension, whose CanUpdateMachine and UpdateMachine handlers accept
// a control-plane machine's new version and fake its update, registered
// with an ExtensionConfig.
//
// One sandbox is shared: the plain cluster demo at KubernetesVersion, with
// 3 control-plane machines (Cluster API refuses maxSurge 0 below 3) whose
// KubeadmControlPlane has maxSurge 0, so that every one of them is offered
// for an in-place update, and 1 worker. Its version is within the minors
// whose kubeadm configuration Cluster API keeps the same across an upgrade
// to the next (from v1.36 on, it drops the ControlPlaneKubeletLocalMode
// feature gate, a change the test extension cannot make in place).
package inplace

import (
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// kubernetesVersion is demo's version at the start; upgradeVersion the
	// next minor it is upgraded to.
	kubernetesVersion = "v1.34.3"
	upgradeVersion    = "v1.35.2"
	// controlPlaneReplicas is demo's control-plane machines.
	controlPlaneReplicas = 3
)

var sb *sandbox.Sandbox

var timings sandbox.Figures

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "inplace", sandbox.Options{
		ControlPlaneMachines: controlPlaneReplicas,
		WorkerMachines:       1,
		KubernetesVersion:    kubernetesVersion,
		RuntimeSDK:           true,
		InPlaceUpdates:       true,
	}, &timings, func(s *sandbox.Sandbox) {
		sb = s
		timings.Add("%-58s %s", "sandbox ready (capi-core, capi-kcp, extension; 3+1)", s.ReadyAfter.Round(100*time.Millisecond))
	}))
}
