package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// An editor of a namespace takes a control plane that has run v1.34 (etcd
// 3.6) back a minor without an edit the guard would refuse: `kubectl delete
// kcp --cascade=orphan`, its Machines deleted too (so no running Machine
// tells what the cluster ran), then the control plane created again for the
// same Cluster at v1.33. Created anew, it has no stamps and no history of
// its own; kubeadm would join etcd 3.5 members to a cluster whose data
// etcd 3.6 wrote. The records the deleted control plane left behind name
// their Cluster (rollout-guard.io/cluster, set by the guard from the stored
// object) and what each revision ran (rollout-guard.io/run): the create is
// judged as an update from the highest recorded run, and refused naming
// it. Created again at v1.34, or for a brand-new Cluster, it is admitted.
func TestRecreatedControlPlaneJudgedAgainstItsClustersHistory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.33.7", WorkerVersion: "v1.33.7"})
	ownedByCluster(t, w)
	require.NoError(t, edit(t, mergePatch, w.KCP, "v1.34.3", kcpVersion...))

	// The guard records v1.34.3 (revision 2), naming Cluster c1 and its run.
	var ran *rgv1alpha1.RolloutRevision
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := &rgv1alpha1.RolloutRevisionList{}
		if !assert.NoError(c, env.Client.List(ctx, list, client.InNamespace(w.Namespace),
			client.MatchingLabels{revisions.LabelOwnerUID: string(w.KCP.UID), revisions.LabelRevision: "2"})) {
			return
		}
		if assert.Len(c, list.Items, 1, "revision 2 is not recorded yet") {
			ran = &list.Items[0]
		}
	}, 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, w.Cluster.Name, ran.Labels[revisions.LabelCluster], "the record names its Cluster")
	assert.Equal(t, "v1.34.3 etcd 3.6.5", ran.Annotations[revisions.AnnotationRun], "the record says what its revision ran")

	// kubectl delete --cascade=orphan: the environment runs no garbage
	// collector, so the test does what it does — takes the owner reference
	// off the dependents (the records), then the orphan finalizer off the
	// control plane.
	require.NoError(t, env.Client.Delete(ctx, w.KCP, client.PropagationPolicy(metav1.DeletePropagationOrphan)))
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, env.Client.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(w.KCP.UID)}))
	require.NotEmpty(t, list.Items)
	for i := range list.Items {
		require.NoError(t, patchMerge(ctx, &list.Items[i], map[string]any{"metadata": map[string]any{"ownerReferences": nil}}, false))
	}
	require.NoError(t, patchMerge(ctx, w.KCP, map[string]any{"metadata": map[string]any{"finalizers": nil}}, false))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), &controlplanev1.KubeadmControlPlane{}))
	}, 10*time.Second, 50*time.Millisecond, "the control plane was never deleted")
	machines := &clusterv1.MachineList{}
	require.NoError(t, env.Client.List(ctx, machines, client.InNamespace(w.Namespace), client.HasLabels{clusterv1.MachineControlPlaneLabel}))
	require.Empty(t, machines.Items, "no control-plane Machine tells what the cluster ran")

	again := func(version string, labelled bool) *controlplanev1.KubeadmControlPlane {
		kcp := w.KCP.DeepCopy()
		kcp.ResourceVersion, kcp.UID, kcp.CreationTimestamp, kcp.ManagedFields, kcp.Annotations, kcp.Finalizers, kcp.OwnerReferences = "", "", metav1.Time{}, nil, nil, nil, nil
		kcp.DeletionTimestamp, kcp.DeletionGracePeriodSeconds = nil, nil
		kcp.Status = controlplanev1.KubeadmControlPlaneStatus{}
		kcp.Spec.Version = version
		if !labelled {
			kcp.Labels = nil // found through the Cluster's spec.controlPlaneRef
		}
		return kcp
	}
	source := "revision 2 of a KubeadmControlPlane of Cluster c1 recorded in RolloutRevision " + w.Namespace + "/" + ran.Name
	const kcpCreateDenied = `admission webhook "validate-create.kubeadmcontrolplane.rollout-guard.io" denied the request: KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: `
	refused := kcpCreateDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.34.3 (the highest version it has run, per ` + source + `) to v1.33.7 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), ` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (` + source + `) to 3.5.24 (kubeadm's default for v1.33.7) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`

	for _, labelled := range []bool{true, false} {
		err := env.Client.Create(ctx, again("v1.33.7", labelled))
		require.Error(t, err, "labelled %v: the guard let the control plane be created a minor below its Cluster's recorded run", labelled)
		assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
		assert.Equal(t, refused, err.Error(), "labelled %v", labelled)
	}
	assert.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), &controlplanev1.KubeadmControlPlane{})), "a refused create left the control plane behind")

	// Its safe neighbours: at the recorded run, admitted; a brand-new
	// Cluster's control plane in the same namespace, nothing recorded for
	// it, admitted at v1.33.
	require.NoError(t, env.Client.Create(ctx, again("v1.34.3", true)))
	fresh := again("v1.33.7", true)
	fresh.Name, fresh.Labels = "c2-control-plane", map[string]string{clusterv1.ClusterNameLabel: "c2"}
	require.NoError(t, env.Client.Create(ctx, fresh))
}
