package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/test/extension/handlers/upgradeplan"
	"sigs.k8s.io/controller-runtime/pkg/client"

	planv1alpha1 "github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// planClassName is the ClusterClass that names the test extension's
	// upgrade-plan handler; planClusterName its cluster.
	planClassName   = "plan-class"
	planClusterName = "plan-cc"
	// chainFrom and chainTo are the cluster's version at its creation and
	// the one it is upgraded to, three minors later. The test extension
	// plans with the versions of kind's images and ends a plan at one of
	// them (for v1.35.2 it answers v1.33.12, v1.34.11, v1.35.0, which
	// Cluster API refuses): chainTo is one.
	chainFrom = "v1.32.4"
	chainTo   = "v1.35.8"
)

// TestChainedUpgradeFromTheUpgradePlanExtension creates a ClusterClass
// cluster whose class names the test extension's GenerateUpgradePlan
// handler (spec.upgrade.external.generateUpgradePlanExtension) and upgrades
// it three minors: rollout plan asks the extension and shows its steps, the
// same the extension gives for that upgrade (its handler asked directly);
// Cluster API's topology controller then takes the control plane through
// exactly those versions and the workers through the plan's, rollout status
// exits 0, and every machine runs the target.
func TestChainedUpgradeFromTheUpgradePlanExtension(t *testing.T) {
	ctx := context.Background()
	ns := sandbox.DefaultNamespace
	handler := sandbox.GenerateUpgradePlanHandler + "." + sandbox.TestExtensionName
	class := sandbox.ClassSpec{Name: planClassName, Namespace: ns, MachineStartup: sandbox.DefaultMachineStartup, UpgradePlanExtension: handler}
	begin := time.Now()
	cc, err := sb.CreateClassCluster(ctx, sandbox.ClassClusterSpec{
		Name: planClusterName, Namespace: ns, Class: class,
		ControlPlaneMachines: 1, WorkerMachines: 1, KubernetesVersion: chainFrom,
	})
	require.NoError(t, err)
	sb.RequireClusterReady(t, ns, cc.Name, rolloutTimeout)
	timings.Add("%-58s %s", "class cluster "+cc.Name+" ready (1+1)", time.Since(begin).Round(100*time.Millisecond))

	// The extension's steps for this upgrade, from its handler itself.
	cluster := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cc.Name}, cluster))
	answer := &runtimehooksv1.GenerateUpgradePlanResponse{}
	upgradeplan.NewExtensionHandlers(sb.Client).DoGenerateUpgradePlan(ctx, &runtimehooksv1.GenerateUpgradePlanRequest{
		Cluster: *cluster, FromControlPlaneKubernetesVersion: chainFrom, FromWorkersKubernetesVersion: chainFrom, ToKubernetesVersion: chainTo,
	}, answer)
	require.Equal(t, runtimehooksv1.ResponseStatusSuccess, answer.Status, "the extension's answer: %s", answer.Message)
	var wantCP, wantWorkers []string
	for _, s := range answer.ControlPlaneUpgrades {
		wantCP = append(wantCP, s.Version)
	}
	for _, s := range answer.WorkersUpgrades {
		wantWorkers = append(wantWorkers, s.Version)
	}
	require.Greater(t, len(wantCP), 1, "the extension chains the upgrade: %v", wantCP)
	require.Equal(t, chainTo, wantCP[len(wantCP)-1])
	t.Logf("the extension's steps %s → %s: control plane %v, workers %v", chainFrom, chainTo, wantCP, wantWorkers)

	// rollout plan shows the extension's steps.
	cacheDir := t.TempDir()
	planRun := sb.RunCLI(cacheDir, ns, "plan", "cluster/"+cc.Name, "--version", chainTo, "-o", "json")
	require.Equal(t, 0, planRun.Code, "rollout plan; stderr:\n%s", planRun.Stderr)
	plan := &planv1alpha1.RolloutPlan{}
	require.NoError(t, json.Unmarshal([]byte(planRun.Stdout), plan), "rollout plan -o json:\n%s", planRun.Stdout)
	require.Len(t, plan.Objects, 1)
	op := plan.Objects[0]
	assert.Equal(t, "upgrade-plan extension "+handler+" of ClusterClass "+planClassName+", asked now (Cluster API asks it again when the upgrade starts)", op.StepsFrom)
	var planCP, planWorkers []string
	for _, s := range op.Steps {
		if s.Part == "controlPlane" {
			planCP = append(planCP, s.Version)
		} else {
			planWorkers = append(planWorkers, s.Version)
		}
	}
	assert.Equal(t, wantCP, planCP, "the plan's control-plane steps")
	if len(wantWorkers) > 0 {
		assert.Equal(t, wantWorkers, planWorkers, "the plan's worker steps")
	}
	human := sb.RunCLI(cacheDir, ns, "plan", "cluster/"+cc.Name, "--version", chainTo)
	require.Equal(t, 0, human.Code, "rollout plan; stderr:\n%s", human.Stderr)
	t.Logf("rollout plan:\n%s", human.Stdout)

	// The upgrade: the control plane and the workers go through the
	// extension's versions.
	begin = time.Now()
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Topology.Version = chainTo
	require.NoError(t, sb.Client.Patch(ctx, cluster, patch), "upgrading %s to %s", cc.Name, chainTo)
	status := sb.StartCLI(cacheDir, ns, "status", "cluster/"+cc.Name, "--timeout", (2 * rolloutTimeout).String())
	var cpSeen, workersSeen []string
	note := func(seen []string, v string) []string {
		if v != chainFrom && (len(seen) == 0 || seen[len(seen)-1] != v) {
			seen = append(seen, v)
		}
		return seen
	}
	framework.WaitFor(t, 2*rolloutTimeout, 250*time.Millisecond, "the chained upgrade of "+cc.Name+" to "+chainTo, func() (bool, string) {
		kcp := &controlplanev1.KubeadmControlPlane{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cc.ControlPlaneName()}, kcp))
		md := &clusterv1.MachineDeployment{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cc.MachineDeploymentName()}, md))
		cpSeen = note(cpSeen, kcp.Spec.Version)
		workersSeen = note(workersSeen, md.Spec.Template.Spec.Version)
		state, err := sandbox.ReadClusterState(ctx, sb.Client, ns, cc.Name)
		require.NoError(t, err)
		done := state.Ready() && state.ControlPlane.Version == chainTo
		for _, w := range state.Workers {
			done = done && w.Version == chainTo
		}
		return done, fmt.Sprintf("control plane %v, workers %v; %s", cpSeen, workersSeen, state)
	})
	timings.Add("%-58s %s", fmt.Sprintf("chained upgrade %s → %s (%d control-plane steps)", chainFrom, chainTo, len(wantCP)),
		time.Since(begin).Round(100*time.Millisecond))
	assert.Equal(t, wantCP, cpSeen, "the control plane's versions during the upgrade")
	if len(wantWorkers) > 0 {
		assert.Equal(t, wantWorkers, workersSeen, "the workers' versions during the upgrade")
	}
	// Without worker steps from the extension, Cluster API picks them; the
	// plan's are what it did.
	assert.Equal(t, planWorkers, workersSeen, "the plan's worker steps, against the workers' versions during the upgrade")
	var run sandbox.CLIRun
	select {
	case run = <-status.Done():
	case <-time.After(rolloutTimeout):
		t.Fatalf("rollout status still running after the upgrade; stdout so far:\n%s", status.Stdout.String())
	}
	assert.Equal(t, 0, run.Code, "rollout status; stdout:\n%s\nstderr:\n%s", run.Stdout, run.Stderr)
	machines := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cc.Name}))
	require.NotEmpty(t, machines.Items)
	for _, m := range machines.Items {
		assert.Equal(t, chainTo, m.Spec.Version, "Machine %s", m.Name)
	}
}
