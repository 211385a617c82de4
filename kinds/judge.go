package kinds

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/skew"
)

// Judge is the policy as the kinds hand it their changes: one method per way
// a change is judged. Package policy's Policy implements it; a kind's Decide
// says which method judges its objects.
type Judge interface {
	// DecideWorkerPool judges a worker pool's version change against its
	// Cluster's control plane.
	DecideWorkerPool(ctx context.Context, change PoolChange) (skew.Decision, []string, error)
	// DecideKubeadmControlPlane judges a KubeadmControlPlane's change
	// (oldKCP nil on create): its version and its etcd.
	DecideKubeadmControlPlane(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (skew.Decision, []string, error)
	// DecideContractControlPlane judges a change of a control plane of
	// another provider (oldCP nil on create), read through the contract.
	DecideContractControlPlane(ctx context.Context, oldCP, newCP *unstructured.Unstructured) (skew.Decision, []string, error)
	// DecideCluster judges a topology Cluster's version change (oldCluster
	// nil on create).
	DecideCluster(ctx context.Context, oldCluster, newCluster *clusterv1.Cluster) (skew.Decision, []string, error)
}

// Decision is how a kind's change is judged: the change of oldObj (nil on
// create) into newObj, both of the kind, handed to the Judge's method for
// the kind. Besides the decision it returns warnings of the guard's own.
type Decision func(ctx context.Context, j Judge, oldObj, newObj client.Object) (skew.Decision, []string, error)

// PoolChange is what a worker pool's version change is judged on, alike
// for every worker-pool kind: each runs kubelets of its template's version
// against its Cluster's control plane.
type PoolChange struct {
	// Kind is the pool's kind, e.g. "MachineDeployment".
	Kind      string
	Namespace string
	Name      string
	// ClusterName is the pool's spec.clusterName.
	ClusterName string
	// OldVersion and NewVersion are spec.template.spec.version before and
	// after the change.
	OldVersion, NewVersion string
	// HasOld is false on create.
	HasOld bool
}

// decidePool returns the Decision of a worker-pool kind whose
// spec.clusterName and template version read returns (ok false for an
// object of another kind, or none).
func decidePool(kind string, read func(client.Object) (clusterName, version string, ok bool)) Decision {
	return func(ctx context.Context, j Judge, oldObj, newObj client.Object) (skew.Decision, []string, error) {
		clusterName, version, ok := read(newObj)
		if !ok {
			return skew.Decision{}, nil, errWrongKind(kind, newObj)
		}
		change := PoolChange{Kind: kind, Namespace: newObj.GetNamespace(), Name: newObj.GetName(), ClusterName: clusterName, NewVersion: version}
		if oldObj != nil {
			if _, old, ok := read(oldObj); ok {
				change.OldVersion, change.HasOld = old, true
			}
		}
		return j.DecideWorkerPool(ctx, change)
	}
}

// decideAs returns the Decision of a kind of Go type T, handed to decide (a
// method of Judge, e.g. Judge.DecideCluster).
func decideAs[T client.Object](kind string, decide func(j Judge, ctx context.Context, oldObj, newObj T) (skew.Decision, []string, error)) Decision {
	return func(ctx context.Context, j Judge, oldObj, newObj client.Object) (skew.Decision, []string, error) {
		obj, ok := newObj.(T)
		if !ok {
			return skew.Decision{}, nil, errWrongKind(kind, newObj)
		}
		old, _ := oldObj.(T)
		return decide(j, ctx, old, obj)
	}
}
