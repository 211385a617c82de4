package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// patchMerge sends a JSON merge patch of obj, patch being its JSON; with
// dryRun a server-side dry run.
func patchMerge(ctx context.Context, obj client.Object, patch map[string]any, dryRun bool) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var opts []client.PatchOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	return env.Client.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data), opts...)
}

// ownedByCluster gives the world's control plane the owner reference
// Cluster API's Cluster controller sets on it (not a controller one: the
// Cluster has no topology).
func ownedByCluster(t *testing.T, w *framework.World) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.Cluster), w.Cluster))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), w.KCP))
	patch := client.MergeFrom(w.KCP.DeepCopy())
	w.KCP.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: w.Cluster.Name, UID: w.Cluster.UID, Controller: ptr.To(false)}}
	require.NoError(t, env.Client.Patch(ctx, w.KCP, patch))
}

// An editor of a control plane re-points its cluster-name label in the
// same edit as an upgrade, to switch the worker rules off: Cluster API
// follows the owner reference and upgrades the real cluster anyway. The
// guard judges the change against the Cluster the stored object belongs
// to (its owner, the Cluster naming it) as well as the one the label names.
//
// A label change on its own is admitted: it changes nothing the rules judge
// (the control plane and its workers stay as they are), the label is
// Cluster API's copy of the owner reference, which its Cluster controller
// writes back, and the next version change is judged against the stored
// owner and the Cluster naming the control plane whatever the label says.
func TestRepointedClusterLabelKeepsTheWorkerRules(t *testing.T) {
	ctx := context.Background()
	relabel := func(name string) map[string]any {
		return map[string]any{"metadata": map[string]any{"labels": map[string]any{clusterv1.ClusterNameLabel: name}}}
	}
	upgrade := map[string]any{"spec": map[string]any{"version": "v1.36.1"}}
	relabelAndUpgrade := map[string]any{"metadata": relabel("nope")["metadata"], "spec": upgrade["spec"]}
	const wantRefusal = kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 runs v1.32.4, 4 minors older than v1.36.1; a kubelet may be at most 3 minors older than the API server [rule ControlPlaneLeavesWorkerTooOld]; upgrade MachineDeployment c1-md-0 to v1.33.x or newer first, then set spec.version to v1.36.1`

	cases := []struct {
		name string
		// before runs before the attack, and is admitted.
		before func(t *testing.T, w *framework.World)
		attack map[string]any
	}{
		{name: "the upgrade alone", attack: upgrade},
		{name: "the label re-pointed in the same edit", attack: relabelAndUpgrade},
		{name: "the label re-pointed by an earlier edit, which is admitted", attack: upgrade,
			before: func(t *testing.T, w *framework.World) {
				require.NoError(t, patchMerge(ctx, w.KCP, relabel("nope"), false), "a label change alone")
			}},
		{name: "label and owner reference taken away by an earlier edit", attack: upgrade,
			before: func(t *testing.T, w *framework.World) {
				require.NoError(t, patchMerge(ctx, w.KCP, map[string]any{"metadata": map[string]any{
					"labels": map[string]any{clusterv1.ClusterNameLabel: nil}, "ownerReferences": nil}}, false))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A pool three minors behind the control plane: one more minor
			// of the control plane leaves it too old.
			w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.32.4"})
			ownedByCluster(t, w)
			if tc.before != nil {
				tc.before(t, w)
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Error(c, patchMerge(ctx, w.KCP, tc.attack, true))
			}, 20*time.Second, 100*time.Millisecond, "the guard admits the upgrade")
			for _, dryRun := range []bool{true, false} {
				err := patchMerge(ctx, w.KCP, tc.attack, dryRun)
				require.Error(t, err, "dry run %v: the guard let the upgrade through", dryRun)
				assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
				assert.Equal(t, wantRefusal, err.Error(), "dry run %v", dryRun)
			}
			got := &controlplanev1.KubeadmControlPlane{}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), got))
			assert.Equal(t, "v1.35.2", got.Spec.Version)
		})
	}

	// Its neighbour: with the pool within skew, the same edit is admitted
	// (with a warning naming both Clusters).
	t.Run("pool within skew: the same edit admitted", func(t *testing.T) {
		w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.33.7"})
		ownedByCluster(t, w)
		c, warnings := warningClient(t, "")
		data, err := json.Marshal(relabelAndUpgrade)
		require.NoError(t, err)
		require.NoError(t, c.Patch(ctx, w.KCP.DeepCopy(), client.RawPatch(types.MergePatchType, data)))
		assert.True(t, slices.ContainsFunc(warnings.texts, func(s string) bool {
			return s == "rollout-guard: KubeadmControlPlane "+w.Namespace+"/c1-control-plane changes the Cluster it names (owner reference or cluster.x-k8s.io/cluster-name label); judged against Clusters [c1 nope], and Cluster API follows its owner reference, not the label"
		}), "warnings: %v", warnings.texts)
	})
}

// A control plane created anew under a Cluster whose control-plane
// Machines run is judged as an update from what they run: created one
// minor below them — after a delete, or after `kubectl delete
// --cascade=orphan`, which leaves its Machines running — it would take the
// cluster's Kubernetes and etcd back, and is refused even with the workers
// at that minor. At the Machines' version, or for a cluster without
// control-plane Machines yet (a new cluster, or one `clusterctl move` is
// creating), it is admitted.
func TestCreatedControlPlaneJudgedAgainstItsMachines(t *testing.T) {
	ctx := context.Background()
	const kcpCreateDenied = `admission webhook "validate-create.kubeadmcontrolplane.rollout-guard.io" denied the request: KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: `
	const downgrade = kcpCreateDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.34.3 (run by a control-plane machine) to v1.33.7 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), `
	// cpMachines creates the control-plane Machines of the world at
	// v1.34.3, owned by its control plane as Cluster API makes them.
	cpMachines := func(t *testing.T, w *framework.World) []string {
		var names []string
		for _, name := range []string{"c1-control-plane-a", "c1-control-plane-b", "c1-control-plane-c"} {
			w.AddMachine(t, name, "v1.34.3", map[string]string{clusterv1.MachineControlPlaneLabel: ""})
			m := &clusterv1.Machine{}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: name}, m))
			patch := client.MergeFrom(m.DeepCopy())
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlane", Name: w.KCP.Name, UID: w.KCP.UID, Controller: ptr.To(true)}}
			require.NoError(t, env.Client.Patch(ctx, m, patch))
			names = append(names, name)
		}
		return names
	}
	// deleteKCP deletes the world's control plane, orphaning its Machines:
	// the environment runs no garbage collector, so it does what the
	// collector does for `--cascade=orphan` (takes the owner reference off
	// the dependents, then the orphan finalizer off the owner).
	deleteKCP := func(t *testing.T, w *framework.World, machines []string) {
		require.NoError(t, env.Client.Delete(ctx, w.KCP, client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		for _, name := range machines {
			require.NoError(t, patchMerge(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: name}},
				map[string]any{"metadata": map[string]any{"ownerReferences": nil}}, false))
		}
		require.NoError(t, patchMerge(ctx, w.KCP, map[string]any{"metadata": map[string]any{"finalizers": nil}}, false))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), &controlplanev1.KubeadmControlPlane{}))
		}, 10*time.Second, 50*time.Millisecond, "the control plane was never deleted")
	}
	// again is the world's control plane as created anew at version.
	again := func(w *framework.World, version string, labelled bool) *controlplanev1.KubeadmControlPlane {
		kcp := w.KCP.DeepCopy()
		kcp.ResourceVersion, kcp.UID, kcp.CreationTimestamp, kcp.ManagedFields, kcp.Annotations, kcp.Finalizers = "", "", metav1.Time{}, nil, nil, nil
		kcp.DeletionTimestamp, kcp.DeletionGracePeriodSeconds = nil, nil
		kcp.Status = controlplanev1.KubeadmControlPlaneStatus{}
		kcp.Spec.Version = version
		if !labelled {
			kcp.Labels = nil // found through the Cluster's spec.controlPlaneRef
		}
		return kcp
	}
	cases := []struct {
		name     string
		machines bool
		version  string
		labelled bool
		// forgotten deletes the deleted control plane's records too.
		forgotten bool
		want      string // the whole refusal, "" when admitted
	}{
		{name: "one minor below its Machines, workers at that minor: refused", machines: true, version: "v1.33.7", labelled: true,
			want: downgrade + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.3) to 3.5.24 (kubeadm's default for v1.33.7) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`},
		{name: "the same, found only through its Cluster: refused", machines: true, version: "v1.33.7", labelled: false,
			want: downgrade + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.3) to 3.5.24 (kubeadm's default for v1.33.7) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`},
		{name: "at its Machines' version: admitted", machines: true, version: "v1.34.3", labelled: true},
		// Its control plane deleted with its history, as a plain delete's
		// garbage collection leaves it: nothing tells what it ran. (With
		// its records left behind, as --cascade=orphan leaves them, the
		// create is judged against them:
		// TestRecreatedControlPlaneJudgedAgainstItsClustersHistory.)
		{name: "a cluster without control-plane Machines: admitted", version: "v1.33.7", labelled: true, forgotten: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, framework.WorldSpec{Version: "v1.34.3", WorkerVersion: "v1.33.7"})
			var machines []string
			if tc.machines {
				machines = cpMachines(t, w)
			}
			deleteKCP(t, w, machines)
			if tc.forgotten {
				require.NoError(t, env.Client.DeleteAllOf(ctx, &rgv1alpha1.RolloutRevision{}, client.InNamespace(w.Namespace),
					client.MatchingLabels{revisions.LabelOwnerUID: string(w.KCP.UID)}))
			}
			kcp := again(w, tc.version, tc.labelled)
			if tc.want == "" {
				require.NoError(t, env.Client.Create(ctx, kcp))
				return
			}
			// The guard reads the Machines through its cache: wait until
			// it refuses, then create.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Error(c, env.Client.Create(ctx, kcp.DeepCopy(), client.DryRunAll))
			}, 20*time.Second, 100*time.Millisecond, "the guard admits the create")
			err := env.Client.Create(ctx, kcp)
			require.Error(t, err, "the guard let the create through")
			assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			assert.Equal(t, tc.want, err.Error())
			assert.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(kcp), &controlplanev1.KubeadmControlPlane{})), "a refused create left the control plane behind")
		})
	}
}

// A control plane `clusterctl move` has just created on its target carries
// its stamps (the guard keeps them from a user who may write history), not
// its status; its Cluster is paused and its Machines come after it. In that
// window it must not be judged as one that never had a Machine: its
// recorded highest run (v1.34, etcd 3.6) still bars setting it back across
// an etcd minor. A control plane the guard stamped itself, which never had
// a Machine, may still be set back (TestRevertOfAControlPlaneThatNeverHadAMachine).
func TestMovedControlPlaneKeepsItsHistoryBeforeItsMachines(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.3", WorkerVersion: "v1.33.7"})
	// The target as clusterctl leaves it: the Cluster paused, the control
	// plane created with the stamps it had on the source, no Machine yet.
	patch := client.MergeFrom(w.Cluster.DeepCopy())
	w.Cluster.Spec.Paused = ptr.To(true)
	require.NoError(t, env.Client.Patch(ctx, w.Cluster, patch))
	require.NoError(t, env.Client.Delete(ctx, w.KCP))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), &controlplanev1.KubeadmControlPlane{}))
	}, 10*time.Second, 50*time.Millisecond, "the control plane was never deleted")
	changedAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	stamps := revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "alice", ChangedAt: changedAt, ChangeType: revisions.ChangeRollout}.Annotations()
	highest, err := json.Marshal(revisions.HighestRun{Kubernetes: "v1.34.3", KubernetesRevision: 4, Etcd: "3.6.5", EtcdRevision: 4,
		Before: &revisions.HighestRun{Kubernetes: "v1.33.7", KubernetesRevision: 3, Etcd: "3.5.24", EtcdRevision: 3}, BeforeRevision: 4})
	require.NoError(t, err)
	stamps[revisions.AnnotationHighestRun] = string(highest)
	moved := w.KCP.DeepCopy()
	moved.ResourceVersion, moved.UID, moved.CreationTimestamp, moved.ManagedFields = "", "", metav1.Time{}, nil
	moved.Status = controlplanev1.KubeadmControlPlaneStatus{}
	moved.Annotations = stamps
	require.NoError(t, env.Client.Create(ctx, moved))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(moved), moved))
	require.Equal(t, "4", moved.Annotations[revisions.AnnotationRevision], "the guard kept the stamps of the move")
	w.KCP = moved

	const refused = kcpDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.34.3 to v1.33.7 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), ` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.3) to 3.5.24 (kubeadm's default for v1.33.7) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Error(c, dryRunSet(ctx, w.KCP, "v1.33.7", kcpVersion...))
	}, 20*time.Second, 100*time.Millisecond, "the guard takes the moved control plane for one that never had a Machine")
	for _, mode := range allModes {
		err := edit(t, mode, w.KCP, "v1.33.7", kcpVersion...)
		require.Error(t, err, "%s: the guard let the control plane be set back", mode)
		assert.Equal(t, refused, err.Error(), mode)
	}
	// Its safe neighbour: onwards, one minor up, is admitted.
	require.NoError(t, edit(t, mergePatch, w.KCP, "v1.35.2", kcpVersion...))
}
