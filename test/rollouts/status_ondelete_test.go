package rollouts

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
)

// setRolloutStrategy sets the rollout strategy of md (none of RollingUpdate's
// settings with OnDelete, as Cluster API requires); md is updated.
func setRolloutStrategy(t *testing.T, md *clusterv1.MachineDeployment, strategy clusterv1.MachineDeploymentRolloutStrategyType) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(md), md))
	base := md.DeepCopy()
	md.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{Type: strategy}
	require.NoError(t, sb.Client.Patch(ctx, md, client.MergeFrom(base)))
}

// TestStatusOfAnOnDeleteMachineDeployment switches the template of a worker
// pool with the OnDelete strategy: Cluster API replaces none of its
// machines until they are deleted, and status says so with its own verdict
// (exit 8, the old machines named) instead of waiting out the progress
// deadline or the timeout. Once the old machines are deleted by hand, status
// follows their replacement to the end (exit 0).
func TestStatusOfAnOnDeleteMachineDeployment(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
	name := "md/" + key.Name
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, key, md))
	setRolloutStrategy(t, md, clusterv1.OnDeleteMachineDeploymentStrategyType)
	defer setRolloutStrategy(t, md, clusterv1.RollingUpdateMachineDeploymentStrategyType)
	old := machines(t, workerLabels())
	require.Len(t, old, workerMachines)

	switchWorkerTemplate(t, md, otherWorkerTemplate(md))
	// The timeout and the progress deadline are far beyond what the verdict
	// takes: a stall would end in exit 2, not 8.
	r := runRollout(t, "status", name, "--timeout", "2m")
	require.Equal(t, rollout.ExitWaitingForDeletion, r.Code, "exit code; stderr:\n%s", r.Stderr)
	assert.Contains(t, r.Stderr, "error: machinedeployment/"+key.Name+" is waiting for 2 old machines to be deleted (OnDelete strategy): Cluster API replaces a machine of it only when the machine is deleted; delete them (kubectl delete machine -n "+demo.Namespace+" ")
	assert.Contains(t, r.Stdout, "waiting for 2 old machines to be deleted (OnDelete strategy)")
	for n := range old {
		assert.Contains(t, r.Stderr, n, "the old machine is named")
	}
	// Nothing was replaced.
	now := machines(t, workerLabels())
	assert.ElementsMatch(t, names(old), names(now), "OnDelete replaced a machine nobody deleted")

	r = runRollout(t, "status", name, "--watch=false")
	assert.Equal(t, rollout.ExitWaitingForDeletion, r.Code, "--watch=false gives the same verdict; stderr:\n%s", r.Stderr)

	for _, m := range old {
		require.NoError(t, client.IgnoreNotFound(sb.Client.Delete(ctx, m)), "deleting %s by hand", m.Name)
	}
	r = runRollout(t, "status", name, "--timeout", "3m")
	require.Equal(t, 0, r.Code, "exit code once the old machines are deleted; stderr:\n%s", r.Stderr)
	requireAllNew(t, workerLabels(), old, workerMachines)
	for _, m := range old {
		err := sb.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
		assert.True(t, apierrors.IsNotFound(err), "old machine %s still exists: %v", m.Name, err)
	}
	requireClusterReady(t)
}
