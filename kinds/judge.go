package kinds

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// VersionField is the field path of the version in refusals; ""
	// for spec.template.spec.version (a Machine's is spec.version).
	VersionField string
	// SkipPreflightChecks and OldSkipPreflightChecks are the values of
	// the annotation machineset.cluster.x-k8s.io/skip-preflight-checks
	// after and before the change ("" when unset), on the kinds it acts
	// on (MachineDeployments, whose MachineSets inherit it, and
	// MachineSets); "" on the others.
	SkipPreflightChecks, OldSkipPreflightChecks string
	// Owned says the object is made by an owner Cluster API's controllers
	// judge through (a MachineSet, a Machine): it is judged only where it
	// differs from the owner its controller reference names (Owner), as
	// the guard judged that owner already.
	Owned bool
	// Owner is the controller owner reference the object claims, nil for
	// none. A claim is only a claim: the policy checks that the owner
	// exists, with that UID, of a kind that makes such objects, in the
	// same Cluster.
	Owner *metav1.OwnerReference
}

// decidePool returns the Decision of a worker-pool kind of Go type T whose
// spec.clusterName and template version read returns.
func decidePool[T client.Object](kind string, read func(T) (clusterName, version string)) Decision {
	return decideWorkers(kind, "", false, false, read)
}

// decideWorkers returns the Decision of a kind of Go type T that runs
// kubelets (a MachineDeployment, a MachineSet, a Machine): as decidePool,
// with its version at versionField, the preflight-skip annotation when
// skips says the kind honours it, and, when owned, the controller owner
// reference it claims.
func decideWorkers[T client.Object](kind, versionField string, skips, owned bool, read func(T) (clusterName, version string)) Decision {
	return func(ctx context.Context, j Judge, oldObj, newObj client.Object) (skew.Decision, []string, error) {
		obj, ok := newObj.(T)
		if !ok || isNil(obj) {
			return skew.Decision{}, nil, errWrongKind(kind, newObj)
		}
		clusterName, version := read(obj)
		change := PoolChange{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), ClusterName: clusterName, NewVersion: version,
			VersionField: versionField, Owned: owned}
		if skips {
			change.SkipPreflightChecks = obj.GetAnnotations()[clusterv1.MachineSetSkipPreflightChecksAnnotation]
		}
		if owned {
			change.Owner = metav1.GetControllerOfNoCopy(obj)
		}
		if old, ok := oldObj.(T); ok && !isNil(old) {
			change.OldClusterName, change.OldVersion = read(old)
			change.HasOld = true
			if skips {
				change.OldSkipPreflightChecks = old.GetAnnotations()[clusterv1.MachineSetSkipPreflightChecksAnnotation]
			}
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
