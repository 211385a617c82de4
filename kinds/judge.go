package kinds

import (
	"context"
	"reflect"

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
	// OldClusterName is the stored pool's spec.clusterName, "" on
	// create. Cluster API's webhooks make the field immutable; a change
	// that got past them would be judged against both Clusters.
	OldClusterName string
	// OldVersion and NewVersion are spec.template.spec.version before and
	// after the change.
	OldVersion, NewVersion string
	// HasOld is false on create.
	HasOld bool
}

// decidePool returns the Decision of a worker-pool kind of Go type T whose
// spec.clusterName and template version read returns.
func decidePool[T client.Object](kind string, read func(T) (clusterName, version string)) Decision {
	return func(ctx context.Context, j Judge, oldObj, newObj client.Object) (skew.Decision, []string, error) {
		obj, ok := newObj.(T)
		if !ok || isNil(obj) {
			return skew.Decision{}, nil, errWrongKind(kind, newObj)
		}
		clusterName, version := read(obj)
		change := PoolChange{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), ClusterName: clusterName, NewVersion: version}
		if old, ok := oldObj.(T); ok && !isNil(old) {
			change.OldClusterName, change.OldVersion = read(old)
			change.HasOld = true
		}
		return j.DecideWorkerPool(ctx, change)
	}
}

// isNil says whether obj is nil or a nil pointer in an interface, as a
// create's old object may be.
func isNil(obj client.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
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
