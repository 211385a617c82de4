package rollout

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is one kind of object the CLI works on.
type Kind struct {
	// GVK is the kind's v1beta2 group, version and kind.
	GVK schema.GroupVersionKind
	// Resource is the plural resource name, e.g. "machinedeployments".
	Resource string
	// Names are the names users may type for the kind (singular, plural,
	// short), lowercase.
	Names []string
	// Short is the short name shown in messages ("md"), "" if none.
	Short string
	// Contract marks a control-plane kind of another provider, worked on
	// as unstructured objects at the fields of Cluster API's control-plane
	// contract. Its GVK's Version is "" until resolved against the API
	// server (see resolveContract); Resource is what the user typed.
	Contract bool
}

// contractGroup is the group of the control planes of other providers the
// CLI works on through Cluster API's contract: every provider's control
// plane lives in it (K3s, RKE2, Talos, Kamaji, Canonical Kubernetes, ...).
const contractGroup = "controlplane.cluster.x-k8s.io"

// The kinds the CLI knows.
var (
	// MachineDeployment is a Cluster API worker pool.
	MachineDeployment = Kind{
		GVK:      clusterv1.GroupVersion.WithKind("MachineDeployment"),
		Resource: "machinedeployments",
		Names:    []string{"machinedeployment", "machinedeployments", "md"},
		Short:    "md",
	}
	// MachinePool is a Cluster API worker pool whose machines the
	// infrastructure provider manages as one group (a cloud's scale set).
	MachinePool = Kind{
		GVK:      clusterv1.GroupVersion.WithKind("MachinePool"),
		Resource: "machinepools",
		Names:    []string{"machinepool", "machinepools", "mp"},
		Short:    "mp",
	}
	// KubeadmControlPlane is a Cluster API kubeadm control plane.
	KubeadmControlPlane = Kind{
		GVK:      controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"),
		Resource: "kubeadmcontrolplanes",
		Names:    []string{"kubeadmcontrolplane", "kubeadmcontrolplanes", "kcp"},
		Short:    "kcp",
	}
	// Cluster is a Cluster API cluster: restart, status and history work
	// on its control plane and every worker pool.
	Cluster = Kind{
		GVK:      clusterv1.GroupVersion.WithKind("Cluster"),
		Resource: "clusters",
		Names:    []string{"cluster", "clusters"},
	}
	kinds = []Kind{MachineDeployment, MachinePool, KubeadmControlPlane, Cluster}
)

// kindsHelp lists the kinds for messages.
const kindsHelp = "use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io"

// GroupResource is the kind's group and resource, e.g.
// "machinedeployments.cluster.x-k8s.io".
func (k Kind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}

// Singular is the kind as users type it: "machinedeployment", or for a
// control plane of another provider its qualified name,
// "kthreescontrolplane.controlplane.cluster.x-k8s.io".
func (k Kind) Singular() string {
	if k.Contract && k.GVK.Kind == "" {
		return k.Resource + "." + k.GVK.Group
	}
	if k.Contract {
		return strings.ToLower(k.GVK.Kind) + "." + k.GVK.Group
	}
	return strings.ToLower(k.GVK.Kind)
}

// New returns an empty typed object of the kind, an unstructured one for a
// control plane of another provider.
func (k Kind) New() client.Object {
	if k.Contract {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.GVK)
		return u
	}
	switch k.GVK.Kind {
	case MachineDeployment.GVK.Kind:
		return &clusterv1.MachineDeployment{}
	case MachinePool.GVK.Kind:
		return &clusterv1.MachinePool{}
	case KubeadmControlPlane.GVK.Kind:
		return &controlplanev1.KubeadmControlPlane{}
	}
	return &clusterv1.Cluster{}
}

// NewList returns an empty typed list of the kind (unstructured for a
// control plane of another provider).
func (k Kind) NewList() client.ObjectList {
	if k.Contract {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		return l
	}
	switch k.GVK.Kind {
	case MachineDeployment.GVK.Kind:
		return &clusterv1.MachineDeploymentList{}
	case MachinePool.GVK.Kind:
		return &clusterv1.MachinePoolList{}
	case KubeadmControlPlane.GVK.Kind:
		return &controlplanev1.KubeadmControlPlaneList{}
	}
	return &clusterv1.ClusterList{}
}

// ParseKind resolves what a user typed as a kind, case-insensitively:
// machinedeployment(s) or md, machinepool(s) or mp, kubeadmcontrolplane(s)
// or kcp, cluster(s); a
// fully qualified name such as machinedeployments.cluster.x-k8s.io works too.
func ParseKind(s string) (Kind, error) {
	name, group, _ := strings.Cut(strings.ToLower(s), ".")
	for _, k := range kinds {
		for _, n := range k.Names {
			if n == name && (group == "" || group == k.GVK.Group) {
				return k, nil
			}
		}
	}
	if group == contractGroup && name != "" {
		// Another provider's control plane: what it is called is known
		// once the API server is asked (resolveContract).
		return Kind{GVK: schema.GroupVersionKind{Group: group}, Resource: name, Names: []string{name}, Contract: true}, nil
	}
	return Kind{}, fmt.Errorf("unknown resource kind %q: %s", s, kindsHelp)
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
	k.GVK, k.Resource = gvk, mapping.Resource.Resource
	k.Names = []string{mapping.Resource.Resource, strings.ToLower(gvk.Kind)}
	return k, nil
}

// Ref names one object: a kind and a name (the namespace comes from the
// command line or the kubeconfig).
type Ref struct {
	// Kind is the object's kind.
	Kind Kind
	// Name is the object's name.
	Name string
}

// String is "machinedeployment/md-0".
func (r Ref) String() string { return r.Kind.Singular() + "/" + r.Name }

// ParseRef parses "KIND/NAME".
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		return Ref{}, fmt.Errorf("resource %q is not KIND/NAME: write e.g. machinedeployment/md-0 or kcp/my-cluster-control-plane", s)
	}
	k, err := ParseKind(kind)
	if err != nil {
		return Ref{}, err
	}
	if name == "" || strings.Contains(name, "/") {
		return Ref{}, fmt.Errorf("resource %q has no valid name: write %s/NAME", s, k.Singular())
	}
	return Ref{Kind: k, Name: name}, nil
}

// Targets are the objects a command works on, as the user named them:
// KIND/NAME arguments, or KIND NAME... (kubectl's two forms), or a KIND with
// a label selector.
type Targets struct {
	// Refs are the objects named.
	Refs []Ref
	// Kind is set when the user named a kind alone (with a selector).
	Kind *Kind
}

// ParseTargets reads a command's arguments: "KIND/NAME ...", "KIND NAME ..."
// or "KIND" alone, which needs a selector (selector true).
func ParseTargets(verb string, args []string, selector bool) (Targets, error) {
	if len(args) == 0 {
		return Targets{}, fmt.Errorf("%s needs a resource: write %s KIND/NAME (%s)", verb, verb, kindsHelp)
	}
	if strings.Contains(args[0], "/") {
		var t Targets
		for _, a := range args {
			if !strings.Contains(a, "/") {
				return Targets{}, fmt.Errorf("mixed resource forms %q and %q: write every resource as KIND/NAME", args[0], a)
			}
			r, err := ParseRef(a)
			if err != nil {
				return Targets{}, err
			}
			t.Refs = append(t.Refs, r)
		}
		if selector {
			return Targets{}, fmt.Errorf("-l/--selector selects by label: name a kind alone, e.g. %s machinedeployment -l KEY=VALUE, not %s", verb, args[0])
		}
		return t, nil
	}
	k, err := ParseKind(args[0])
	if err != nil {
		return Targets{}, err
	}
	if len(args) == 1 {
		if !selector {
			return Targets{}, fmt.Errorf("%s needs a name: write %s %s/NAME, or select by label with -l KEY=VALUE", args[0], verb, k.Singular())
		}
		return Targets{Kind: &k}, nil
	}
	if selector {
		return Targets{}, fmt.Errorf("name objects or select them with -l/--selector, not both")
	}
	var t Targets
	for _, name := range args[1:] {
		if strings.Contains(name, "/") {
			return Targets{}, fmt.Errorf("mixed resource forms %q and %q: write every resource as KIND/NAME", args[0], name)
		}
		t.Refs = append(t.Refs, Ref{Kind: k, Name: name})
	}
	return t, nil
}

// parseOne reads the arguments of a command that works on exactly one
// object: "KIND/NAME" or "KIND NAME".
func parseOne(verb string, args []string) (Ref, error) {
	t, err := ParseTargets(verb, args, false)
	if err != nil {
		return Ref{}, err
	}
	if len(t.Refs) != 1 {
		return Ref{}, fmt.Errorf("%s works on one object at a time; got %d", verb, len(t.Refs))
	}
	return t.Refs[0], nil
}

// describe names an object in messages: "MachineDeployment ns/md-0".
func describe(obj client.Object, kind Kind) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Its kind as served, whatever the user typed.
		return u.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return kind.GVK.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// kindOf returns the CLI kind of a typed object.
func kindOf(obj client.Object) Kind {
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		return MachineDeployment
	case *clusterv1.MachinePool:
		return MachinePool
	case *controlplanev1.KubeadmControlPlane:
		return KubeadmControlPlane
	case *unstructured.Unstructured:
		gvk := o.GroupVersionKind()
		return Kind{GVK: gvk, Resource: strings.ToLower(gvk.Kind) + "s", Names: []string{strings.ToLower(gvk.Kind)}, Contract: true}
	}
	return Cluster
}
