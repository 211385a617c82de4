package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// planMachines runs `rollout plan ... -o json` and returns its machines.
func planMachines(t *testing.T, ns string, args ...string) []v1alpha1.PlanMachine {
	t.Helper()
	out := rolloutCmd(t, append(append([]string{"plan"}, args...), "-o", "json", "-n", ns)...).ok(t)
	p := &v1alpha1.RolloutPlan{}
	require.NoError(t, json.Unmarshal([]byte(out), p))
	require.Len(t, p.Objects, 1)
	return p.Objects[0].Machines
}

// With a Runtime Extension registered for CanUpdateMachine (an
// ExtensionConfig whose status lists the handler, as Cluster API's
// ExtensionConfig controller writes it, for the namespace of the control
// plane), plan says a control-plane machine replaced by a version bump is
// updated in place if the extension accepts, otherwise replaced, and
// --fail-on-replace says what it cannot promise. Without one, or for
// another namespace, the plan is as before. (A restart, always a
// replacement, is a unit test: this environment's clock is not the API
// server's.)
func TestPlanNamesInPlaceExtensions(t *testing.T) {
	ctx := context.Background()
	const ns = "cli-inplace"
	const handler = "can-update-machine.rollout-guard-test-extension"
	w := env.NewWorld(t, ns, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2", Running: []string{"v1.35.2"}})
	w.AddMachine(t, "c1-control-plane-a", "v1.35.2", map[string]string{
		clusterv1.ClusterNameLabel: framework.WorldClusterName, clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: framework.WorldControlPlaneName,
	})
	kcp := "kcp/" + framework.WorldControlPlaneName

	got := planMachines(t, ns, kcp, "--version", "v1.36.1")
	require.Len(t, got, 1)
	assert.Equal(t, v1alpha1.ActionReplace, got[0].Action)
	assert.Empty(t, got[0].InPlaceIfAccepted, "no extension registered")

	ext := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-test-extension"}}
	ext.Spec.ClientConfig.URL = "https://127.0.0.1:9/"
	ext.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	require.NoError(t, env.Client.Create(ctx, ext))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ext) })
	ext.Status.Handlers = []runtimev1.ExtensionHandler{
		{Name: handler, RequestHook: runtimev1.GroupVersionHook{APIVersion: "hooks.runtime.cluster.x-k8s.io/v1alpha1", Hook: "CanUpdateMachine"}, TimeoutSeconds: 10, FailurePolicy: runtimev1.FailurePolicyFail},
		{Name: "generate-upgrade-plan.rollout-guard-test-extension", RequestHook: runtimev1.GroupVersionHook{APIVersion: "hooks.runtime.cluster.x-k8s.io/v1alpha1", Hook: "GenerateUpgradePlan"}, TimeoutSeconds: 10, FailurePolicy: runtimev1.FailurePolicyFail},
	}
	ext.Status.Conditions = []metav1.Condition{{Type: "Discovered", Status: metav1.ConditionTrue, Reason: "Discovered", LastTransitionTime: metav1.Now()}}
	require.NoError(t, env.Client.Status().Update(ctx, ext))

	got = planMachines(t, ns, kcp, "--version", "v1.36.1")
	require.Len(t, got, 1)
	assert.Equal(t, v1alpha1.ActionReplace, got[0].Action, "the extension may refuse: still counted as replaced")
	assert.Equal(t, handler, got[0].InPlaceIfAccepted)

	out := rolloutCmd(t, "plan", kcp, "--version", "v1.36.1", "-n", ns).ok(t)
	assert.Contains(t, out, "  In place: 1 machine updated in place if extension "+handler+" accepts (Cluster API's InPlaceUpdates), otherwise replaced\n")
	assert.Contains(t, out, "updated in place if extension "+handler+" accepts (Cluster API's InPlaceUpdates), otherwise replaced: version v1.35.2 → v1.36.1")

	r := rolloutCmd(t, "plan", kcp, "--version", "v1.36.1", "--fail-on-replace", "-n", ns)
	assert.Equal(t, rollout.ExitWouldReplace, r.code)
	assert.Contains(t, r.stderr, "error: the change would replace 1 machine (--fail-on-replace); 1 of them Cluster API first offers for an in-place update to "+handler+
		" (with its InPlaceUpdates feature gate): whether it accepts is known only when Cluster API asks, so plan cannot promise that none is replaced; nothing was changed\n")

	// The extension selects another namespace: as without it.
	base := ext.DeepCopy()
	ext.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "elsewhere"}}
	require.NoError(t, env.Client.Patch(ctx, ext, client.MergeFrom(base)))
	got = planMachines(t, ns, kcp, "--version", "v1.36.1")
	require.Len(t, got, 1)
	assert.Empty(t, got[0].InPlaceIfAccepted, "an extension for other namespaces")
}
