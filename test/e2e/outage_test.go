package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestCreatesFailOpenWhileTheGuardIsDown: an outage of the guard never stops
// Cluster API's core job. With the guard stopped, a new worker pool and a new
// cluster's control plane (as the topology controller or an operator makes
// them) are created, unstamped, while a version update still fails closed;
// once the guard is back, its reconciler records each new object's content
// as revision 1, adopted.
func TestCreatesFailOpenWhileTheGuardIsDown(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	restartGuard := stopGuard(t)

	pool := builder.MachineDeployment(w.Namespace, "c1-md-1").WithSpecOf(w.MD).
		WithLabels(map[string]string{clusterv1.ClusterNameLabel: "c1"}).Build()
	require.NoError(t, env.Client.Create(ctx, pool), "a new worker pool while the guard is down")

	cluster := builder.Cluster(w.Namespace, "c2").WithControlPlane("c2-control-plane").WithInfrastructure("c2").Build()
	require.NoError(t, env.Client.Create(ctx, cluster), "a new Cluster while the guard is down")
	controlPlane := builder.KubeadmControlPlane(w.Namespace, "c2-control-plane").WithClusterName("c2").
		WithReplicas(1).WithVersion("v1.34.2").WithInfrastructureTemplate("c2-control-plane").Build()
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

	restartGuard()
	for _, obj := range []client.Object{pool, controlPlane} {
		var got []revisions.Revision
		require.Eventually(t, func() bool {
			revs, _, err := history.List(ctx, env.Client, w.Namespace, string(obj.GetUID()))
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
