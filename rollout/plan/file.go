package plan

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// PlanFieldManager is the field manager of plan -f's server-side apply dry
// runs (nothing is stored under it).
const PlanFieldManager = "rollout-plan"

// readManifests reads the objects of -f: files, directories (-R: and their
// subdirectories), URLs, or - for stdin, with YAML or JSON documents and
// lists, through cli-runtime's resource builder as kubectl reads them.
func (o *PlanOptions) readManifests() ([]*unstructured.Unstructured, error) {
	r := resource.NewLocalBuilder().
		Unstructured().
		FilenameParam(false, &resource.FilenameOptions{Filenames: o.Filenames, Recursive: o.Recursive}).
		Flatten().
		Do()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("reading -f %v: %w", o.Filenames, err)
	}
	infos, err := r.Infos()
	if err != nil {
		return nil, fmt.Errorf("reading -f %v: %w", o.Filenames, err)
	}
	var out []*unstructured.Unstructured
	for _, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("reading %s: %T is not an object", info.Source, info.Object)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-f %v holds no objects", o.Filenames)
	}
	return out, nil
}

// planFiles plans every MachineDeployment, KubeadmControlPlane and Cluster
// of the manifests, each as server-side apply would change it, against the
// live cluster; other objects are skipped with a warning.
func (o *PlanOptions) planFiles(ctx context.Context, cl *core.Clients) ([]v1alpha1.ObjectPlan, error) {
	objs, err := o.readManifests()
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.ObjectPlan
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if u.GetNamespace() == "" {
			u.SetNamespace(cl.Namespace)
		}
		if gvk.GroupKind() == clusterClassKind.GroupKind() {
			ops, cps, err := o.planClassManifest(ctx, cl, u)
			if err != nil {
				return nil, err
			}
			out, o.clusters = append(out, ops...), append(o.clusters, cps...)
			continue
		}
		kind, ok := planKindOf(gvk)
		if !ok {
			o.c.Warnf("skipping %s %s: rollout plan previews ClusterClasses, Clusters, MachineDeployments and KubeadmControlPlanes", gvk.Kind, u.GetName())
			continue
		}
		ops, err := o.planManifest(ctx, cl, kind, u)
		if err != nil {
			return nil, err
		}
		out = append(out, ops...)
	}
	if len(out) == 0 && len(o.clusters) == 0 {
		return nil, fmt.Errorf("-f %v holds no ClusterClass, Cluster, MachineDeployment or KubeadmControlPlane to plan", o.Filenames)
	}
	return out, nil
}

// planKindOf is the CLI kind of a manifest's group and kind, in any served
// version, among the kinds plan -f reads.
func planKindOf(gvk schema.GroupVersionKind) (core.Kind, bool) {
	for _, k := range core.Kinds {
		if k.GVK.GroupKind() == gvk.GroupKind() && k.FromV1beta1 != nil {
			return k, true
		}
	}
	return core.Kind{}, false
}

// planManifest plans one object of -f: a server-side apply dry run of it
// as written (forcing ownership of its fields, as GitOps controllers do),
// compared with the live object. A Cluster whose topology changes beyond
// its version is followed by what the topology controller would write.
func (o *PlanOptions) planManifest(ctx context.Context, cl *core.Clients, kind core.Kind, u *unstructured.Unstructured) ([]v1alpha1.ObjectPlan, error) {
	op, live, planned, err := o.planManifestObject(ctx, cl, kind, u)
	if err != nil {
		return nil, err
	}
	liveCluster, ok := live.(*clusterv1.Cluster)
	if !ok || !op.Verdict.Admitted || !topologyChangedBeyondVersion(liveCluster, planned.(*clusterv1.Cluster)) {
		return []v1alpha1.ObjectPlan{op}, nil
	}
	edited := planned.(*clusterv1.Cluster).DeepCopy()
	// The topology controller takes the version in its own steps (the
	// Cluster's plan above shows them); its other changes are computed at
	// the live version.
	edited.Spec.Topology.Version = liveCluster.Spec.Topology.Version
	objs, cp, err := o.planClusterTopology(ctx, cl, edited)
	if err != nil {
		return nil, err
	}
	o.clusters = append(o.clusters, cp)
	return append([]v1alpha1.ObjectPlan{op}, objs...), nil
}

// topologyChangedBeyondVersion says whether a Cluster's topology changes in
// more than its version: its class, variables, control plane or workers.
func topologyChangedBeyondVersion(live, planned *clusterv1.Cluster) bool {
	if live == nil || planned == nil || !live.Spec.Topology.IsDefined() || !planned.Spec.Topology.IsDefined() {
		return false
	}
	a, b := live.Spec.Topology.DeepCopy(), planned.Spec.Topology.DeepCopy()
	a.Version, b.Version = "", ""
	return !equality.Semantic.DeepEqual(a, b)
}

// planManifestObject plans the object of a manifest itself, and returns it
// as stored and as it would be.
func (o *PlanOptions) planManifestObject(ctx context.Context, cl *core.Clients, kind core.Kind, u *unstructured.Unstructured) (v1alpha1.ObjectPlan, client.Object, client.Object, error) {
	id := kind.GVK.Kind + " " + u.GetNamespace() + "/" + u.GetName()
	purpose := "plan the manifest of " + id
	applied := u.DeepCopy()
	// What the API server sets, or refuses in an apply.
	for _, f := range [][]string{{"metadata", "resourceVersion"}, {"metadata", "uid"}, {"metadata", "managedFields"}, {"metadata", "creationTimestamp"}, {"metadata", "generation"}, {"status"}} {
		unstructured.RemoveNestedField(applied.Object, f...)
	}
	live := kind.New()
	err := cl.Client.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, live)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return v1alpha1.ObjectPlan{}, nil, nil, core.Call{Verb: "get", GR: kind.GroupResource(), Kind: kind.GVK.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), Purpose: purpose}.Explain(err)
	}
	warnings, err := o.c.CollectWarnings(func() error {
		return cl.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.DryRunAll, client.ForceOwnership, client.FieldOwner(PlanFieldManager))
	})
	verdict, err := verdictOf(core.Call{Verb: "patch", GR: kind.GroupResource(), Kind: kind.GVK.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), Purpose: purpose}.Explain(err), warnings)
	if err != nil {
		return v1alpha1.ObjectPlan{}, nil, nil, err
	}
	if !exists {
		op := v1alpha1.ObjectPlan{Object: v1alpha1.PlanObjectRef{Kind: kind.GVK.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}, Effect: v1alpha1.EffectCreate,
			Summary: "created: its machines are new, none is replaced", Verdict: verdict,
			Changes: []v1alpha1.PlanFieldChange{}, Steps: []v1alpha1.PlanStep{}, Machines: []v1alpha1.PlanMachine{}, Holds: []v1alpha1.PlanHold{}, Duration: v1alpha1.PlanDuration{Basis: "no machine is replaced"}}
		return op, nil, nil, nil
	}
	// The object as it would be: the dry run's answer (decoded into
	// applied), or when refused the manifest itself.
	planned, err := typedOf(kind, applied)
	if err != nil {
		return v1alpha1.ObjectPlan{}, nil, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	var op v1alpha1.ObjectPlan
	if cluster, ok := live.(*clusterv1.Cluster); ok {
		op, err = o.c.topologyPlan(ctx, cl, cluster, planned.(*clusterv1.Cluster))
	} else {
		op, err = o.c.objectPlan(ctx, cl, live, planned, rolloutAfterChange(live, planned))
	}
	if err != nil {
		return v1alpha1.ObjectPlan{}, nil, nil, err
	}
	op.Verdict = verdict
	return op, live, planned, nil
}

// rolloutAfterChange is the planned spec.rollout.after when the change
// moves it forward, zero otherwise.
func rolloutAfterChange(live, planned client.Object) time.Time {
	a, b := core.RolloutAfter(live), core.RolloutAfter(planned)
	if b.After(a) {
		return b
	}
	return time.Time{}
}

// typedOf converts a manifest (or the dry run's answer to it) into the
// kind's v1beta2 type, the version the CLI works in.
func typedOf(kind core.Kind, u *unstructured.Unstructured) (client.Object, error) {
	gv := u.GroupVersionKind().GroupVersion()
	out := kind.New()
	if gv == kind.GVK.GroupVersion() {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", kind.GVK.Kind, u.GetName(), err)
		}
		return out, nil
	}
	if gv.Version != "v1beta1" {
		return nil, fmt.Errorf("%s %s is %s: rollout plan -f reads v1beta2 and v1beta1 manifests", kind.GVK.Kind, u.GetName(), gv)
	}
	// v1beta1, still served: Cluster API's generated conversion to v1beta2.
	if kind.FromV1beta1 == nil {
		return nil, fmt.Errorf("%s %s is %s: rollout plan -f reads %s in v1beta2 only", kind.GVK.Kind, u.GetName(), gv, kind.Resource)
	}
	if err := kind.FromV1beta1(u, out); err != nil {
		return nil, fmt.Errorf("converting %s %s from %s to %s: %w", kind.GVK.Kind, u.GetName(), gv, kind.GVK.GroupVersion(), err)
	}
	return out, nil
}
