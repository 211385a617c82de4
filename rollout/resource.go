package rollout

import (
	"fmt"
	"strings"

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
}

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
const kindsHelp = "use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp) or cluster"

// GroupResource is the kind's group and resource, e.g.
// "machinedeployments.cluster.x-k8s.io".
func (k Kind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}

// Singular is the kind as users type it: "machinedeployment".
func (k Kind) Singular() string { return strings.ToLower(k.GVK.Kind) }

// New returns an empty typed object of the kind.
func (k Kind) New() client.Object {
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

// NewList returns an empty typed list of the kind.
func (k Kind) NewList() client.ObjectList {
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
	return Kind{}, fmt.Errorf("unknown resource kind %q: %s", s, kindsHelp)
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
	return kind.GVK.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// kindOf returns the CLI kind of a typed object.
func kindOf(obj client.Object) Kind {
	switch obj.(type) {
	case *clusterv1.MachineDeployment:
		return MachineDeployment
	case *clusterv1.MachinePool:
		return MachinePool
	case *controlplanev1.KubeadmControlPlane:
		return KubeadmControlPlane
	}
	return Cluster
}
