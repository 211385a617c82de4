package rollout

import (
	"context"
	"fmt"
	"sort"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reading what a command works on: the objects named or selected, a
// Cluster's control plane and worker pools.

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

// clusterMembers are the objects of a Cluster the CLI works on.
type clusterMembers struct {
	// controlPlane is its KubeadmControlPlane, nil when it has none.
	controlPlane *controlplanev1.KubeadmControlPlane
	// other is its control plane when it is not a KubeadmControlPlane.
	other *clusterv1.ContractVersionedObjectReference
	// machineDeployments are its MachineDeployments, by name.
	machineDeployments []*clusterv1.MachineDeployment
	// machinePools are its MachinePools, by name; read only for what
	// shows them (clusterPools).
	machinePools []*clusterv1.MachinePool
}

// objects are the control plane (if a KubeadmControlPlane), then the
// MachineDeployments: what a restart of the cluster restarts (a
// MachinePool has no spec.rollout.after).
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

// withPools are objects, then the MachinePools: every object of the
// cluster whose rollout the CLI follows and whose history the guard
// records.
func (m clusterMembers) withPools() []client.Object {
	objs := m.objects()
	for _, mp := range m.machinePools {
		objs = append(objs, mp)
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

// clusterPools reads a Cluster's control plane and MachineDeployments
// (clusterMembers) and its MachinePools (spec.clusterName): what history
// and status show of a cluster. A management cluster that does not serve
// MachinePools has none. Restarts and plans read no MachinePools: a
// MachinePool has no spec.rollout.after, and they need not list them.
func (c *cli) clusterPools(ctx context.Context, cl *clients, cluster *clusterv1.Cluster, purpose string) (clusterMembers, error) {
	m, err := c.clusterMembers(ctx, cl, cluster, purpose)
	if err != nil {
		return m, err
	}
	mps, _, err := listMachinePools(ctx, cl, cluster.Namespace, purpose)
	if err != nil {
		return m, err
	}
	sort.Slice(mps, func(i, j int) bool { return mps[i].Name < mps[j].Name })
	for i := range mps {
		if mps[i].Spec.ClusterName == cluster.Name {
			m.machinePools = append(m.machinePools, &mps[i])
		}
	}
	return m, nil
}

// listMachinePools lists the MachinePools in namespace ns that opts select.
// served is false, and nothing listed, when the management cluster does not
// serve MachinePools (Cluster API's MachinePool feature may be off, its CRD
// not installed); any other failure is explained for purpose.
func listMachinePools(ctx context.Context, cl *clients, ns, purpose string, opts ...client.ListOption) (_ []clusterv1.MachinePool, served bool, _ error) {
	mps := &clusterv1.MachinePoolList{}
	err := cl.client.List(ctx, mps, append([]client.ListOption{client.InNamespace(ns)}, opts...)...)
	switch {
	case apimeta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, false, call{verb: "list", gr: MachinePool.GroupResource(), kind: "MachinePool", namespace: ns, purpose: purpose}.explain(err)
	}
	return mps.Items, true, nil
}

// extract returns the items of a list as objects.
func extract(list client.ObjectList) ([]client.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// rolloutAfter is the object's spec.rollout.after, zero when unset.
func rolloutAfter(obj client.Object) time.Time { return kindOf(obj).rolloutAfter(obj) }
