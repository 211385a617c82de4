package history

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Kind is one kind of object whose history is kept, with what the rest of
// the guard needs to know about it.
type Kind struct {
	// GVK is the kind's v1beta2 group, version and kind.
	GVK schema.GroupVersionKind
	// New returns an empty object of the kind.
	New func() client.Object
	// Snapshot returns the revision content of an object of the kind.
	Snapshot func(client.Object) (revisions.Snapshot, error)
	// RolloutAfter returns the object's rollout.after as RFC3339, "" when unset.
	RolloutAfter func(client.Object) string
	// ClusterName returns the name of the Cluster the object belongs to: its
	// cluster-name label, a worker pool's spec.clusterName, or its owning
	// Cluster; "" when it names none.
	ClusterName func(client.Object) string
}

// MachineDeployment is the history kind of MachineDeployments.
var MachineDeployment = Kind{
	GVK: clusterv1.GroupVersion.WithKind("MachineDeployment"),
	New: func() client.Object { return &clusterv1.MachineDeployment{} },
	Snapshot: func(o client.Object) (revisions.Snapshot, error) {
		md, ok := o.(*clusterv1.MachineDeployment)
		if !ok {
			return revisions.Snapshot{}, fmt.Errorf("expected a MachineDeployment, got %T", o)
		}
		return revisions.ForMachineDeployment(md)
	},
	RolloutAfter: func(o client.Object) string {
		md, ok := o.(*clusterv1.MachineDeployment)
		if !ok || md.Spec.Rollout.After.IsZero() {
			return ""
		}
		return md.Spec.Rollout.After.UTC().Format("2006-01-02T15:04:05Z07:00")
	},
	ClusterName: func(o client.Object) string {
		md, _ := o.(*clusterv1.MachineDeployment)
		if md == nil {
			return clusterName(o, "")
		}
		return clusterName(o, md.Spec.ClusterName)
	},
}

// MachinePool is the history kind of MachinePools. A MachinePool has no
// rollout.after (Cluster API gives it none), so it is never restarted.
var MachinePool = Kind{
	GVK: clusterv1.GroupVersion.WithKind("MachinePool"),
	New: func() client.Object { return &clusterv1.MachinePool{} },
	Snapshot: func(o client.Object) (revisions.Snapshot, error) {
		mp, ok := o.(*clusterv1.MachinePool)
		if !ok {
			return revisions.Snapshot{}, fmt.Errorf("expected a MachinePool, got %T", o)
		}
		return revisions.ForMachinePool(mp)
	},
	RolloutAfter: func(client.Object) string { return "" },
	ClusterName: func(o client.Object) string {
		mp, _ := o.(*clusterv1.MachinePool)
		if mp == nil {
			return clusterName(o, "")
		}
		return clusterName(o, mp.Spec.ClusterName)
	},
}

// KubeadmControlPlane is the history kind of KubeadmControlPlanes.
var KubeadmControlPlane = Kind{
	GVK: controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"),
	New: func() client.Object { return &controlplanev1.KubeadmControlPlane{} },
	Snapshot: func(o client.Object) (revisions.Snapshot, error) {
		kcp, ok := o.(*controlplanev1.KubeadmControlPlane)
		if !ok {
			return revisions.Snapshot{}, fmt.Errorf("expected a KubeadmControlPlane, got %T", o)
		}
		return revisions.ForKubeadmControlPlane(kcp)
	},
	RolloutAfter: func(o client.Object) string {
		kcp, ok := o.(*controlplanev1.KubeadmControlPlane)
		if !ok || kcp.Spec.Rollout.After.IsZero() {
			return ""
		}
		return kcp.Spec.Rollout.After.UTC().Format("2006-01-02T15:04:05Z07:00")
	},
	ClusterName: func(o client.Object) string { return clusterName(o, "") },
}

// ContractKind is the history kind of a control-plane kind of another
// provider (gvk), read as unstructured objects at the fields of Cluster API's
// control-plane contract: its revisions are spec.version and
// spec.machineTemplate, its restarts spec.rollout.after where the provider
// has it.
func ContractKind(gvk schema.GroupVersionKind) Kind {
	return Kind{
		GVK: gvk,
		New: func() client.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u
		},
		Snapshot: func(o client.Object) (revisions.Snapshot, error) {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return revisions.Snapshot{}, fmt.Errorf("expected a %s as an unstructured object, got %T", gvk.Kind, o)
			}
			return revisions.ForContractControlPlane(u)
		},
		RolloutAfter: func(o client.Object) string {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return ""
			}
			after, _, _ := unstructured.NestedString(u.Object, "spec", "rollout", "after")
			return after
		},
		ClusterName: func(o client.Object) string { return clusterName(o, "") },
	}
}

// clusterName finds the Cluster an object belongs to: its cluster-name
// label, else spec (a worker pool's spec.clusterName), else its owning
// Cluster.
func clusterName(obj client.Object, spec string) string {
	if name := obj.GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
		return name
	}
	if spec != "" {
		return spec
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "Cluster" && schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == clusterv1.GroupVersion.Group {
			return ref.Name
		}
	}
	return ""
}

// KindOf returns the history kind of obj, false for kinds without history.
// An unstructured object is taken as a control plane read through the
// contract (ContractKind).
func KindOf(obj client.Object) (Kind, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return ContractKind(u.GroupVersionKind()), true
	}
	switch obj.(type) {
	case *clusterv1.MachineDeployment:
		return MachineDeployment, true
	case *clusterv1.MachinePool:
		return MachinePool, true
	case *controlplanev1.KubeadmControlPlane:
		return KubeadmControlPlane, true
	}
	return Kind{}, false
}
