package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestTopology works on a cluster whose control plane and worker pool the
// topology controller manages: restarts go through the Cluster, keeping the
// rest of its topology; undo, pause and the template switch are refused
// with what to change instead.
func TestTopology(t *testing.T) {
	w := newWorld(t, "cli-topology", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2", Topology: true})
	md, kcp := "machinedeployment/"+mdName, "kcp/"+kcpName
	at := time.Date(2034, 1, 1, 0, 0, 0, 0, time.UTC)

	out := rolloutCmd(t, "restart", md, "-n", w.Namespace, "--at", "2034-01-01T00:00:00Z").ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 restarted through Cluster cli-topology/c1 (spec.topology.workers.machineDeployments[name=md-0].rollout.after)\n", out)
	w.Refresh(t)
	workers := w.Cluster.Spec.Topology.Workers.MachineDeployments
	assert.True(t, workers[0].Rollout.After.IsZero(), "another pool is left alone")
	assert.Equal(t, at, workers[1].Rollout.After.UTC())
	assert.Equal(t, "RollingUpdate", string(workers[1].Rollout.Strategy.Type), "the rest of the pool's rollout is kept")
	assert.True(t, w.MD.Spec.Rollout.After.IsZero(), "the MachineDeployment itself is not edited")

	out = rolloutCmd(t, "restart", kcp, "-n", w.Namespace, "--at", "2034-01-01T00:00:00Z", "--yes").ok(t)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restarted through Cluster cli-topology/c1 (spec.topology.controlPlane.rollout.after)\n", out)
	w.Refresh(t)
	assert.Equal(t, at, w.Cluster.Spec.Topology.ControlPlane.Rollout.After.UTC())
	assert.True(t, w.KCP.Spec.Rollout.After.IsZero())

	out = rolloutCmd(t, "restart", "cluster/c1", "-n", w.Namespace, "--at", "2035-01-01T00:00:00Z", "--yes").ok(t)
	assert.Equal(t, "cluster.cluster.x-k8s.io/c1 restarted (spec.topology.controlPlane.rollout.after)\n"+
		"cluster.cluster.x-k8s.io/c1 restarted (spec.topology.workers.machineDeployments[name=md-other].rollout.after)\n"+
		"cluster.cluster.x-k8s.io/c1 restarted (spec.topology.workers.machineDeployments[name=md-0].rollout.after)\n", out)
	w.Refresh(t)
	for _, wk := range w.Cluster.Spec.Topology.Workers.MachineDeployments {
		assert.Equal(t, time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC), wk.Rollout.After.UTC(), wk.Name)
	}

	rolloutCmd(t, "undo", md, "-n", w.Namespace).fails(t,
		"cannot undo MachineDeployment cli-topology/c1-md-0: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; change it through Cluster c1 instead: its spec.topology.version, the class of spec.topology.workers.machineDeployments[name=md-0], or that worker class's templates in the ClusterClass")
	rolloutCmd(t, "undo", kcp, "-n", w.Namespace).fails(t,
		"cannot undo KubeadmControlPlane cli-topology/c1-control-plane: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; change it through Cluster c1 instead: its spec.topology.version, or the control plane's templates in the ClusterClass (spec.controlPlane)")
	rolloutCmd(t, "pause", md, "-n", w.Namespace).fails(t,
		`cannot pause MachineDeployment cli-topology/c1-md-0: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; pause its whole Cluster instead: kubectl patch cluster c1 -n cli-topology --type merge -p '{"spec":{"paused":true}}'`)
	rolloutCmd(t, "pause", kcp, "-n", w.Namespace).fails(t,
		`cannot pause KubeadmControlPlane cli-topology/c1-control-plane: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; pause its whole Cluster instead: kubectl patch cluster c1 -n cli-topology --type merge -p '{"spec":{"paused":true}}'`)
	rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).fails(t,
		"cannot switch the templates of MachineDeployment cli-topology/c1-md-0: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; change the templates of its worker class in the ClusterClass of Cluster c1, or the class and version in the Cluster's topology (spec.topology.workers.machineDeployments[name=md-0], spec.topology.version)")
	rolloutCmd(t, kcp, "--version", "v1.35.0", "-n", w.Namespace).fails(t,
		"cannot switch the template of KubeadmControlPlane cli-topology/c1-control-plane: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; change the control plane's machine infrastructure template in the ClusterClass of Cluster c1 (spec.controlPlane.machineInfrastructure), or spec.topology.version of the Cluster")
	w.Refresh(t)
	assert.EqualValues(t, 1, env.Stamps(t, w.MD).Revision)
	assert.EqualValues(t, 1, env.Stamps(t, w.KCP).Revision)
}
