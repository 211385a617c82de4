package core

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ParseKind resolves what a user typed as a kind, case-insensitively:
// machinedeployment(s) or md, machinepool(s) or mp, kubeadmcontrolplane(s)
// or kcp, cluster(s), clusterclass(es) or cc; a
// fully qualified name such as machinedeployments.cluster.x-k8s.io works too.
func ParseKind(s string) (Kind, error) {
	name, group, _ := strings.Cut(strings.ToLower(s), ".")
	for _, k := range Kinds {
		for _, n := range k.Names {
			if n == name && (group == "" || group == k.GVK.Group) {
				return k, nil
			}
		}
	}
	if group == ContractGroup && name != "" {
		// Another provider's control plane: what it is called is known
		// once the API server is asked (resolveContract).
		return contractControlPlane(schema.GroupVersionKind{Group: group}, name), nil
	}
	return Kind{}, fmt.Errorf("unknown resource kind %q: %s", s, KindsHelp)
}

// resolveContract returns k with its kind, version and plural resource as
// the API server serves them, for a control plane of another provider; any
// other kind is returned as is.
func resolveContract(mapper meta.RESTMapper, k Kind) (Kind, error) {
	if !k.Contract || k.GVK.Version != "" {
		return k, nil
	}
	gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: k.GVK.Group, Resource: k.Resource})
	if err != nil {
		return k, fmt.Errorf("%s.%s: the API server serves no such control-plane kind (is its provider installed?): %w", k.Resource, k.GVK.Group, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return k, fmt.Errorf("%s: %w", gvk.GroupKind(), err)
	}
	return contractControlPlane(gvk, mapping.Resource.Resource), nil
}

// KindOf returns the kind of an object: a typed object's by its type, an
// unstructured one as another provider's control plane.
func KindOf(obj client.Object) Kind {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		return contractControlPlane(gvk, strings.ToLower(gvk.Kind)+"s")
	}
	gvk, err := apiutil.GVKForObject(obj, Scheme())
	if err == nil {
		for _, k := range Kinds {
			if k.GVK.GroupKind() == gvk.GroupKind() {
				return k
			}
		}
	}
	return Kind{GVK: gvk}
}

// Describe names an object in messages: "MachineDeployment ns/md-0".
func Describe(obj client.Object, kind Kind) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Its kind as served, whatever the user typed.
		return u.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return kind.GVK.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// MachineLabels selects the Machines of a MachineDeployment, MachinePool,
// KubeadmControlPlane or another provider's control plane.
func MachineLabels(obj client.Object) client.MatchingLabels { return KindOf(obj).Machines(obj) }

// MachineSetLabels selects the MachineSets of a MachineDeployment; nil for
// a kind without MachineSets.
func MachineSetLabels(obj client.Object) client.MatchingLabels {
	if k := KindOf(obj); k.MachineSets != nil {
		return k.MachineSets(obj)
	}
	return nil
}
