package core

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Group suffixes of Cluster API's provider contracts: an infrastructure
// machine template lives in a group ending in infrastructure.cluster.x-k8s.io,
// a bootstrap config template in one ending in bootstrap.cluster.x-k8s.io.
const (
	InfrastructureGroupSuffix = "infrastructure.cluster.x-k8s.io"
	BootstrapGroupSuffix      = "bootstrap.cluster.x-k8s.io"
)

// SwitchSpec is the spec part of the merge patch of a template switch of
// obj: the infrastructure and bootstrap templates and the version, each
// when set, at the fields its kind has them. A topology-managed object is
// refused, naming what to change instead.
func SwitchSpec(obj client.Object, infra, bootstrap *clusterv1.ContractVersionedObjectReference, version string) (map[string]any, error) {
	kind := KindOf(obj)
	fields := kind.Switching
	if fields == nil {
		return nil, fmt.Errorf("the template switch does not work on %s", Describe(obj, kind))
	}
	if TopologyOwned(obj) {
		if kind.Topology.ControlPlane {
			return nil, TopologyError("switch the template of", obj, "change the control plane's machine infrastructure template in the ClusterClass of Cluster CLUSTER (spec.controlPlane.machineInfrastructure), or spec.topology.version of the Cluster")
		}
		return nil, TopologyError("switch the templates of", obj, "change the templates of its worker class in the ClusterClass of Cluster CLUSTER, or the class and version in the Cluster's topology ("+TopologyPath(obj)+", spec.topology.version)")
	}
	ref := func(r *clusterv1.ContractVersionedObjectReference) map[string]any {
		return map[string]any{"apiGroup": r.APIGroup, "kind": r.Kind, "name": r.Name}
	}
	spec := map[string]any{}
	if infra != nil {
		setPath(spec, fields.infrastructure, ref(infra))
	}
	if bootstrap != nil && fields.bootstrap != nil {
		setPath(spec, fields.bootstrap, ref(bootstrap))
	}
	if version != "" {
		setPath(spec, fields.version, version)
	}
	return spec, nil
}

// TemplateRefsOf lists the templates obj references.
func TemplateRefsOf(obj client.Object) []templateRef {
	if k := KindOf(obj); k.templates != nil {
		return k.templates(obj)
	}
	return nil
}

// CheckTemplates makes sure every template refs names exists in namespace;
// the error names the missing one, its field, and wayOut.
func (c *Session) CheckTemplates(ctx context.Context, cl *Clients, namespace string, refs []templateRef, purpose, wayOut string) error {
	for _, r := range refs {
		gk := schema.GroupKind{Group: r.ref.APIGroup, Kind: r.ref.Kind}
		mapping, err := cl.Mapper.RESTMapping(gk)
		if err != nil {
			return fmt.Errorf("cannot %s: the %s %s %s/%s (%s) cannot be checked: the API server serves no kind %s: %w", purpose, r.role, gk.String(), namespace, r.ref.Name, r.field, gk.String(), err)
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(mapping.GroupVersionKind)
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.ref.Name}, meta); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return fmt.Errorf("cannot %s: the %s %s %q (%s) does not exist in namespace %q; %s", purpose, r.role, r.ref.Kind, r.ref.Name, r.field, namespace, wayOut)
			}
			return Call{Verb: "get", GR: mapping.Resource.GroupResource(), Kind: r.ref.Kind, Namespace: namespace, Name: r.ref.Name, Purpose: purpose}.Explain(err)
		}
	}
	return nil
}

// Snapshots returns the revision content of an object before and after a change.
func Snapshots(oldObj, newObj client.Object) (revisions.Snapshot, revisions.Snapshot, error) {
	kind := KindOf(oldObj)
	if !kind.Guard.HasRevisions() {
		return revisions.Snapshot{}, revisions.Snapshot{}, fmt.Errorf("%s has no revisions", Describe(oldObj, kind))
	}
	a, err := kind.Guard.Snapshot(oldObj)
	if err != nil {
		return a, a, err
	}
	b, err := kind.Guard.Snapshot(newObj)
	return a, b, err
}

// ResolveTemplate resolves a --template value, KIND/NAME, through the API
// server's discovery, and checks that it is a template of the right
// provider contract (its group ends in groupSuffix, its kind in "Template")
// that exists in namespace.
func (c *Session) ResolveTemplate(ctx context.Context, cl *Clients, namespace, flag, value, groupSuffix, what, example string) (*clusterv1.ContractVersionedObjectReference, error) {
	kindArg, name, ok := strings.Cut(value, "/")
	if !ok || kindArg == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%s %q is not KIND/NAME: write e.g. %s %s/NAME", flag, value, flag, strings.ToLower(example))
	}
	gvr, gr := schema.ParseResourceArg(kindArg)
	var gvk schema.GroupVersionKind
	var err error
	if gvr != nil {
		gvk, err = cl.Mapper.KindFor(*gvr)
	}
	if gvr == nil || err != nil {
		gvk, err = cl.Mapper.KindFor(gr.WithVersion(""))
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: the API server knows no kind %q (%v); write the kind of %s, e.g. %s/NAME", flag, value, kindArg, err, what, strings.ToLower(example))
	}
	if !strings.HasSuffix(gvk.Group, groupSuffix) || !strings.HasSuffix(gvk.Kind, "Template") {
		return nil, fmt.Errorf("%s %s: %s is not %s: want a kind of an API group ending in %s whose name ends in Template, e.g. %s", flag, value, gvk.GroupKind().String(), what, groupSuffix, example)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, meta); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, fmt.Errorf("%s %s: %s %q not found in namespace %q: create it first (an object references templates in its own namespace)", flag, value, gvk.Kind, name, namespace)
		}
		mapping, merr := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		gr := schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}
		if merr == nil {
			gr = mapping.Resource.GroupResource()
		}
		return nil, Call{Verb: "get", GR: gr, Kind: gvk.Kind, Namespace: namespace, Name: name, Purpose: "check " + flag + " " + value}.Explain(err)
	}
	return &clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: name}, nil
}

// setPath sets value at path in m, making the maps on the way.
func setPath(m map[string]any, path []string, value any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}
