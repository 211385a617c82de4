package core

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
)

// Kind is one kind of object the CLI works on, and everything its commands
// need to know about it: the kind registry, in the manner of kubectl's
// polymorphichelpers. The commands ask their object's Kind (KindOf) how to
// read, list, pause, restart, switch, plan or judge it, and never switch
// over kinds themselves. What the guard needs too (an empty object, the
// revision content, spec.rollout.after, the Cluster) is the kind's entry in
// the guard's registry (package kinds), Guard, shared rather than written
// twice.
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
	// Guard is the kind's entry in the guard's registry of kinds: how to
	// make, snapshot and restart its objects and find their Cluster. A
	// Cluster's revisions are its topology's (Guard.Tracked); what rolls
	// out is its control plane's and worker pools'. Zero for another provider's control plane
	// until it is resolved.
	Guard kinds.Kind

	// newList returns an empty typed list (its objects are made with
	// Guard.New).
	newList func() client.ObjectList
	// SpecPaused reads spec.paused, for the kinds that have it; the others
	// are paused by the annotation cluster.x-k8s.io/paused alone.
	SpecPaused func(client.Object) bool
	// PauseWarning is what pausing an object of the kind also does, said
	// when it is paused; "" for nothing worth a warning.
	PauseWarning string
	// NoRestart says why the kind cannot be restarted; "" when it can.
	NoRestart string
	// Machines selects the kind's Machines; MachineSets its MachineSets,
	// nil for a kind without.
	Machines, MachineSets func(client.Object) client.MatchingLabels
	// MachinesOptional: the kind's status counts alone tell whether it is
	// rolled out when it has no Machines (most providers run a
	// MachinePool's instances without Machines).
	MachinesOptional bool
	// Counts reads the replica counts, observed generation and conditions
	// a rollout's state is judged from.
	Counts func(client.Object) rolloutCounts
	// Topology is the object's place in its Cluster's topology, when the
	// topology controller manages it.
	Topology topologyPlace
	// templates lists the templates an object references.
	templates func(client.Object) []templateRef
	// Switching is where the template switch writes; nil when the kind has
	// no template switch, and NoSwitch then says why (after "not KIND/NAME").
	Switching *switchFields
	NoSwitch  string
	// Revision is where a revision's content sits in the object.
	Revision revisionPlace
	// RefusePlan says why plan cannot foresee how an object of the kind
	// rolls out; nil for the kinds plan works on (package plan holds a
	// machine planner for each of those, by kind).
	RefusePlan func(Ref) error
	// FromV1beta1 converts a v1beta1 manifest of the kind into out, its
	// v1beta2 type (plan -f); nil when plan -f does not read the kind.
	FromV1beta1 func(u *unstructured.Unstructured, out client.Object) error
	// Verbs are the commands that take the kind, when only some do; nil
	// for every command (see Takes).
	Verbs []string
}

// ContractGroup is the group of the control planes of other providers the
// CLI works on through Cluster API's contract: every provider's control
// plane lives in it (K3s, RKE2, Talos, Kamaji, Canonical Kubernetes, ...).
const ContractGroup = "controlplane.cluster.x-k8s.io"

// The kinds the CLI knows.
var (
	// MachineDeployment is a Cluster API worker pool.
	MachineDeployment = Kind{
		GVK:      kinds.MachineDeployment.GVK,
		Resource: "machinedeployments",
		Names:    []string{"machinedeployment", "machinedeployments", "md"},
		Short:    "md",
		Guard:    kinds.MachineDeployment,

		newList:     func() client.ObjectList { return &clusterv1.MachineDeploymentList{} },
		SpecPaused:  machineDeploymentPaused,
		Machines:    byName(clusterv1.MachineDeploymentNameLabel),
		MachineSets: byName(clusterv1.MachineDeploymentNameLabel),
		Counts:      machineDeploymentCounts,
		Topology:    topologyPlace{workers: "machineDeployments", nameLabel: clusterv1.ClusterTopologyMachineDeploymentNameLabel},
		templates:   machineDeploymentTemplates,
		Switching: &switchFields{
			infrastructure: []string{"template", "spec", "infrastructureRef"},
			bootstrap:      []string{"template", "spec", "bootstrap", "configRef"},
			version:        []string{"template", "spec", "version"},
		},
		Revision:    revisionPlace{Path: "template", Fields: "spec.template"},
		FromV1beta1: machineDeploymentFromV1beta1,
	}
	// MachinePool is a Cluster API worker pool whose machines the
	// infrastructure provider manages as one group (a cloud's scale set).
	MachinePool = Kind{
		GVK:      kinds.MachinePool.GVK,
		Resource: "machinepools",
		Names:    []string{"machinepool", "machinepools", "mp"},
		Short:    "mp",
		Guard:    kinds.MachinePool,

		newList: func() client.ObjectList { return &clusterv1.MachinePoolList{} },
		// Cluster API gives a MachinePool no rollout.after: replacing its
		// instances is the infrastructure provider's business.
		NoRestart: "a MachinePool has no spec.rollout.after in Cluster API v1beta2, so there is nothing to ask a rollout with; roll its instances through its infrastructure provider (for example a new spec.template.spec.infrastructureRef), or use a MachineDeployment",
		Machines: func(o client.Object) client.MatchingLabels {
			return client.MatchingLabels{clusterv1.MachinePoolNameLabel: kinds.MachinePoolLabelValue(o.GetName())}
		},
		MachinesOptional: true,
		Counts:           machinePoolCounts,
		Topology:         topologyPlace{workers: "machinePools", nameLabel: clusterv1.ClusterTopologyMachinePoolNameLabel},
		templates:        machinePoolTemplates,
		NoSwitch:         ": a MachinePool references its own infrastructure machine pool, not a template; edit its spec.template with kubectl (the guard judges and records the change)",
		Revision:         revisionPlace{Path: "template", Fields: "spec.template"},
		// A pool's instances are replaced by its infrastructure provider,
		// in an order the plan cannot know.
		RefusePlan: func(ref Ref) error {
			return fmt.Errorf("plan does not work on machinepool objects: their infrastructure provider replaces their instances, in an order rollout-guard cannot foresee; check a change with --dry-run=server instead (rollout undo %s --dry-run=server)", ref)
		},
	}
	// KubeadmControlPlane is a Cluster API kubeadm control plane.
	KubeadmControlPlane = Kind{
		GVK:      kinds.KubeadmControlPlane.GVK,
		Resource: "kubeadmcontrolplanes",
		Names:    []string{"kubeadmcontrolplane", "kubeadmcontrolplanes", "kcp"},
		Short:    "kcp",
		Guard:    kinds.KubeadmControlPlane,

		newList:      func() client.ObjectList { return &controlplanev1.KubeadmControlPlaneList{} },
		PauseWarning: "also stops its remediation of unhealthy control-plane machines, and all of its other reconciliation, until it is resumed",
		Machines:     byName(clusterv1.MachineControlPlaneNameLabel),
		Counts:       kubeadmControlPlaneCounts,
		Topology:     topologyPlace{ControlPlane: true},
		templates:    kubeadmControlPlaneTemplates,
		Switching: &switchFields{
			infrastructure: []string{"machineTemplate", "spec", "infrastructureRef"},
			version:        []string{"version"},
			noBootstrap:    "a KubeadmControlPlane's bootstrap config is inline, in spec.kubeadmConfigSpec",
		},
		Revision:    revisionPlace{Fields: "spec.version, spec.machineTemplate and spec.kubeadmConfigSpec", InlineBootstrap: true},
		FromV1beta1: kubeadmControlPlaneFromV1beta1,
	}
	// Cluster is a Cluster API cluster: restart, status and history work
	// on its control plane and every worker pool.
	Cluster = Kind{
		GVK:      kinds.Cluster.GVK,
		Resource: "clusters",
		Names:    []string{"cluster", "clusters"},

		Guard:       kinds.Cluster,
		Revision:    revisionPlace{Path: "topology", Fields: "spec.topology"},
		newList:     func() client.ObjectList { return &clusterv1.ClusterList{} },
		SpecPaused:  clusterPaused,
		FromV1beta1: clusterFromV1beta1,
	}
	// ClusterClass is a Cluster API ClusterClass: history lists its
	// revisions and what each rolled of the Clusters on the class, undo
	// rolls it back, status watches the Clusters of the class
	// (spec.topology.classRef); the commands that change or restart one
	// object refuse it.
	ClusterClass = Kind{
		GVK:      kinds.ClusterClass.GVK,
		Resource: "clusterclasses",
		Names:    []string{"clusterclass", "clusterclasses", "cc"},
		Short:    "cc",
		Guard:    kinds.ClusterClass,
		newList:  func() client.ObjectList { return &clusterv1.ClusterClassList{} },
		Revision: revisionPlace{Fields: "spec"},
		Verbs:    []string{"status", "history", "undo"},
	}
	Kinds = []Kind{MachineDeployment, MachinePool, KubeadmControlPlane, Cluster, ClusterClass}
)

// Takes says why the command verb does not take the kind, nil when it
// does.
func (k Kind) Takes(verb string) error {
	if k.Verbs == nil || slices.Contains(k.Verbs, verb) {
		return nil
	}
	return fmt.Errorf("%s does not take %s objects: %s works with %s only (rollout %s %s/NAME); name the objects of its Clusters instead",
		verb, k.Singular(), k.Singular(), strings.Join(k.Verbs, ", "), k.Verbs[0], k.Singular())
}

// contractControlPlane is the kind of another provider's control plane,
// gvk (its Kind and Version "" until the API server names it), served as
// resource, worked on at the fields of Cluster API's control-plane
// contract: spec.version, spec.machineTemplate, spec.replicas, the status
// counts and conditions, and spec.rollout.after where the provider has it.
func contractControlPlane(gvk schema.GroupVersionKind, resource string) Kind {
	k := Kind{
		GVK:      gvk,
		Resource: resource,
		Names:    []string{resource},
		Contract: true,

		Machines:  byName(clusterv1.MachineControlPlaneNameLabel),
		Counts:    contractCounts,
		Topology:  topologyPlace{ControlPlane: true},
		templates: contractTemplates,
		NoSwitch:  ": edit its spec.version or spec.machineTemplate with kubectl (the guard judges and records the change), or roll back with undo",
		Revision:  revisionPlace{Fields: "spec.version and spec.machineTemplate"},
		RefusePlan: func(ref Ref) error {
			return fmt.Errorf("plan does not work on %s: another provider's control plane replaces its machines in an order rollout-guard cannot foresee; check a change with --dry-run=server instead", ref)
		},
	}
	if gvk.Kind != "" {
		k.Guard = kinds.Contract(gvk)
		k.Names = []string{resource, strings.ToLower(gvk.Kind)}
	}
	return k
}

// Scheme holds the types the CLI reads and writes: client-go's, Cluster API v1beta2
// core and kubeadm control plane, and the guard's RolloutRevisions.
var Scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1.AddToScheme, rgv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building the scheme: %v", err))
		}
	}
	return s
})

// KindsHelp lists the kinds for messages.
const KindsHelp = "use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io"

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
	if k.Guard.New != nil {
		return k.Guard.New()
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK)
	return u
}

// NewList returns an empty typed list of the kind (unstructured for a
// control plane of another provider).
func (k Kind) NewList() client.ObjectList {
	if k.Contract {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		return l
	}
	return k.newList()
}

// RolloutAfter is obj's spec.rollout.after, zero when unset, not a time or
// the kind has none.
func (k Kind) RolloutAfter(obj client.Object) time.Time {
	if k.Guard.RolloutAfter == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339, k.Guard.RolloutAfter(obj))
	return t
}

// clusterName is the Cluster obj belongs to ("" when it names none); a
// Cluster's is its own name.
func (k Kind) clusterName(obj client.Object) string {
	if k.Guard.ClusterName == nil {
		return obj.GetName()
	}
	return k.Guard.ClusterName(obj)
}

// PausedBy says how obj is paused: "spec.paused is true", "annotation
// cluster.x-k8s.io/paused", or "" when it is not.
func (k Kind) PausedBy(obj client.Object) string {
	if k.SpecPaused != nil && k.SpecPaused(obj) {
		return "spec.paused is true"
	}
	if _, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]; ok {
		return "annotation " + clusterv1.PausedAnnotation
	}
	return ""
}

// byName selects the objects whose label key is the object's name.
func byName(key string) func(client.Object) client.MatchingLabels {
	return func(o client.Object) client.MatchingLabels { return client.MatchingLabels{key: o.GetName()} }
}

// topologyPlace is where an object managed by its Cluster's topology is
// described in the Cluster's spec.topology.
type topologyPlace struct {
	// ControlPlane: the object is spec.topology.controlPlane.
	ControlPlane bool
	// workers is the list of spec.topology.workers that describes a worker
	// pool ("machineDeployments"), nameLabel the label naming its entry.
	workers, nameLabel string
}

// name is obj's name in its list of spec.topology.workers.
func (p topologyPlace) name(obj client.Object) string {
	return obj.GetLabels()[p.nameLabel]
}

// path names obj's place in its Cluster's topology, for messages.
func (p topologyPlace) path(obj client.Object) string {
	if p.ControlPlane {
		return "spec.topology.controlPlane"
	}
	return fmt.Sprintf("spec.topology.workers.%s[name=%s]", p.workers, p.name(obj))
}

// templateRef is one template an object references.
type templateRef struct {
	// field is the reference's field path.
	field string
	// role is "infrastructure template" or "bootstrap template".
	role string
	ref  clusterv1.ContractVersionedObjectReference
}

// switchFields are where the template switch (rollout KIND/NAME
// --template ...) writes, as paths under spec.
type switchFields struct {
	// infrastructure, bootstrap and version are the paths of the
	// infrastructure template, the bootstrap template and the version;
	// bootstrap is nil when the kind has no bootstrap template, and
	// noBootstrap says why.
	infrastructure, bootstrap, version []string
	noBootstrap                        string
}

// RefuseBootstrap refuses --bootstrap-template (when given) on a kind
// without a bootstrap template.
func (k Kind) RefuseBootstrap(flag string) error {
	if flag == "" || k.Switching == nil || k.Switching.bootstrap != nil {
		return nil
	}
	return fmt.Errorf("--bootstrap-template works on machinedeployments only: %s", k.Switching.noBootstrap)
}

// revisionPlace is where a revision's content sits in an object of the
// kind.
type revisionPlace struct {
	// Path is the content's field under spec; "" when the content is
	// fields of spec itself.
	Path string
	// Fields names the content's fields, for messages.
	Fields string
	// InlineBootstrap: the bootstrap config is part of the content, not a
	// template it references.
	InlineBootstrap bool
}
