package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	planv1alpha1 "github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// rolloutTimeout bounds the wait for the in-place upgrade of the control
// plane: the test extension takes 15–20 s per machine, one at a time.
const rolloutTimeout = 6 * time.Minute

// TestControlPlaneUpgradedInPlace upgrades demo's control plane by one
// minor with Cluster API's in-place updates on: rollout plan says each
// machine is updated in place if the registered extension's
// CanUpdateMachine handler accepts; Cluster API then updates every machine
// in place (Machine condition Updating seen), so the same Machines (names
// and UIDs) run the new version and no control-plane machine is created or
// deleted; rollout status exits 0; the guard recorded the upgrade as one
// new revision; and an undo to the old version is refused by the guard, as
// a downgrade of what the control plane has run.
func TestControlPlaneUpgradedInPlace(t *testing.T) {
	require.NotNil(t, sb.ControlPlane, "the sandbox runs bin/capi-kcp")
	require.True(t, sb.ControlPlane.Running(), "bin/capi-kcp runs")
	ctx := context.Background()
	demo := sb.Clusters[0]
	ns := demo.Namespace
	kcpName := demo.ControlPlaneName()
	kcpKey := client.ObjectKey{Namespace: ns, Name: kcpName}
	cacheDir := t.TempDir()

	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, kcpKey, kcp))
	require.Equal(t, kubernetesVersion, kcp.Spec.Version)
	require.Equal(t, "0", kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge.String(), "the control plane's maxSurge")
	before := controlPlaneMachines(t, kcpName)
	require.Len(t, before, controlPlaneReplicas)
	prevRevision, err := strconv.ParseInt(kcp.Annotations[revisions.AnnotationRevision], 10, 64)
	require.NoError(t, err, "the control plane's revision stamp")
	recordsBefore := records(t, kcp.UID)

	// The plan: every machine updated in place if the extension accepts.
	wantHandler := sandbox.CanUpdateMachineHandler + "." + sandbox.TestExtensionName
	planRun := sb.RunCLI(cacheDir, ns, "plan", "kcp/"+kcpName, "--version", upgradeVersion, "-o", "json")
	require.Equal(t, 0, planRun.Code, "rollout plan; stderr:\n%s", planRun.Stderr)
	plan := &planv1alpha1.RolloutPlan{}
	require.NoError(t, json.Unmarshal([]byte(planRun.Stdout), plan), "rollout plan -o json:\n%s", planRun.Stdout)
	assert.True(t, plan.Admitted, "the plan's verdict")
	require.Len(t, plan.Objects, 1)
	op := plan.Objects[0]
	require.NotNil(t, op.Strategy)
	assert.Equal(t, "0", op.Strategy.MaxSurge, "the plan's maxSurge")
	var planned []string
	for _, m := range op.Machines {
		planned = append(planned, m.Name)
		assert.Equal(t, planv1alpha1.ActionReplace, m.Action, "machine %s", m.Name)
		assert.Equal(t, wantHandler, m.InPlaceIfAccepted, "machine %s: the handlers that may update it in place", m.Name)
	}
	sort.Strings(planned)
	assert.Equal(t, names(before), planned, "the machines the plan names")
	human := sb.RunCLI(cacheDir, ns, "plan", "kcp/"+kcpName, "--version", upgradeVersion)
	require.Equal(t, 0, human.Code, "rollout plan; stderr:\n%s", human.Stderr)
	assert.Contains(t, human.Stdout, fmt.Sprintf("In place: %d machines updated in place if extension %s accepts (Cluster API's InPlaceUpdates), otherwise replaced",
		controlPlaneReplicas, wantHandler))
	t.Logf("rollout plan:\n%s", human.Stdout)

	// The upgrade, by the admin; rollout status follows it to the end.
	begin := time.Now()
	patch := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Version = upgradeVersion
	require.NoError(t, sb.Client.Patch(ctx, kcp, patch), "upgrading %s to %s", kcpName, upgradeVersion)
	status := sb.StartCLI(cacheDir, ns, "status", "kcp/"+kcpName, "--timeout", rolloutTimeout.String())

	// Every machine updated in place, one after the other: the same
	// Machines, each seen Updating, until all run the new version.
	seenUpdating := map[string]bool{}
	framework.WaitFor(t, rolloutTimeout, 250*time.Millisecond, "every control-plane machine updated in place to "+upgradeVersion, func() (bool, string) {
		now := controlPlaneMachines(t, kcpName)
		if !assert.Equal(t, uids(before), uids(now), "the control plane's Machines (name → UID) during the upgrade") {
			return true, "a control-plane machine was created or deleted"
		}
		done := 0
		for _, m := range now {
			if conditions.IsTrue(&m, clusterv1.MachineUpdatingCondition) {
				seenUpdating[m.Name] = true
			}
			if m.Spec.Version == upgradeVersion && conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition) &&
				!conditions.IsTrue(&m, clusterv1.MachineUpdatingCondition) {
				done++
			}
		}
		return done == len(now), fmt.Sprintf("%d of %d machines updated; seen updating: %v", done, len(now), seenUpdating)
	})
	if t.Failed() {
		return
	}
	timings.Add("%-58s %s", fmt.Sprintf("control plane %s → %s, %d machines in place", kubernetesVersion, upgradeVersion, controlPlaneReplicas),
		time.Since(begin).Round(100*time.Millisecond))
	for _, m := range before {
		assert.True(t, seenUpdating[m.Name], "Machine %s seen with Updating=True", m.Name)
	}

	var run sandbox.CLIRun
	select {
	case run = <-status.Done():
	case <-time.After(rolloutTimeout):
		t.Fatalf("rollout status still running after the machines were updated; stdout so far:\n%s", status.Stdout.String())
	}
	assert.Equal(t, 0, run.Code, "rollout status; stdout:\n%s\nstderr:\n%s", run.Stdout, run.Stderr)
	t.Logf("rollout status (exit %d, %s):\n%s", run.Code, run.Took.Round(100*time.Millisecond), run.Stdout)
	sb.RequireClusterReady(t, ns, demo.Name, rolloutTimeout)
	after := controlPlaneMachines(t, kcpName)
	assert.Equal(t, uids(before), uids(after), "the control plane's Machines (name → UID) after the upgrade")
	for _, m := range after {
		assert.Equal(t, upgradeVersion, m.Spec.Version, "Machine %s's version", m.Name)
	}

	// The guard: one new revision, the upgrade, by the admin.
	require.NoError(t, sb.Client.Get(ctx, kcpKey, kcp))
	assert.Equal(t, strconv.FormatInt(prevRevision+1, 10), kcp.Annotations[revisions.AnnotationRevision], "the upgrade's revision stamp")
	var recordsAfter []rgv1alpha1.RolloutRevision
	framework.WaitFor(t, time.Minute, 250*time.Millisecond, "the upgrade's revision recorded", func() (bool, string) {
		recordsAfter = records(t, kcp.UID)
		return len(recordsAfter) > len(recordsBefore), fmt.Sprintf("%d RolloutRevisions (%d before)", len(recordsAfter), len(recordsBefore))
	})
	assert.Len(t, recordsAfter, len(recordsBefore)+1, "RolloutRevisions of %s: one new", kcpName)

	// Undo to the old version: refused, as a downgrade of what the control
	// plane ran, by the CLI's own check and by the guard (server-side dry
	// run), and nothing changes.
	refusal := fmt.Sprintf(`KubeadmControlPlane.controlplane.cluster.x-k8s.io %q is invalid: spec.version: Forbidden: `+
		`KubeadmControlPlane %s: Kubernetes downgrade from %s to %s is not supported by kubeadm [rule ControlPlaneDowngrade]; `+
		`keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`,
		kcpName, kcpName, upgradeVersion, kubernetesVersion)
	undo := sb.RunCLI(cacheDir, ns, "undo", "kcp/"+kcpName)
	assert.Equal(t, 6, undo.Code, "rollout undo: refused; stdout:\n%s", undo.Stdout)
	assert.Contains(t, undo.Stderr, "error: rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+refusal+"\n")
	t.Logf("rollout undo (exit %d):\nstdout:\n%s\nstderr:\n%s", undo.Code, undo.Stdout, undo.Stderr)
	undo = sb.RunCLI(cacheDir, ns, "undo", "kcp/"+kcpName, "--dry-run=server")
	assert.Equal(t, 6, undo.Code, "rollout undo --dry-run=server: refused by the guard; stdout:\n%s", undo.Stdout)
	assert.Contains(t, undo.Stderr, `error: admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: `+refusal+"\n")
	t.Logf("rollout undo --dry-run=server (exit %d):\nstdout:\n%s\nstderr:\n%s", undo.Code, undo.Stdout, undo.Stderr)
	require.NoError(t, sb.Client.Get(ctx, kcpKey, kcp))
	assert.Equal(t, upgradeVersion, kcp.Spec.Version, "the control plane's version after the refused undo")
	assert.Equal(t, strconv.FormatInt(prevRevision+1, 10), kcp.Annotations[revisions.AnnotationRevision], "the revision after the refused undo")
	assert.Len(t, records(t, kcp.UID), len(recordsBefore)+1, "RolloutRevisions of %s after the refused undo", kcpName)
}

// controlPlaneMachines returns the Machines of KubeadmControlPlane kcp.
func controlPlaneMachines(t *testing.T, kcp string) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(sb.Clusters[0].Namespace),
		client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp}))
	return list.Items
}

// names returns the machines' names, sorted.
func names(machines []clusterv1.Machine) []string {
	var out []string
	for _, m := range machines {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// uids maps the machines' names to their UIDs.
func uids(machines []clusterv1.Machine) map[string]types.UID {
	out := map[string]types.UID{}
	for _, m := range machines {
		out[m.Name] = m.UID
	}
	return out
}

// records returns the guard's RolloutRevisions of the object with uid.
func records(t *testing.T, uid types.UID) []rgv1alpha1.RolloutRevision {
	t.Helper()
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(sb.Clusters[0].Namespace),
		client.MatchingLabels{revisions.LabelOwnerUID: string(uid)}))
	return list.Items
}
