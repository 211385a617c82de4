package kinds

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/skew"
)

// calls is a Judge that notes which of its methods was called, with what.
type calls struct {
	method string
	pool   PoolChange
	hasOld bool
}

func (c *calls) DecideWorkerPool(_ context.Context, change PoolChange) (skew.Decision, []string, error) {
	c.method, c.pool = "WorkerPool", change
	return skew.Decision{}, nil, nil
}

func (c *calls) DecideKubeadmControlPlane(_ context.Context, oldKCP, _ *controlplanev1.KubeadmControlPlane) (skew.Decision, []string, error) {
	c.method, c.hasOld = "KubeadmControlPlane", oldKCP != nil
	return skew.Decision{}, nil, nil
}

func (c *calls) DecideContractControlPlane(_ context.Context, oldCP, _ *unstructured.Unstructured) (skew.Decision, []string, error) {
	c.method, c.hasOld = "ContractControlPlane", oldCP != nil
	return skew.Decision{}, nil, nil
}

func (c *calls) DecideCluster(_ context.Context, oldCluster, _ *clusterv1.Cluster) (skew.Decision, []string, error) {
	c.method, c.hasOld = "Cluster", oldCluster != nil
	return skew.Decision{}, nil, nil
}

// TestEveryKindIsJudgedByItsWay: each kind hands its change to its own
// method of the Judge, with what it is judged on; an object of another
// kind is an error, not a panic.
func TestEveryKindIsJudgedByItsWay(t *testing.T) {
	md := func(version string) *clusterv1.MachineDeployment {
		o := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}}
		o.Namespace, o.Name = "ns", "md-0"
		o.Spec.Template.Spec.Version = version
		return o
	}
	mp := &clusterv1.MachinePool{Spec: clusterv1.MachinePoolSpec{ClusterName: "c2"}}
	mp.Spec.Template.Spec.Version = "v1.36.1"
	contract := Contract(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KThreesControlPlane"})
	for _, tc := range []struct {
		name           string
		kind           Kind
		oldObj, newObj client.Object
		method         string
		pool           PoolChange
		hasOld         bool
	}{
		{"MachineDeployment update", MachineDeployment, md("v1.35.2"), md("v1.36.1"), "WorkerPool",
			PoolChange{Kind: "MachineDeployment", Namespace: "ns", Name: "md-0", ClusterName: "c1", OldClusterName: "c1", OldVersion: "v1.35.2", NewVersion: "v1.36.1", HasOld: true}, false},
		{"MachineDeployment create", MachineDeployment, nil, md("v1.36.1"), "WorkerPool",
			PoolChange{Kind: "MachineDeployment", Namespace: "ns", Name: "md-0", ClusterName: "c1", NewVersion: "v1.36.1"}, false},
		{"MachineDeployment, typed nil old", MachineDeployment, (*clusterv1.MachineDeployment)(nil), md("v1.36.1"), "WorkerPool",
			PoolChange{Kind: "MachineDeployment", Namespace: "ns", Name: "md-0", ClusterName: "c1", NewVersion: "v1.36.1"}, false},
		{"MachinePool", MachinePool, nil, mp, "WorkerPool", PoolChange{Kind: "MachinePool", ClusterName: "c2", NewVersion: "v1.36.1"}, false},
		{"KubeadmControlPlane", KubeadmControlPlane, &controlplanev1.KubeadmControlPlane{}, &controlplanev1.KubeadmControlPlane{}, "KubeadmControlPlane", PoolChange{}, true},
		{"Cluster create", Cluster, nil, &clusterv1.Cluster{}, "Cluster", PoolChange{}, false},
		{"contract control plane", contract, contract.New(), contract.New(), "ContractControlPlane", PoolChange{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j calls
			_, _, err := tc.kind.Decide(context.Background(), &j, tc.oldObj, tc.newObj)
			require.NoError(t, err)
			assert.Equal(t, tc.method, j.method)
			assert.Equal(t, tc.pool, j.pool)
			assert.Equal(t, tc.hasOld, j.hasOld)
		})
	}
	for _, kind := range []Kind{MachineDeployment, MachinePool, KubeadmControlPlane, Cluster, contract} {
		var j calls
		_, _, err := kind.Decide(context.Background(), &j, nil, &clusterv1.Machine{})
		assert.ErrorContains(t, err, "expected a", kind.GVK.Kind)
		assert.Empty(t, j.method, kind.GVK.Kind)
	}
}
