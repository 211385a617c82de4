package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestPauseResume pauses and resumes a MachineDeployment (spec.paused) and
// a KubeadmControlPlane (the paused annotation), twice each: the second time
// there is nothing to do and the exit code is still 0.
func TestPauseResume(t *testing.T) {
	w := newWorld(t, "cli-pause", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	md, kcp := "machinedeployment/"+mdName, "kubeadmcontrolplane/"+kcpName

	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 paused\n", rolloutCmd(t, "pause", md, "-n", w.Namespace).ok(t))
	w.Refresh(t)
	assert.True(t, ptr.Deref(w.MD.Spec.Paused, false))
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 already paused\n", rolloutCmd(t, "pause", md, "-n", w.Namespace).ok(t))

	// A paused object is not restarted.
	rolloutCmd(t, "restart", md, "-n", w.Namespace).fails(t,
		"cannot restart MachineDeployment cli-pause/c1-md-0: it is paused (spec.paused is true), so Cluster API would not roll it out; resume it first with: rollout resume machinedeployment/c1-md-0 -n cli-pause")
	// A template switch is taken, and rolls out on resume.
	r := rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out: infrastructureRef c1-md-0 → c1-md-1\n", r.ok(t))
	assert.Equal(t, "Warning: MachineDeployment cli-pause/c1-md-0 is paused (spec.paused is true): the change is stored now and rolls out when it is resumed\n", r.stderr)

	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 resumed\n", rolloutCmd(t, "resume", md, "-n", w.Namespace).ok(t))
	w.Refresh(t)
	assert.False(t, ptr.Deref(w.MD.Spec.Paused, true))
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 already resumed\n", rolloutCmd(t, "resume", md, "-n", w.Namespace).ok(t))

	r = rolloutCmd(t, "pause", kcp, "-n", w.Namespace)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane paused\n", r.ok(t))
	assert.Equal(t, "Warning: pausing KubeadmControlPlane cli-pause/c1-control-plane also stops its remediation of unhealthy control-plane machines, and all of its other reconciliation, until it is resumed\n", r.stderr)
	w.Refresh(t)
	assert.Contains(t, w.KCP.Annotations, clusterv1.PausedAnnotation)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane already paused\n", rolloutCmd(t, "pause", kcp, "-n", w.Namespace).ok(t))
	rolloutCmd(t, "restart", "kcp/"+kcpName, "-n", w.Namespace, "--yes").fails(t,
		"cannot restart KubeadmControlPlane cli-pause/c1-control-plane: it is paused (annotation cluster.x-k8s.io/paused), so Cluster API would not roll it out; resume it first with: rollout resume kubeadmcontrolplane/c1-control-plane -n cli-pause")
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane resumed\n", rolloutCmd(t, "resume", kcp, "-n", w.Namespace).ok(t))
	w.Refresh(t)
	assert.NotContains(t, w.KCP.Annotations, clusterv1.PausedAnnotation)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane already resumed\n", rolloutCmd(t, "resume", kcp, "-n", w.Namespace).ok(t))

	// -o json prints the object as stored.
	out := rolloutCmd(t, "pause", md, "-n", w.Namespace, "-o", "json").ok(t)
	assert.Contains(t, out, `"kind": "MachineDeployment"`)
	assert.Contains(t, out, `"paused": true`)
	assert.NotContains(t, out, `"managedFields"`)
}

// TestSelectorAndCluster pauses, resumes and restarts several worker pools
// by label, and restarts a whole cluster: control plane first.
func TestSelectorAndCluster(t *testing.T) {
	w := newWorld(t, "cli-selector", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	w.MD.Labels["world"] = "cli-selector"
	require.NoError(t, env.Client.Update(context.Background(), w.MD))
	second := w.MD.DeepCopy()
	second.ObjectMeta = w.MD.ObjectMeta
	second.Name, second.ResourceVersion, second.UID, second.Annotations = "c1-md-1", "", "", nil
	second.CreationTimestamp = w.MD.CreationTimestamp
	second.CreationTimestamp.Reset()
	require.NoError(t, env.Client.Create(context.Background(), second))

	out := rolloutCmd(t, "pause", "md", "-l", "cluster.x-k8s.io/cluster-name=c1", "-n", w.Namespace).ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 paused\nmachinedeployment.cluster.x-k8s.io/c1-md-1 paused\n", out)
	out = rolloutCmd(t, "resume", "machinedeployments", "--selector", "world=cli-selector", "-A").ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 resumed\nmachinedeployment.cluster.x-k8s.io/c1-md-1 resumed\n", out)
	r := rolloutCmd(t, "resume", "md", "-l", "pool=nothing", "-n", w.Namespace)
	assert.Equal(t, "", r.ok(t))
	assert.Equal(t, "No resources found matching -l pool=nothing.\n", r.stderr)

	// One of two paused: the other is restarted, the paused one reported, exit 1.
	rolloutCmd(t, "pause", "md", "c1-md-1", "-n", w.Namespace).ok(t)
	r = rolloutCmd(t, "restart", "md", "-l", "pool=md-0", "-n", w.Namespace)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 restarted\n", r.stdout)
	r.fails(t, "restart failed for 1 of 2 objects")
	assert.Contains(t, r.stderr, "error: cannot restart MachineDeployment cli-selector/c1-md-1: it is paused")
	rolloutCmd(t, "resume", "md/c1-md-1", "-n", w.Namespace).ok(t)

	out = rolloutCmd(t, "restart", "cluster/c1", "-n", w.Namespace, "--at", "2033-01-01T00:00:00Z", "--yes").ok(t)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restart scheduled at 2033-01-01T00:00:00Z\n"+
		"machinedeployment.cluster.x-k8s.io/c1-md-0 restart scheduled at 2033-01-01T00:00:00Z\n"+
		"machinedeployment.cluster.x-k8s.io/c1-md-1 restart scheduled at 2033-01-01T00:00:00Z\n", out)

	// A paused control plane stops the cluster's restart before any worker.
	rolloutCmd(t, "pause", "kcp/"+kcpName, "-n", w.Namespace).ok(t)
	r = rolloutCmd(t, "restart", "clusters/c1", "-n", w.Namespace, "--yes")
	r.fails(t, "cannot restart KubeadmControlPlane cli-selector/c1-control-plane: it is paused (annotation cluster.x-k8s.io/paused), so Cluster API would not roll it out; resume it first with: rollout resume kubeadmcontrolplane/c1-control-plane -n cli-selector\nthe control plane restarts first: its worker pools were not restarted")
	assert.Empty(t, r.stdout)
}

// TestPauseWhileTheGuardIsDown pauses and resumes with the guard stopped but
// still registered (failurePolicy Fail): a pause sends nothing the guard's
// webhooks match, so it works when an incident may need it most.
func TestPauseWhileTheGuardIsDown(t *testing.T) {
	w := newWorld(t, "cli-pause-guard-down", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	require.NoError(t, env.StopGuard())
	t.Cleanup(func() {
		if err := env.StartGuard(context.Background()); err != nil {
			t.Fatalf("starting the guard again: %v", err)
		}
	})
	for _, res := range []string{"machinedeployment/" + mdName, "kubeadmcontrolplane/" + kcpName} {
		rolloutCmd(t, "pause", res, "-n", w.Namespace).ok(t)
		rolloutCmd(t, "resume", res, "-n", w.Namespace).ok(t)
	}
	// A restart is recorded by the guard, so it fails closed.
	r := rolloutCmd(t, "restart", "machinedeployment/"+mdName, "-n", w.Namespace)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `failed calling webhook "stamp.machinedeployment.rollout-guard.io"`)
}
