package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// get reads one object.
func (c *cli) get(ctx context.Context, cl *clients, ref Ref, purpose string) (client.Object, error) {
	kind, err := resolveContract(cl.mapper, ref.Kind)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	ref.Kind = kind
	obj := ref.Kind.New()
	err = cl.client.Get(ctx, client.ObjectKey{Namespace: cl.namespace, Name: ref.Name}, obj)
	if err != nil {
		return nil, call{verb: "get", gr: ref.Kind.GroupResource(), kind: ref.Kind.GVK.Kind, namespace: cl.namespace, name: ref.Name, purpose: purpose}.explain(err)
	}
	return obj, nil
}

// reread reads obj again into a new object of its kind.
func (c *cli) reread(ctx context.Context, cl *clients, obj client.Object, purpose string) (client.Object, error) {
	kind := kindOf(obj)
	fresh := kind.New()
	if err := cl.client.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return nil, call{verb: "get", gr: kind.GroupResource(), kind: kind.GVK.Kind, namespace: obj.GetNamespace(), name: obj.GetName(), purpose: purpose}.explain(err)
	}
	return fresh, nil
}

// resolve reads the objects a command names, or lists those its selector
// matches (in every namespace with allNamespaces), sorted by namespace and name.
func (c *cli) resolve(ctx context.Context, cl *clients, t Targets, selector string, allNamespaces bool, verb string) ([]client.Object, error) {
	if t.Kind == nil {
		objs := make([]client.Object, 0, len(t.Refs))
		for _, r := range t.Refs {
			obj, err := c.get(ctx, cl, r, verb+" "+r.String())
			if err != nil {
				return nil, err
			}
			objs = append(objs, obj)
		}
		return objs, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("-l/--selector %q: %w", selector, err)
	}
	kind, err := resolveContract(cl.mapper, *t.Kind)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: %w", verb, err)
	}
	t.Kind = &kind
	list := t.Kind.NewList()
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	ns := ""
	if !allNamespaces {
		ns = cl.namespace
		opts = append(opts, client.InNamespace(ns))
	}
	if err := cl.client.List(ctx, list, opts...); err != nil {
		return nil, call{verb: "list", gr: t.Kind.GroupResource(), kind: t.Kind.GVK.Kind, namespace: ns, purpose: verb + " " + t.Kind.Resource}.explain(err)
	}
	objs, err := extract(list)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: reading the list of %s: %w", verb, t.Kind.Resource, err)
	}
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	return objs, nil
}

// forEach runs do on every object; with one object its error is returned as
// is, with several each error is printed and a summary returned.
func (c *cli) forEach(verb string, objs []client.Object, selector string, do func(client.Object) error) error {
	if len(objs) == 0 {
		c.notef("No resources found matching -l %s.", selector)
		return nil
	}
	if len(objs) == 1 {
		return do(objs[0])
	}
	failed := 0
	for _, obj := range objs {
		if err := do(obj); err != nil {
			failed++
			fmt.Fprintf(c.IOStreams.ErrOut, "error: %v\n", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s failed for %d of %d objects", verb, failed, len(objs))
	}
	return nil
}

// pausedBy says how obj is paused: "spec.paused is true", "annotation
// cluster.x-k8s.io/paused", or "" when it is not.
func pausedBy(obj client.Object) string { return kindOf(obj).pausedBy(obj) }

// pausedError refuses to act on a paused object, saying how to resume it.
func (c *cli) pausedError(verb string, obj client.Object, how string) error {
	kind := kindOf(obj)
	return fmt.Errorf("cannot %s %s: it is paused (%s), so Cluster API would not roll it out; resume it first with: %s resume %s/%s -n %s",
		verb, describe(obj, kind), how, c.name(), kind.Singular(), obj.GetName(), obj.GetNamespace())
}

// clusterNameOf finds the Cluster an object belongs to: its cluster-name
// label, a worker pool's spec.clusterName, or its owning Cluster.
func clusterNameOf(obj client.Object) string { return kindOf(obj).clusterName(obj) }

// topologyOwned reports whether the topology controller manages obj.
func topologyOwned(obj client.Object) bool {
	_, ok := obj.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]
	return ok
}

// topologyName is the name of a topology-managed worker pool in its
// Cluster's spec.topology.workers.
func topologyName(obj client.Object) string { return kindOf(obj).topology.name(obj) }

// topologyError refuses a direct edit of a topology-managed object, saying
// what to change instead.
func topologyError(verb string, obj client.Object, instead string) error {
	kind := kindOf(obj)
	cluster := clusterNameOf(obj)
	if cluster == "" {
		cluster = "<its Cluster>"
	}
	return fmt.Errorf("cannot %s %s: it is managed by the topology of Cluster %s (label %s), and the topology controller would revert a direct edit; %s",
		verb, describe(obj, kind), cluster, clusterv1.ClusterTopologyOwnedLabel, strings.ReplaceAll(instead, "CLUSTER", cluster))
}

// topologyPath names a topology-managed object's place in its Cluster's
// topology, for messages.
func topologyPath(obj client.Object) string { return kindOf(obj).topology.path(obj) }

// templateRefsOf lists the templates obj references.
func templateRefsOf(obj client.Object) []templateRef {
	if k := kindOf(obj); k.templates != nil {
		return k.templates(obj)
	}
	return nil
}

// checkTemplates makes sure every template refs names exists in namespace;
// the error names the missing one, its field, and wayOut.
func (c *cli) checkTemplates(ctx context.Context, cl *clients, namespace string, refs []templateRef, purpose, wayOut string) error {
	for _, r := range refs {
		gk := schema.GroupKind{Group: r.ref.APIGroup, Kind: r.ref.Kind}
		mapping, err := cl.mapper.RESTMapping(gk)
		if err != nil {
			return fmt.Errorf("cannot %s: the %s %s %s/%s (%s) cannot be checked: the API server serves no kind %s: %w", purpose, r.role, gk.String(), namespace, r.ref.Name, r.field, gk.String(), err)
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(mapping.GroupVersionKind)
		if err := cl.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.ref.Name}, meta); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return fmt.Errorf("cannot %s: the %s %s %q (%s) does not exist in namespace %q; %s", purpose, r.role, r.ref.Kind, r.ref.Name, r.field, namespace, wayOut)
			}
			return call{verb: "get", gr: mapping.Resource.GroupResource(), kind: r.ref.Kind, namespace: namespace, name: r.ref.Name, purpose: purpose}.explain(err)
		}
	}
	return nil
}

// dryRun is the --dry-run mode.
type dryRun string

// The --dry-run modes, as kubectl names them.
const (
	dryRunNone   dryRun = "none"
	dryRunClient dryRun = "client"
	dryRunServer dryRun = "server"
)

func parseDryRun(s string) (dryRun, error) {
	switch dryRun(s) {
	case dryRunNone, dryRunClient, dryRunServer:
		return dryRun(s), nil
	case "":
		return dryRunNone, nil
	}
	return "", fmt.Errorf(`--dry-run must be "none", "client" or "server", not %q`, s)
}

// patchOf builds a JSON merge patch: the resourceVersion precondition, the
// annotations to set (nil values remove a key) and the spec changes.
func patchOf(resourceVersion string, annotations map[string]any, spec map[string]any) ([]byte, error) {
	md := map[string]any{}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	if len(annotations) > 0 {
		md["annotations"] = annotations
	}
	p := map[string]any{}
	if len(md) > 0 {
		p["metadata"] = md
	}
	if len(spec) > 0 {
		p["spec"] = spec
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return data, nil
}

// causeAnnotations are the annotations every write carries.
func causeAnnotations(cause string) map[string]any {
	if cause == "" {
		return nil
	}
	return map[string]any{revisions.AnnotationChangeCause: cause}
}

// send sends one patch of obj (which receives the API server's answer),
// with the CLI's field manager; server dry-run when dry is dryRunServer.
func (c *cli) send(ctx context.Context, cl *clients, obj client.Object, pt types.PatchType, data []byte, dry dryRun, purpose string) error {
	if c.BeforeWrite != nil {
		if err := c.BeforeWrite(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
	}
	opts := []client.PatchOption{client.FieldOwner(FieldManager)}
	if dry == dryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	kind := kindOf(obj)
	err := cl.client.Patch(ctx, obj, client.RawPatch(pt, data), opts...)
	return call{verb: "patch", gr: kind.GroupResource(), kind: kind.GVK.Kind, namespace: obj.GetNamespace(), name: obj.GetName(), purpose: purpose}.explain(err)
}

// applyMergePatch returns obj with a JSON merge patch (RFC 7386) applied,
// as the API server would store it, for a local policy check.
func applyMergePatch(obj client.Object, patch []byte) (client.Object, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	merged, err := jsonpatch.MergePatch(raw, patch)
	if err != nil {
		return nil, fmt.Errorf("applying the patch to %s: %w", obj.GetName(), err)
	}
	out := kindOf(obj).New()
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, fmt.Errorf("decoding the patched %s: %w", obj.GetName(), err)
	}
	return out, nil
}

// operationName is how NamePrinter names an object: "machinedeployment.cluster.x-k8s.io/md-0".
func operationName(obj client.Object) string {
	kind := kindOf(obj)
	return strings.ToLower(kind.GVK.Kind) + "." + kind.GVK.Group + "/" + obj.GetName()
}

// clusterMembers are the objects of a Cluster the CLI works on.
type clusterMembers struct {
	// controlPlane is its KubeadmControlPlane, nil when it has none.
	controlPlane *controlplanev1.KubeadmControlPlane
	// other is its control plane when it is not a KubeadmControlPlane.
	other *clusterv1.ContractVersionedObjectReference
	// machineDeployments are its MachineDeployments, by name.
	machineDeployments []*clusterv1.MachineDeployment
}

// objects are the control plane (if a KubeadmControlPlane), then the
// MachineDeployments.
func (m clusterMembers) objects() []client.Object {
	var objs []client.Object
	if m.controlPlane != nil {
		objs = append(objs, m.controlPlane)
	}
	for _, md := range m.machineDeployments {
		objs = append(objs, md)
	}
	return objs
}

// clusterMembers reads a Cluster's control plane (spec.controlPlaneRef) and
// its MachineDeployments (spec.clusterName).
func (c *cli) clusterMembers(ctx context.Context, cl *clients, cluster *clusterv1.Cluster, purpose string) (clusterMembers, error) {
	ns := cluster.Namespace
	var m clusterMembers
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() {
		if ref.Kind != KubeadmControlPlane.GVK.Kind || ref.APIGroup != KubeadmControlPlane.GVK.Group {
			m.other = &ref
		} else {
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := cl.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, kcp); err != nil {
				return m, call{verb: "get", gr: KubeadmControlPlane.GroupResource(), kind: "KubeadmControlPlane", namespace: ns, name: ref.Name, purpose: purpose}.explain(err)
			}
			m.controlPlane = kcp
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := cl.client.List(ctx, mds, client.InNamespace(ns)); err != nil {
		return m, call{verb: "list", gr: MachineDeployment.GroupResource(), kind: "MachineDeployment", namespace: ns, purpose: purpose}.explain(err)
	}
	sort.Slice(mds.Items, func(i, j int) bool { return mds.Items[i].Name < mds.Items[j].Name })
	for i := range mds.Items {
		if mds.Items[i].Spec.ClusterName == cluster.Name {
			m.machineDeployments = append(m.machineDeployments, &mds.Items[i])
		}
	}
	return m, nil
}
