package core

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

// Get reads one object.
func (c *Session) Get(ctx context.Context, cl *Clients, ref Ref, purpose string) (client.Object, error) {
	kind, err := resolveContract(cl.Mapper, ref.Kind)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	ref.Kind = kind
	obj := ref.Kind.New()
	err = cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: ref.Name}, obj)
	if err != nil {
		return nil, Call{Verb: "get", GR: ref.Kind.GroupResource(), Kind: ref.Kind.GVK.Kind, Namespace: cl.Namespace, Name: ref.Name, Purpose: purpose}.Explain(err)
	}
	return obj, nil
}

// Reread reads obj again into a new object of its kind.
func (c *Session) Reread(ctx context.Context, cl *Clients, obj client.Object, purpose string) (client.Object, error) {
	kind := KindOf(obj)
	fresh := kind.New()
	if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return nil, Call{Verb: "get", GR: kind.GroupResource(), Kind: kind.GVK.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Purpose: purpose}.Explain(err)
	}
	return fresh, nil
}

// Resolve reads the objects a command names, or lists those its selector
// matches (in every namespace with allNamespaces), sorted by namespace and name.
func (c *Session) Resolve(ctx context.Context, cl *Clients, t Targets, selector string, allNamespaces bool, verb string) ([]client.Object, error) {
	if t.Kind == nil {
		objs := make([]client.Object, 0, len(t.Refs))
		for _, r := range t.Refs {
			obj, err := c.Get(ctx, cl, r, verb+" "+r.String())
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
	kind, err := resolveContract(cl.Mapper, *t.Kind)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: %w", verb, err)
	}
	t.Kind = &kind
	list := t.Kind.NewList()
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	ns := ""
	if !allNamespaces {
		ns = cl.Namespace
		opts = append(opts, client.InNamespace(ns))
	}
	if err := cl.Client.List(ctx, list, opts...); err != nil {
		return nil, Call{Verb: "list", GR: t.Kind.GroupResource(), Kind: t.Kind.GVK.Kind, Namespace: ns, Purpose: verb + " " + t.Kind.Resource}.Explain(err)
	}
	objs, err := Extract(list)
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

// ForEach runs do on every object; with one object its error is returned as
// is, with several each error is printed and a summary returned.
func (c *Session) ForEach(verb string, objs []client.Object, selector string, do func(client.Object) error) error {
	if len(objs) == 0 {
		c.Notef("No resources found matching -l %s.", selector)
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

// PausedBy says how obj is paused: "spec.paused is true", "annotation
// cluster.x-k8s.io/paused", or "" when it is not.
func PausedBy(obj client.Object) string { return KindOf(obj).PausedBy(obj) }

// PausedError refuses to act on a paused object, saying how to resume it.
func (c *Session) PausedError(verb string, obj client.Object, how string) error {
	kind := KindOf(obj)
	return fmt.Errorf("cannot %s %s: it is paused (%s), so Cluster API would not roll it out; resume it first with: %s resume %s/%s -n %s",
		verb, Describe(obj, kind), how, c.Name(), kind.Singular(), obj.GetName(), obj.GetNamespace())
}

// ClusterNameOf finds the Cluster an object belongs to: its cluster-name
// label, a worker pool's spec.clusterName, or its owning Cluster.
func ClusterNameOf(obj client.Object) string { return KindOf(obj).clusterName(obj) }

// clusterMembers are the objects of a Cluster the CLI works on.
type clusterMembers struct {
	// ControlPlane is its KubeadmControlPlane, nil when it has none.
	ControlPlane *controlplanev1.KubeadmControlPlane
	// Other is its control plane when it is not a KubeadmControlPlane.
	Other *clusterv1.ContractVersionedObjectReference
	// MachineDeployments are its MachineDeployments, by name.
	MachineDeployments []*clusterv1.MachineDeployment
	// machinePools are its MachinePools, by name; read only for what
	// shows them (ClusterPools).
	machinePools []*clusterv1.MachinePool
}

// Objects are the control plane (if a KubeadmControlPlane), then the
// MachineDeployments: what a restart of the cluster restarts (a
// MachinePool has no spec.rollout.after).
func (m clusterMembers) Objects() []client.Object {
	var objs []client.Object
	if m.ControlPlane != nil {
		objs = append(objs, m.ControlPlane)
	}
	for _, md := range m.MachineDeployments {
		objs = append(objs, md)
	}
	return objs
}

// WithPools are objects, then the MachinePools: every object of the
// cluster whose rollout the CLI follows and whose history the guard
// records.
func (m clusterMembers) WithPools() []client.Object {
	objs := m.Objects()
	for _, mp := range m.machinePools {
		objs = append(objs, mp)
	}
	return objs
}

// ClusterMembers reads a Cluster's control plane (spec.controlPlaneRef) and
// its MachineDeployments (spec.clusterName).
func (c *Session) ClusterMembers(ctx context.Context, cl *Clients, cluster *clusterv1.Cluster, purpose string) (clusterMembers, error) {
	ns := cluster.Namespace
	var m clusterMembers
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() {
		if ref.Kind != KubeadmControlPlane.GVK.Kind || ref.APIGroup != KubeadmControlPlane.GVK.Group {
			m.Other = &ref
		} else {
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, kcp); err != nil {
				return m, Call{Verb: "get", GR: KubeadmControlPlane.GroupResource(), Kind: "KubeadmControlPlane", Namespace: ns, Name: ref.Name, Purpose: purpose}.Explain(err)
			}
			m.ControlPlane = kcp
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := cl.Client.List(ctx, mds, client.InNamespace(ns)); err != nil {
		return m, Call{Verb: "list", GR: MachineDeployment.GroupResource(), Kind: "MachineDeployment", Namespace: ns, Purpose: purpose}.Explain(err)
	}
	sort.Slice(mds.Items, func(i, j int) bool { return mds.Items[i].Name < mds.Items[j].Name })
	for i := range mds.Items {
		if mds.Items[i].Spec.ClusterName == cluster.Name {
			m.MachineDeployments = append(m.MachineDeployments, &mds.Items[i])
		}
	}
	return m, nil
}

// ClusterPools reads a Cluster's control plane and MachineDeployments
// (clusterMembers) and its MachinePools (spec.clusterName): what history
// and status show of a cluster. A management cluster that does not serve
// MachinePools has none. Restarts and plans read no MachinePools: a
// MachinePool has no spec.rollout.after, and they need not list them.
func (c *Session) ClusterPools(ctx context.Context, cl *Clients, cluster *clusterv1.Cluster, purpose string) (clusterMembers, error) {
	m, err := c.ClusterMembers(ctx, cl, cluster, purpose)
	if err != nil {
		return m, err
	}
	mps, _, err := ListMachinePools(ctx, cl, cluster.Namespace, purpose)
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

// ListMachinePools lists the MachinePools in namespace ns that opts select.
// served is false, and nothing listed, when the management cluster does not
// serve MachinePools (Cluster API's MachinePool feature may be off, its CRD
// not installed); any other failure is explained for purpose.
func ListMachinePools(ctx context.Context, cl *Clients, ns, purpose string, opts ...client.ListOption) (_ []clusterv1.MachinePool, served bool, _ error) {
	mps := &clusterv1.MachinePoolList{}
	err := cl.Client.List(ctx, mps, append([]client.ListOption{client.InNamespace(ns)}, opts...)...)
	switch {
	case apimeta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, false, Call{Verb: "list", GR: MachinePool.GroupResource(), Kind: "MachinePool", Namespace: ns, Purpose: purpose}.Explain(err)
	}
	return mps.Items, true, nil
}

// Extract returns the items of a list as objects.
func Extract(list client.ObjectList) ([]client.Object, error) {
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

// RolloutAfter is the object's spec.rollout.after, zero when unset.
func RolloutAfter(obj client.Object) time.Time { return KindOf(obj).RolloutAfter(obj) }
