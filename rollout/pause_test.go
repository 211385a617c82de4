package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestPauseResume: a MachineDeployment is paused with spec.paused, a
// KubeadmControlPlane with the annotation (and a warning of what that also
// stops); pausing a paused object or resuming a running one changes
// nothing; resume clears spec.paused and the annotation alike. Neither
// carries a change-cause: pausing changes no revision.
func TestPauseResume(t *testing.T) {
	cl, w := newWriteRecordingClient(gitOpsWorld(t, nil)...)
	md := &clusterv1.MachineDeployment{}
	md.Namespace, md.Name = topoNS, "c1-md-0"
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Namespace, kcp.Name = topoNS, "c1-control-plane"

	out, errOut, code := runFake(t, cl, gitOpsNow, "pause", "md/c1-md-0", "kcp/c1-control-plane")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 paused\nkubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane paused\n", out)
	assert.Equal(t, "Warning: pausing KubeadmControlPlane demo/c1-control-plane also stops its remediation of unhealthy control-plane machines, and all of its other reconciliation, until it is resumed\n", errOut)
	getObj(t, cl, md)
	getObj(t, cl, kcp)
	assert.Equal(t, ptr.To(true), md.Spec.Paused)
	assert.NotContains(t, md.Annotations, clusterv1.PausedAnnotation)
	assert.Equal(t, "true", kcp.Annotations[clusterv1.PausedAnnotation])
	assert.Len(t, w.all(), 2)

	out, errOut, code = runFake(t, cl, gitOpsNow, "pause", "md/c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 already paused\n", out)
	assert.Len(t, w.all(), 2, "nothing sent")

	// Someone paused the pool with the annotation as well: resume clears both.
	md.Annotations[clusterv1.PausedAnnotation] = ""
	require.NoError(t, cl.Update(t.Context(), md))
	out, errOut, code = runFake(t, cl, gitOpsNow, "resume", "md", "c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 resumed\n", out)
	getObj(t, cl, md)
	assert.Equal(t, ptr.To(false), md.Spec.Paused)
	assert.NotContains(t, md.Annotations, clusterv1.PausedAnnotation)
	assert.Equal(t, "rollout md/c1-md-0 --version v1.34.2", md.Annotations[revisions.AnnotationChangeCause], "the change-cause of the revision, unchanged")

	out, errOut, code = runFake(t, cl, gitOpsNow, "resume", "kcp/c1-control-plane", "-o", "name")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane\n", out)
	getObj(t, cl, kcp)
	assert.NotContains(t, kcp.Annotations, clusterv1.PausedAnnotation)

	out, _, code = runFake(t, cl, gitOpsNow, "resume", "kcp/c1-control-plane")
	assert.Equal(t, core.ExitOK, code)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane already resumed\n", out)
}

// TestPauseRefused: a Cluster is paused with its own spec.paused, and an
// object its topology manages through its Cluster; both are refused with
// the command to run instead, and nothing is sent.
func TestPauseRefused(t *testing.T) {
	cl, w := newWriteRecordingClient(objectsOf(chainDone)...)
	_, errOut, code := runFake(t, cl, gitOpsNow, "pause", "cluster/c1")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, `error: cannot pause Cluster demo/c1: pause works on machinedeployment, machinepool and kubeadmcontrolplane objects; to pause a whole cluster, set its spec.paused (kubectl patch cluster c1 -n demo --type merge -p '{"spec":{"paused":true}}')`+"\n", errOut)

	_, errOut, code = runFake(t, cl, gitOpsNow, "pause", "kcp/c1-control-plane")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, `error: cannot pause KubeadmControlPlane demo/c1-control-plane: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; pause its whole Cluster instead: kubectl patch cluster c1 -n demo --type merge -p '{"spec":{"paused":true}}'`+"\n", errOut)

	// Several objects: each failure is printed, then a summary.
	_, errOut, code = runFake(t, cl, gitOpsNow, "pause", "md", "-l", clusterv1.ClusterNameLabel+"=c1")
	assert.Equal(t, core.ExitError, code)
	assert.Contains(t, errOut, "error: cannot pause MachineDeployment demo/c1-md-0: it is managed by the topology of Cluster c1")
	assert.Empty(t, w.all())

	// Resuming a topology-managed object is allowed: it undoes a pause
	// made before the topology took it over.
	_, errOut, code = runFake(t, cl, gitOpsNow, "resume", "md/c1-md-0")
	assert.Equal(t, core.ExitOK, code, errOut)
}
