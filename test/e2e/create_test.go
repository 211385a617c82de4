package e2e

import (
	"context"
	"fmt"
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

// TestGuardJudgesNewControlPlanes creates KubeadmControlPlanes and Clusters
// through the API server — as a GitOps tool re-creating a deleted control
// plane, or a topology Cluster applied beside existing worker pools, would —
// and checks that a new control plane is judged against the workers
// already there: refused with the rule and the way out when it would leave
// them newer than the API server, allowed (without warnings) otherwise.
func TestGuardJudgesNewControlPlanes(t *testing.T) {
	ctx := context.Background()
	// recreate deletes obj (nothing in this environment holds a finalizer)
	// with its history, as the garbage collector of a cluster deletes the
	// RolloutRevisions it owns (this environment runs none), and returns a
	// copy to create again. (A control plane whose history outlives it,
	// deleted with --cascade=orphan:
	// TestRecreatedControlPlaneJudgedAgainstItsClustersHistory.)
	recreate := func(t *testing.T, obj client.Object) client.Object {
		t.Helper()
		require.NoError(t, env.Client.Delete(ctx, obj))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
		}, 10*time.Second, 50*time.Millisecond, "%s was never deleted", obj.GetName())
		require.NoError(t, env.Client.DeleteAllOf(ctx, &rgv1alpha1.RolloutRevision{}, client.InNamespace(obj.GetNamespace()),
			client.MatchingLabels{revisions.LabelOwnerUID: string(obj.GetUID())}))
		fresh := obj.DeepCopyObject().(client.Object)
		fresh.SetResourceVersion("")
		fresh.SetUID("")
		fresh.SetCreationTimestamp(metav1.Time{})
		fresh.SetManagedFields(nil)
		fresh.SetAnnotations(nil)
		return fresh
	}
	newKCP := func(version string, labelled bool) func(t *testing.T, w *framework.World) client.Object {
		return func(t *testing.T, w *framework.World) client.Object {
			kcp := recreate(t, w.KCP).(*controlplanev1.KubeadmControlPlane)
			kcp.Spec.Version = version
			kcp.Status = controlplanev1.KubeadmControlPlaneStatus{}
			if !labelled {
				kcp.Labels = nil // found through the Cluster's spec.controlPlaneRef
			}
			return kcp
		}
	}
	newCluster := func(version string) func(t *testing.T, w *framework.World) client.Object {
		return func(t *testing.T, w *framework.World) client.Object {
			cluster := recreate(t, w.Cluster).(*clusterv1.Cluster)
			cluster.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"}, Version: version}
			return cluster
		}
	}
	const (
		kcpCreateDenied     = `admission webhook "validate-create.kubeadmcontrolplane.rollout-guard.io" denied the request: KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: `
		clusterCreateDenied = `admission webhook "validate-create.cluster.rollout-guard.io" denied the request: Cluster.cluster.x-k8s.io "c1" is invalid: `
	)
	cases := []struct {
		name    string
		world   framework.WorldSpec
		object  func(t *testing.T, w *framework.World) client.Object
		wantErr string // the whole error text, "" for an allowed create
	}{
		{
			name:   "control plane older than the workers, found by its label",
			world:  framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2", Kubelets: []string{"v1.35.2"}},
			object: newKCP("v1.34.3", true),
			wantErr: kcpCreateDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 runs v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment c1-md-0 runs v1.35, ` +
				`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Machine c1-worker-0 runs v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while Machine c1-worker-0 runs v1.35]`,
		},
		{
			name:    "control plane older than the workers, found through its Cluster",
			world:   framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2"},
			object:  newKCP("v1.34.3", false),
			wantErr: kcpCreateDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 runs v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment c1-md-0 runs v1.35`,
		},
		{
			name:    "control plane four minors ahead of the workers",
			world:   framework.WorldSpec{Version: "v1.31.2", WorkerVersion: "v1.31.2"},
			object:  newKCP("v1.35.0", true),
			wantErr: kcpCreateDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 runs v1.31.2, 4 minors older than v1.35.0; a kubelet may be at most 3 minors older than the API server [rule ControlPlaneLeavesWorkerTooOld]; upgrade MachineDeployment c1-md-0 to v1.32.x or newer first, then set spec.version to v1.35.0`,
		},
		{
			name:    "control plane with a version that is not one",
			world:   framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2"},
			object:  newKCP("v1.35", true),
			wantErr: kcpCreateDenied + `spec.version: Invalid value: "v1.35": KubeadmControlPlane c1-control-plane: spec.version "v1.35" is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`,
		},
		{
			name:   "control plane at the workers' version",
			world:  framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2", Kubelets: []string{"v1.35.2"}},
			object: newKCP("v1.35.2", false),
		},
		{
			name:   "control plane one minor ahead of the workers",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			object: newKCP("v1.35.0", true),
		},
		{
			// The Cluster is new, its control plane is not: what that control
			// plane has run (its history) bars the downgrade too.
			name:   "topology Cluster older than its existing control plane and workers",
			world:  framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2"},
			object: newCluster("v1.34.3"),
			wantErr: clusterCreateDenied + `[spec.topology.version: Forbidden: Cluster c1: Kubernetes downgrade from v1.35.2 (the highest version it has run, per revision 1) to v1.34.3 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.topology.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), ` +
				`spec.topology.version: Forbidden: Cluster c1: MachineDeployment c1-md-0 runs v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.topology.version at v1.35.x or later while MachineDeployment c1-md-0 runs v1.35]`,
		},
		{
			name:  "topology Cluster before its control plane exists",
			world: framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2"},
			object: func(t *testing.T, w *framework.World) client.Object {
				recreate(t, w.KCP)
				return newCluster("v1.35.2")(t, w)
			},
		},
		{
			name:   "topology Cluster at the workers' version",
			world:  framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2"},
			object: newCluster("v1.35.2"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.world)
			obj := tc.object(t, w)
			c, warnings := warningClient(t, "")
			err := c.Create(ctx, obj)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Empty(t, warnings.texts, "a create the guard could judge whole")
				return
			}
			require.Error(t, err, "the guard let the create through")
			assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			assert.Equal(t, tc.wantErr, err.Error())
			got := obj.DeepCopyObject().(client.Object)
			assert.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)), "a refused create left %s behind", fmt.Sprintf("%T", obj))
		})
	}
}
