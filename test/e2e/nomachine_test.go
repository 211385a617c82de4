package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// dryRunSet sets the string field at path of obj with a server-side dry
// run, and returns the API server's answer.
func dryRunSet(ctx context.Context, obj client.Object, value string, path ...string) error {
	patch := map[string]any{}
	if err := unstructured.SetNestedField(patch, value, path...); err != nil {
		return err
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return env.Client.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data), client.DryRunAll)
}

// setAnnotations merges annotations into obj's.
func setAnnotations(t *testing.T, obj client.Object, annotations map[string]any) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	require.NoError(t, err)
	require.NoError(t, env.Client.Patch(context.Background(), obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data)))
}

// A KubeadmControlPlane that has never had a Machine, paused, may be set back
// after a version bump (and bumped and set back again): it has run nothing.
// Its safe-side neighbours are still refused: the same control plane
// unpaused (its first Machine may be created at any moment), with a Machine
// created with the new version, or initialized.
func TestRevertOfAControlPlaneThatNeverHadAMachine(t *testing.T) {
	ctx := context.Background()
	const refused = kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.36.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`
	pauseKCP := func(t *testing.T, w *framework.World) {
		setAnnotations(t, w.KCP, map[string]any{clusterv1.PausedAnnotation: "true"})
	}
	pauseCluster := func(t *testing.T, w *framework.World) {
		patch := client.MergeFrom(w.Cluster.DeepCopy())
		w.Cluster.Spec.Paused = ptr.To(true)
		require.NoError(t, env.Client.Patch(ctx, w.Cluster, patch))
	}
	cases := []struct {
		name string
		// before runs before the bump, after between the bump and the revert.
		before, after func(t *testing.T, w *framework.World)
		want          string // the refusal; "" when allowed
	}{
		{name: "control plane paused: allowed", before: pauseKCP},
		{name: "Cluster paused: allowed", before: pauseCluster},
		{name: "not paused: its first Machine may come any moment, refused", want: refused},
		{name: "paused, a Machine created with the new version: refused", before: pauseKCP, want: refused,
			after: func(t *testing.T, w *framework.World) {
				addControlPlaneMachine(t, w, "c1-control-plane-new", "v1.36.1", false)
			}},
		{name: "paused, initialized: refused", before: pauseKCP, want: refused,
			after: func(t *testing.T, w *framework.World) {
				require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), w.KCP))
				w.KCP.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
				require.NoError(t, env.Client.Status().Update(ctx, w.KCP))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Workers at v1.34.3, which the control plane may go down to.
			w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.34.3"})
			if tc.before != nil {
				tc.before(t, w)
			}
			require.NoError(t, edit(t, mergePatch, w.KCP, "v1.36.1", kcpVersion...), "the bump")
			if tc.after != nil {
				tc.after(t, w)
			}
			if tc.want != "" {
				// What the guard reads of the Cluster and its Machines comes
				// through its cache: wait until it refuses, then make the edit.
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					assert.Error(c, dryRunSet(ctx, w.KCP, "v1.35.2", kcpVersion...))
				}, 20*time.Second, 100*time.Millisecond, "the guard's cache never caught up")
				for _, mode := range allModes {
					err := edit(t, mode, w.KCP, "v1.35.2", kcpVersion...)
					require.Error(t, err, "%s: the guard let the revert through", mode)
					assert.Equal(t, tc.want, err.Error(), mode)
				}
				return
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.NoError(c, dryRunSet(ctx, w.KCP, "v1.35.2", kcpVersion...))
			}, 20*time.Second, 100*time.Millisecond, "the guard's cache never caught up")
			for _, mode := range allModes {
				require.NoError(t, edit(t, mode, w.KCP, "v1.35.2", kcpVersion...), "%s: the revert", mode)
				require.NoError(t, edit(t, mode, w.KCP, "v1.36.1", kcpVersion...), "%s: the bump again", mode)
			}
			require.NoError(t, edit(t, mergePatch, w.KCP, "v1.34.3", kcpVersion...), "nothing ran: two minors back")
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), w.KCP))
			assert.Equal(t, "v1.34.3", w.KCP.Spec.Version)
		})
	}
}

// The same for a topology Cluster with Cluster API's bypass annotation.
func TestTopologyRevertOfAControlPlaneThatNeverHadAMachine(t *testing.T) {
	ctx := context.Background()
	const refused = clusterDenied + `spec.topology.version: Forbidden: Cluster c1: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.topology.version at v1.36.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`
	cases := []struct {
		name    string
		paused  bool
		machine bool
		want    string
	}{
		{name: "Cluster paused: allowed", paused: true},
		{name: "not paused: refused", want: refused},
		{name: "paused, a Machine created with the new version: refused", paused: true, machine: true, want: refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2", Topology: true})
			annotations := map[string]any{"unsafe.topology.cluster.x-k8s.io/disable-update-version-check": ""}
			if tc.paused {
				annotations[clusterv1.PausedAnnotation] = "true"
			}
			setAnnotations(t, w.Cluster, annotations)
			require.NoError(t, edit(t, mergePatch, w.Cluster, "v1.36.1", topologyVersion...), "the bump")
			if tc.machine {
				addControlPlaneMachine(t, w, "c1-control-plane-new", "v1.36.1", true)
			}
			if tc.want == "" {
				require.NoError(t, edit(t, mergePatch, w.Cluster, "v1.35.2", topologyVersion...), "the revert")
				return
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Error(c, dryRunSet(ctx, w.Cluster, "v1.35.2", topologyVersion...))
			}, 20*time.Second, 100*time.Millisecond, "the guard's cache never caught up")
			err := edit(t, mergePatch, w.Cluster, "v1.35.2", topologyVersion...)
			require.Error(t, err, "the guard let the revert through")
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// addControlPlaneMachine creates control-plane Machine name of the world's
// KubeadmControlPlane, whose node runs version, as its controller makes it:
// owned by the KubeadmControlPlane. The guard judges a Machine at its
// control plane's version no further; one the control plane does not have
// yet (a topology bump, which the environment's missing topology
// controller never hands on) is created with the override by a member of
// an override group, when override says so.
func addControlPlaneMachine(t *testing.T, w *framework.World, name, version string, override bool) {
	t.Helper()
	ctx := context.Background()
	m := builder.Machine(w.Namespace, name).WithLabels(map[string]string{clusterv1.MachineControlPlaneLabel: ""}).
		WithClusterName(framework.WorldClusterName).WithVersion(version).WithBootstrapDataSecret("bootstrap").
		WithInfrastructureRef("DevMachine", name).WithNodeVersion(version).Build()
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlane",
		Name: w.KCP.Name, UID: w.KCP.UID, Controller: ptr.To(true)}}
	creator := env.Client
	if override {
		m.Annotations = map[string]string{revisions.AnnotationOverride: "a control-plane Machine of the bump"}
		creator = framework.UserClient(t, env, "oncall", overrideGroup)
	}
	status := m.Status
	require.NoError(t, creator.Create(ctx, m))
	m.Status = status
	require.NoError(t, env.Client.Status().Update(ctx, m))
}
