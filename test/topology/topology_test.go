package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// requireAllAt waits until Cluster name is ready and every one of its
// Machines runs version.
func requireAllAt(t *testing.T, name, version string) {
	t.Helper()
	framework.WaitFor(t, rolloutTimeout, pollInterval, fmt.Sprintf("every Machine of %s at %s", name, version), func() (bool, string) {
		got := allMachines(t, name)
		for _, v := range got {
			if v != version {
				return false, fmt.Sprint(got)
			}
		}
		return len(got) > 0, fmt.Sprint(got)
	})
	sb.RequireClusterReady(t, cc.Namespace, name, rolloutTimeout)
}

// TestRevertOfATopologyBump: a topology version bump that no control-plane
// Machine has run can be taken back (with Cluster API's bypass annotation,
// without which Cluster API refuses any decrease); once a control-plane
// Machine with the new version exists, the guard refuses the same revert.
func TestRevertOfATopologyBump(t *testing.T) {
	requireAllAt(t, cc.Name, startVersion)
	setBypass(t, cc.Name, true)
	defer setBypass(t, cc.Name, false)

	// Paused, the topology controller does not pass the bump on.
	setPaused(t, cc.Name, true)
	_, stderr := mustKubectl(t, "patch", "cluster", cc.Name, "--type", "merge", "-p", `{"spec":{"topology":{"version":"v1.33.5"}}}`)
	assert.Contains(t, stderr, "rollout-guard: annotation "+bypass+" skips Cluster API's checks only; rollout-guard's rules still apply")
	stdout, stderr, err := patchTopologyVersion(cc.Name, startVersion)
	require.NoError(t, err, "the revert of a bump no machine has run is allowed\nstdout: %s\nstderr: %s", stdout, stderr)
	assert.Contains(t, stderr, "Warning: Cluster demo-cc: spec.topology.version goes back from v1.33.5 to v1.32.4; allowed as a revert only because no control-plane machine was created with v1.33.5 or runs it")

	// Now let it roll, and take it back once a machine runs it: refused.
	mustKubectl(t, "patch", "cluster", cc.Name, "--type", "merge", "-p", `{"spec":{"topology":{"version":"v1.33.5"}}}`)
	setPaused(t, cc.Name, false)
	waitForControlPlaneMachineAt(t, cc.Name, "v1.33.5")
	stdout, stderr, err = patchTopologyVersion(cc.Name, startVersion)
	require.Error(t, err, "the revert of a bump a machine runs must be refused\nstdout: %s", stdout)
	assert.Contains(t, stderr, `The Cluster "`+cc.Name+`" is invalid`)
	assert.Contains(t, stderr, "spec.topology.version: Forbidden: Cluster demo-cc: Kubernetes downgrade from v1.33.5 to v1.32.4 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.topology.version at v1.33.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)")

	requireAllAt(t, cc.Name, "v1.33.5")
}

// TestTopologyRefusals: what the guard still refuses on topology clusters.
func TestTopologyRefusals(t *testing.T) {
	ctx := context.Background()
	requireAllAt(t, cc.Name, "v1.33.5")

	t.Run("a hand-made pool four minors behind the target", func(t *testing.T) {
		class := sandbox.DefaultClass(cc.Namespace)
		extra := builder.MachineDeployment(cc.Namespace, "demo-cc-extra").
			WithLabels(map[string]string{clusterv1.ClusterNameLabel: cc.Name}).WithClusterName(cc.Name).WithReplicas(0).
			WithSelector(map[string]string{"pool": "extra"}).WithTemplateLabels(map[string]string{clusterv1.ClusterNameLabel: cc.Name}).
			WithVersion("v1.32.4").WithBootstrapTemplate(class.WorkerTemplateName()).
			WithInfrastructureTemplate(class.WorkerTemplateName()).Build()
		require.NoError(t, sb.Client.Create(ctx, extra))
		defer func() { require.NoError(t, sb.Client.Delete(ctx, extra)) }()

		stdout, stderr, err := patchTopologyVersion(cc.Name, "v1.36.1")
		require.Error(t, err, "stdout: %s", stdout)
		assert.Contains(t, stderr, `The Cluster "`+cc.Name+`" is invalid`)
		assert.Contains(t, stderr, "spec.topology.version: Forbidden: Cluster demo-cc: MachineDeployment demo-cc-extra runs v1.32.4, 4 minors older than v1.36.1; a kubelet may be at most 3 minors older than the API server [rule ControlPlaneLeavesWorkerTooOld]; upgrade MachineDeployment demo-cc-extra to v1.33.x or newer first, then set spec.topology.version to v1.36.1")
		assert.NotContains(t, stderr, "demo-cc-md-0", "the topology's own pool is upgraded by the topology controller")
		assert.Equal(t, "v1.33.5", kcp(t, cc.ControlPlaneName()).Spec.Version, "nothing was changed")
	})

	t.Run("a jump of three minors on a class without a version list", func(t *testing.T) {
		plain := sandbox.PlainClass(cc.Namespace)
		require.NoError(t, sb.CreateClass(ctx, plain))
		objs, err := sandbox.ClassClusterObjects(sandbox.ClassClusterSpec{
			Name: "demo-plain", Namespace: cc.Namespace, Class: plain, ControlPlaneMachines: 1, WorkerMachines: 1,
			KubernetesVersion: "v1.33.5", Port: 1,
		})
		require.NoError(t, err)
		cluster := objs[0].(*clusterv1.Cluster)
		// Paused: only its version is at stake here, not its machines.
		cluster.Spec.Paused = ptr.To(true)
		require.NoError(t, sb.Client.Create(ctx, cluster))
		defer func() { require.NoError(t, sb.Client.Delete(ctx, cluster)) }()

		// Both judges refuse it; which answer the API server returns first
		// is a race, so the API server's count of the guard's refusals
		// shows that the guard refused it too.
		before := guardRejections(t, false)[guardClusterWebhook]
		_, stderr, err := patchTopologyVersion("demo-plain", "v1.36.1")
		require.Error(t, err, stderr)
		assert.Equal(t, before+1, guardRejections(t, false)[guardClusterWebhook], "the guard refused the jump: %s", stderr)

		// With Cluster API's own check bypassed, the guard's answer shows:
		// the rule, and the way to do it in one edit.
		setBypass(t, "demo-plain", true)
		_, stderr, err = patchTopologyVersion("demo-plain", "v1.36.1")
		require.Error(t, err)
		assert.Contains(t, stderr, "spec.topology.version: Forbidden: Cluster demo-plain: upgrade from v1.33.5 to v1.36.1 skips v1.34 through v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.topology.version to a v1.34.x release first and wait until every control-plane machine runs it, then upgrade to v1.36; or list a release of every minor from v1.34 to v1.36 in the ClusterClass's spec.kubernetesVersions, and Cluster API walks the control plane through them in one edit")
	})
}

// TestChainedUpgradeAcrossThreeMinors: one kubectl patch takes demo-cc from
// v1.33.5 to v1.36.1 through its class's versions; the guard refuses none of
// the topology controller's edits, records one control-plane revision per
// step made through the topology controller's field manager, and `rollout
// status cluster/demo-cc` exits 0 only once every Machine runs v1.36.1.
func TestChainedUpgradeAcrossThreeMinors(t *testing.T) {
	requireAllAt(t, cc.Name, "v1.33.5")
	before := guardRejections(t, false)
	begin := time.Now()

	_, stderr := mustKubectl(t, "patch", "cluster", cc.Name, "--type", "merge", "-p", `{"spec":{"topology":{"version":"v1.36.1"}}}`)
	assert.Contains(t, stderr, "Warning: Cluster demo-cc: Cluster API upgrades the control plane from v1.33.5 through v1.34.3, v1.35.2, v1.36.1 (steps from ClusterClass demo-class spec.kubernetesVersions)")

	run := sb.RunCLI(t.TempDir(), cc.Namespace, "status", "cluster/"+cc.Name, "--timeout", rolloutTimeout.String())
	require.Equal(t, 0, run.Code, "rollout status\nstdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	// Exit 0 only once every Machine runs the final version.
	got := allMachines(t, cc.Name)
	require.NotEmpty(t, got)
	for name, v := range got {
		assert.Equal(t, "v1.36.1", v, "Machine %s when status exited 0 (%v)", name, got)
	}
	recordTiming("chained upgrade v1.33.5 → v1.36.1 (1+1 machines)", time.Since(begin))
	t.Logf("rollout status cluster/%s:\n%s", cc.Name, run.Stdout)
	// It showed the steps as they went, and ended with the whole cluster.
	lines := strings.Split(strings.TrimSpace(run.Stdout), "\n")
	for _, step := range []string{"control plane v1.35.2 rolling out", "control plane v1.36.1 rolling out", "workers v1.36.1 rolling out"} {
		assert.True(t, slices.ContainsFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "cluster/demo-cc: upgrading to v1.36.1: ") && strings.Contains(l, step)
		}), "no status line shows the step %q", step)
	}
	assert.Equal(t, "cluster/demo-cc successfully rolled out: at v1.36.1 on the control plane and 1 worker pool", lines[len(lines)-1])

	after := guardRejections(t, false)
	assert.Equal(t, before, after, "the guard refused none of the topology controller's edits")

	h := history(t, "kcp/"+cc.ControlPlaneName())
	var steps []string
	for _, r := range h.Revisions {
		if r.Version != "v1.33.5" && r.Version != startVersion {
			steps = append(steps, r.Version)
			assert.Equal(t, "capi-topology", r.FieldManager, "revision %d (%s) was made by the topology controller", r.Revision, r.Version)
		}
	}
	assert.Equal(t, []string{"v1.34.3", "v1.35.2", "v1.36.1"}, steps, "one control-plane revision per step, in order: %+v", h.Revisions)
	assert.True(t, slices.IsSortedFunc(h.Revisions, func(a, b v1alpha1.HistoryRevision) int { return int(a.Revision - b.Revision) }))

	// The cluster's history: the control plane's steps and the workers',
	// in one list, each made through the topology controller.
	run = sb.RunCLI(t.TempDir(), cc.Namespace, "history", "cluster/"+cc.Name, "-o", "json")
	require.Equal(t, 0, run.Code, "rollout history cluster/%s\nstdout: %s\nstderr: %s", cc.Name, run.Stdout, run.Stderr)
	var ch v1alpha1.ClusterRolloutHistory
	require.NoError(t, json.Unmarshal([]byte(run.Stdout), &ch), run.Stdout)
	var made []string
	for _, r := range ch.Revisions {
		if r.FieldManager == rollout.TopologyFieldManager && r.ChangeType != "restart" {
			made = append(made, r.Object.Kind+" "+r.Version)
		}
	}
	for _, want := range []string{"KubeadmControlPlane v1.34.3", "KubeadmControlPlane v1.35.2", "KubeadmControlPlane v1.36.1", "MachineDeployment v1.36.1"} {
		assert.Contains(t, made, want, "history cluster/%s lists the topology controller's step: %s", cc.Name, run.Stdout)
	}
	table := sb.RunCLI(t.TempDir(), cc.Namespace, "history", "cluster/"+cc.Name)
	require.Equal(t, 0, table.Code, table.Stderr)
	t.Logf("rollout history cluster/%s:\n%s", cc.Name, table.Stdout)
	refused := sb.RunCLI(t.TempDir(), cc.Namespace, "history", "cluster/"+cc.Name, "--revision", "2")
	assert.Equal(t, 1, refused.Code)
	assert.Empty(t, refused.Stdout)
	assert.Equal(t, "error: --revision 2 has no meaning for cluster/demo-cc: its control plane and worker pools number their revisions apart; ask one of them: rollout history kcp/demo-cc-control-plane --revision 2 -n default, rollout history md/demo-cc-md-0 --revision 2 -n default\n", refused.Stderr)
}

// TestDowngradesThroughTheTopology: with Cluster API's bypass annotation
// (without it Cluster API refuses any decrease itself), the guard refuses
// taking the topology back below what the control plane has run, and below
// the etcd minor it has run.
func TestDowngradesThroughTheTopology(t *testing.T) {
	requireAllAt(t, cc.Name, "v1.36.1")
	setBypass(t, cc.Name, true)
	defer setBypass(t, cc.Name, false)

	_, stderr, err := patchTopologyVersion(cc.Name, "v1.35.2")
	require.Error(t, err)
	assert.Contains(t, stderr, "spec.topology.version: Forbidden: Cluster demo-cc: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.topology.version at v1.36.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)")

	_, stderr, err = patchTopologyVersion(cc.Name, "v1.33.5")
	require.Error(t, err)
	assert.Contains(t, stderr, "spec.topology.version: Forbidden: Cluster demo-cc: Kubernetes downgrade from v1.36.1 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]")
	assert.Contains(t, stderr, "spec.topology.version: Forbidden: Cluster demo-cc: etcd downgrade from 3.6.8 (kubeadm's default for v1.36.1) to 3.5.24 (kubeadm's default for v1.33.5) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set KubeadmControlPlane spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.8-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first")
	assert.Equal(t, "v1.36.1", kcp(t, cc.ControlPlaneName()).Spec.Version, "nothing was changed")
}

// TestRevertOfAControlPlaneBump: on a KubeadmControlPlane, a version bump no
// control-plane Machine has run can be taken back — twice, and the version
// edited in between — and once a Machine with it exists, it cannot.
func TestRevertOfAControlPlaneBump(t *testing.T) {
	sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
	cp := demo.ControlPlaneName()
	setVersion := func(version string) (string, string, error) {
		return kubectl("patch", "kcp", cp, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"version":%q}}`, version))
	}
	mustSet := func(version string) string {
		t.Helper()
		stdout, stderr, err := setVersion(version)
		require.NoError(t, err, "kcp to %s\nstdout: %s\nstderr: %s", version, stdout, stderr)
		return stderr
	}
	const revertWarning = "Warning: KubeadmControlPlane demo-control-plane: spec.version goes back from v1.36.1 to %s; allowed as a revert only because no control-plane machine was created with v1.36.1 or runs it"

	setPaused(t, demo.Name, true)
	mustSet("v1.36.1")
	assert.Contains(t, mustSet("v1.35.2"), fmt.Sprintf(revertWarning, "v1.35.2"))
	// The revert took the bump out of what the control plane has run: a
	// patch change is not judged against v1.36.1.
	assert.NotContains(t, mustSet("v1.35.3"), "Warning: KubeadmControlPlane")
	mustSet("v1.36.1")
	assert.Contains(t, mustSet("v1.35.3"), fmt.Sprintf(revertWarning, "v1.35.3"))
	mustSet("v1.35.2")

	// Let a bump roll: once a machine runs it, the revert is refused.
	mustSet("v1.36.1")
	setPaused(t, demo.Name, false)
	waitForControlPlaneMachineAt(t, demo.Name, "v1.36.1")
	stdout, stderr, err := setVersion("v1.35.2")
	require.Error(t, err, "stdout: %s", stdout)
	assert.Contains(t, stderr, `The KubeadmControlPlane "demo-control-plane" is invalid`)
	assert.Contains(t, stderr, "spec.version: Forbidden: KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.36.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)")
	assert.False(t, strings.Contains(stderr, "allowed as a revert"), stderr)
}
