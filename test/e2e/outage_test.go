package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestCreatesFailOpenWhileTheGuardIsDown: an outage of the guard never stops
// Cluster API's core job. With the guard stopped, a new worker pool and a new
// cluster's control plane (as the topology controller or an operator makes
// them) are created, unstamped, while a version update still fails closed;
// once the guard is back, its reconciler records each new object's content
// as revision 1, adopted.
func TestCreatesFailOpenWhileTheGuardIsDown(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, worldSpec{cpVersion: "v1.34.2", mdVersion: "v1.34.2"})
	require.NoError(t, env.StopGuard())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			require.NoError(t, env.StartGuard(context.Background()))
		}
	})

	pool := w.md.DeepCopy()
	pool.ObjectMeta = metav1.ObjectMeta{Namespace: w.ns, Name: "c1-md-1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}}
	pool.Status = clusterv1.MachineDeploymentStatus{}
	require.NoError(t, env.Client.Create(ctx, pool), "a new worker pool while the guard is down")

	cluster := w.cluster.DeepCopy()
	cluster.ObjectMeta = metav1.ObjectMeta{Namespace: w.ns, Name: "c2"}
	cluster.Spec.ControlPlaneRef.Name = "c2-control-plane"
	cluster.Spec.Topology = clusterv1.Topology{}
	cluster.Status = clusterv1.ClusterStatus{}
	require.NoError(t, env.Client.Create(ctx, cluster), "a new Cluster while the guard is down")
	controlPlane := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "c2-control-plane", Labels: map[string]string{clusterv1.ClusterNameLabel: "c2"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](1),
			Version:  "v1.34.2",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "c2-control-plane"},
			}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, controlPlane), "a new control plane while the guard is down")
	for _, obj := range []client.Object{pool, controlPlane} {
		assert.Empty(t, obj.GetAnnotations()[revisions.AnnotationRevision], "%s %s: nothing stamped it", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}

	// Updates the guard polices still fail closed.
	err := edit(t, mergePatch, pool, "v1.34.3", mdVersion...)
	require.Error(t, err, "a MachineDeployment version change passed with the guard down")
	assert.Regexp(t, `failed calling webhook "(stamp|validate)\.machinedeployment\.rollout-guard\.io"`, err.Error())
	err = edit(t, mergePatch, controlPlane, "v1.35.0", kcpVersion...)
	require.Error(t, err, "a KubeadmControlPlane version change passed with the guard down")
	assert.Regexp(t, `failed calling webhook "(stamp|validate)\.kubeadmcontrolplane\.rollout-guard\.io"`, err.Error())

	require.NoError(t, env.StartGuard(ctx))
	restarted = true
	for _, obj := range []client.Object{pool, controlPlane} {
		var got []revisions.Revision
		require.Eventually(t, func() bool {
			revs, _, err := history.List(ctx, env.Client, w.ns, string(obj.GetUID()))
			got = revs
			return err == nil && len(revs) == 1
		}, 30*time.Second, 100*time.Millisecond, "the guard records what was created without it: %s", fmt.Sprint(got))
		assert.Equal(t, int64(1), got[0].Record.Revision, obj.GetName())
		assert.Equal(t, revisions.ChangeAdopted, got[0].Record.ChangeType, obj.GetName())
	}

	// With the guard back, the new control plane's updates are judged again.
	err = edit(t, mergePatch, controlPlane, "v1.36.0", kcpVersion...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[rule ControlPlaneMinorSkip]")
}
