package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/plan/dryrun"
)

// clusterClassKind is the ClusterClass's v1beta2 kind.
var clusterClassKind = clusterv1.GroupVersion.WithKind("ClusterClass")

// topologyRun is the dry run of Cluster API's topology reconciler, made once
// per command.
func (o *PlanOptions) topologyRun(ctx context.Context, cl *core.Clients) (*dryrun.Runner, error) {
	if o.runner != nil {
		return o.runner, nil
	}
	if cl.Config == nil {
		return nil, fmt.Errorf("cannot preview what the topology controller would do: no connection configuration to run Cluster API's topology reconciler with")
	}
	r, err := dryrun.NewRunner(ctx, cl.Config, cl.Mapper)
	if err != nil {
		return nil, fmt.Errorf("cannot preview what the topology controller would do: %w", err)
	}
	o.runner = r
	return r, nil
}

// planClassManifest plans the edit of a ClusterClass of -f: the class sent
// as a server-side apply dry run (Cluster API's ClusterClass webhook judges
// it, with the clusters that use it), then for each of its clusters (in its
// namespace, or all with -A; -l selects) what the topology controller
// would write.
func (o *PlanOptions) planClassManifest(ctx context.Context, cl *core.Clients, u *unstructured.Unstructured) ([]v1alpha1.ObjectPlan, []v1alpha1.ClusterPlan, error) {
	ref := v1alpha1.PlanObjectRef{Kind: "ClusterClass", Namespace: u.GetNamespace(), Name: u.GetName()}
	purpose := "plan the manifest of ClusterClass " + u.GetNamespace() + "/" + u.GetName()
	call := core.Call{Verb: "patch", GR: clusterv1.GroupVersion.WithResource("clusterclasses").GroupResource(), Kind: "ClusterClass", Namespace: u.GetNamespace(), Name: u.GetName(), Purpose: purpose}
	live := &clusterv1.ClusterClass{}
	if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
		if apierrors.IsNotFound(err) {
			op := emptyObjectPlan(ref)
			op.Effect, op.Summary, op.Verdict = v1alpha1.EffectCreate, "created: no cluster uses it yet, none is changed", v1alpha1.PlanVerdict{Admitted: true}
			return []v1alpha1.ObjectPlan{op}, nil, nil
		}
		return nil, nil, core.Call{Verb: "get", GR: call.GR, Kind: "ClusterClass", Namespace: u.GetNamespace(), Name: u.GetName(), Purpose: purpose}.Explain(err)
	}
	answer, verdict, err := o.applyDryRun(ctx, cl, u, call)
	if err != nil {
		return nil, nil, err
	}
	if !verdict.Admitted {
		op := emptyObjectPlan(ref)
		op.Effect, op.Summary, op.Verdict = v1alpha1.EffectNone, "the edit of the ClusterClass itself would be refused", verdict
		return []v1alpha1.ObjectPlan{op}, nil, nil
	}
	class := &clusterv1.ClusterClass{}
	if err := convertTo(answer, class); err != nil {
		return nil, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	objs, cps, err := o.planClass(ctx, cl, live, class, purpose)
	return objs, cps, err
}

// planClass plans the change of the ClusterClass live to class (as it would
// be stored): Cluster API's ClusterClass reconciler computes its status,
// then for each of its clusters (in its namespace, or all with -A; -l
// selects) what the topology controller would write.
func (o *PlanOptions) planClass(ctx context.Context, cl *core.Clients, live, class *clusterv1.ClusterClass, purpose string) ([]v1alpha1.ObjectPlan, []v1alpha1.ClusterPlan, error) {
	class = class.DeepCopy()
	class.Status = live.Status
	runner, err := o.topologyRun(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	if err := runner.Edit(class); err != nil {
		return nil, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if _, err := runner.ReconcileClass(ctx, client.ObjectKeyFromObject(class)); err != nil {
		return nil, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	clusters, err := o.clustersOfClass(ctx, cl, class, purpose)
	if err != nil {
		return nil, nil, err
	}
	var objs []v1alpha1.ObjectPlan
	var cps []v1alpha1.ClusterPlan
	through := v1alpha1.PlanObjectRef{Kind: "ClusterClass", Namespace: class.Namespace, Name: class.Name}
	for i := range clusters {
		ops, cp, err := o.planTopologyWrites(ctx, cl, runner, &clusters[i], &through)
		if err != nil {
			return nil, nil, err
		}
		objs, cps = append(objs, ops...), append(cps, cp)
	}
	return objs, cps, nil
}

// PreviewClusterChange prints what changing a ClusterClass cluster to
// changed (its topology as it would be stored) does to its objects, as
// rollout plan computes a change the topology controller carries out, and
// returns an error with exit code ExitRefused when the topology
// controller's change would be refused, one of exit 1 when it could not be
// computed: the way undo of a Cluster's topology previews its rollback.
func PreviewClusterChange(ctx context.Context, c *core.Session, cl *core.Clients, changed *clusterv1.Cluster) error {
	o := &PlanOptions{c: planSession{Session: c}}
	_, cp, err := o.planClusterTopology(ctx, cl, changed.DeepCopy())
	if err != nil {
		return err
	}
	cps := []v1alpha1.ClusterPlan{cp}
	if err := writeClusters(c.IOStreams.ErrOut, cps); err != nil {
		return err
	}
	p := newRolloutPlan("", nil)
	p.Clusters, p.Fleet = cps, fleetTotals(cps)
	return planVerdictError(p, false)
}

// PreviewClassChange prints what changing the ClusterClass live to changed
// (as it would be stored) rolls: per Cluster of the class, the objects the
// topology controller would change and their machines, computed as plan -f
// computes it, and the fleet's totals. It returns an error with exit code
// ExitRefused when a cluster's change would be refused, and one of exit 1
// when a cluster's could not be computed: the way undo of a ClusterClass
// previews its rollback before sending it.
func PreviewClassChange(ctx context.Context, c *core.Session, cl *core.Clients, live, changed *clusterv1.ClusterClass) error {
	o := &PlanOptions{c: planSession{Session: c}}
	objs, cps, err := o.planClass(ctx, cl, live, changed, "preview the change of ClusterClass "+live.Namespace+"/"+live.Name)
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		c.Notef("no Cluster in namespace %s uses ClusterClass %s: the change rolls no machine", live.Namespace, live.Name)
		return nil
	}
	p := newRolloutPlan("", objs)
	p.Clusters, p.Fleet = cps, fleetTotals(cps)
	if err := writeClusters(c.IOStreams.ErrOut, cps); err != nil {
		return err
	}
	fmt.Fprintln(c.IOStreams.ErrOut, fleetText(p.Fleet))
	return planVerdictError(p, false)
}

// clustersOfClass lists the Clusters whose spec.topology.classRef names
// class: in the class's namespace, or in every namespace with -A; -l
// selects among them.
func (o *PlanOptions) clustersOfClass(ctx context.Context, cl *core.Clients, class *clusterv1.ClusterClass, purpose string) ([]clusterv1.Cluster, error) {
	opts := []client.ListOption{}
	ns := class.Namespace
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(ns))
	}
	if o.Selector != "" {
		sel, err := labels.Parse(o.Selector)
		if err != nil {
			return nil, fmt.Errorf("-l %q: %w", o.Selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	list := &clusterv1.ClusterList{}
	if err := cl.Client.List(ctx, list, opts...); err != nil {
		call := core.Call{Verb: "list", GR: clusterv1.GroupVersion.WithResource("clusters").GroupResource(), Kind: "Cluster", Purpose: purpose}
		if !o.AllNamespaces {
			call.Namespace = ns
		}
		return nil, call.Explain(err)
	}
	var out []clusterv1.Cluster
	for _, c := range list.Items {
		if c.Spec.Topology.IsDefined() && c.GetClassKey() == client.ObjectKeyFromObject(class) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b clusterv1.Cluster) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// planClusterTopology plans an edit of a Cluster's topology other than its
// version alone (its class, variables, worker pools): the edited Cluster
// (the dry run's answer) is what the topology reconciler reads.
func (o *PlanOptions) planClusterTopology(ctx context.Context, cl *core.Clients, edited *clusterv1.Cluster) ([]v1alpha1.ObjectPlan, v1alpha1.ClusterPlan, error) {
	runner, err := o.topologyRun(ctx, cl)
	if err != nil {
		return nil, v1alpha1.ClusterPlan{}, err
	}
	through := refOf(edited)
	return o.planTopologyWrites(ctx, cl, runner, edited, &through, edited)
}

// planTopologyWrites runs Cluster API's topology reconciler on cluster,
// reading edits (the Cluster as it would be after the change, if any) in
// place of the stored objects, and plans each object it would write.
func (o *PlanOptions) planTopologyWrites(ctx context.Context, cl *core.Clients, runner *dryrun.Runner, cluster *clusterv1.Cluster, through *v1alpha1.PlanObjectRef, edits ...client.Object) ([]v1alpha1.ObjectPlan, v1alpha1.ClusterPlan, error) {
	id := "Cluster " + cluster.Namespace + "/" + cluster.Name
	key := cluster.GetClassKey()
	cp := v1alpha1.ClusterPlan{Cluster: refOf(cluster), Class: key.Namespace + "/" + key.Name, Objects: []string{}, TemplatesRotated: []string{}}
	// A paused Cluster is planned as if resumed (the topology controller
	// does nothing while it is paused); the hold says so.
	paused := ptrTrue(cluster.Spec.Paused) || hasPausedAnnotation(cluster)
	if paused && len(edits) == 0 {
		edits = append(edits, cluster.DeepCopy())
	}
	for _, e := range edits {
		if c, ok := e.(*clusterv1.Cluster); ok && paused {
			c.Spec.Paused = nil
			delete(c.Annotations, clusterv1.PausedAnnotation)
		}
		if err := runner.Edit(e); err != nil {
			return nil, cp, fmt.Errorf("cannot plan %s: %w", id, err)
		}
	}
	writes, rerr := runner.ReconcileCluster(ctx, client.ObjectKeyFromObject(cluster))

	var objs []v1alpha1.ObjectPlan
	for _, w := range writes {
		if w.Status || w.Edited {
			continue
		}
		if isTemplateKind(w.GVK.Kind) {
			if (w.Verb == "create" || w.Verb == "apply") && w.Err == nil {
				cp.TemplatesRotated = append(cp.TemplatesRotated, w.GVK.Kind+" "+w.Name+" (new, from "+templateOrigin(w.Object)+")")
			}
			continue
		}
		kind, ok := planKindOf(w.GVK)
		if !ok || kind.GVK == core.Cluster.GVK {
			continue
		}
		op, err := o.planWrite(ctx, cl, kind, w)
		if err != nil {
			return nil, cp, err
		}
		op.EditedThrough = through
		// The change is the topology controller's own: the hold that it
		// reverts a direct edit does not apply.
		op.Holds = slices.DeleteFunc(op.Holds, func(h v1alpha1.PlanHold) bool {
			return h.Kind == v1alpha1.HoldTopology && h.Check == clusterv1.ClusterTopologyOwnedLabel
		})
		if paused {
			op.Holds = append(op.Holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldPaused, Object: "cluster/" + cluster.Name, Message: id + " is paused: the topology controller makes these changes once it is resumed"})
		}
		if !slices.Contains(cp.Objects, op.Object.String()) {
			cp.Objects = append(cp.Objects, op.Object.String())
		}
		cp.Counts.Replace += op.Counts.Replace
		cp.Counts.InPlace += op.Counts.InPlace
		cp.Counts.Untouched += op.Counts.Untouched
		cp.Counts.Delete += op.Counts.Delete
		if kind.GVK.Kind == "KubeadmControlPlane" || kind.Contract {
			cp.ControlPlaneReplace += op.Counts.Replace
		} else {
			cp.WorkerReplace += op.Counts.Replace
		}
		objs = append(objs, op)
	}
	switch {
	case rerr != nil && refusedWrite(writes) != nil:
		cp.Result = v1alpha1.PlanClusterRefused
		w := refusedWrite(writes)
		cp.Reason = fmt.Sprintf("the topology controller's %s of %s %s: %s", w.Verb, w.GVK.Kind, w.Name, core.APIStatusOf(w.Err))
	case rerr != nil:
		cp.Result = v1alpha1.PlanClusterNotComputed
		cp.Reason = notComputedReason(rerr)
	case len(objs) == 0 || cp.Counts.Replace+cp.Counts.InPlace+cp.Counts.Delete == 0 && !anyChange(objs):
		cp.Result = v1alpha1.PlanClusterUnchanged
	default:
		cp.Result = v1alpha1.PlanClusterChanged
	}
	return objs, cp, nil
}

// planWrite plans one write of the topology controller to a control plane
// or worker pool: the object as the API server answered the dry run,
// against the stored one, through the same machinery as a direct edit.
func (o *PlanOptions) planWrite(ctx context.Context, cl *core.Clients, kind core.Kind, w dryrun.Write) (v1alpha1.ObjectPlan, error) {
	id := kind.GVK.Kind + " " + w.Namespace + "/" + w.Name
	purpose := "plan what the topology controller would write to " + id
	ref := v1alpha1.PlanObjectRef{Kind: kind.GVK.Kind, Namespace: w.Namespace, Name: w.Name}
	verdict, err := verdictOf(w.Err, nil)
	if err != nil {
		return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	live := kind.New()
	getErr := cl.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, live)
	switch {
	case apierrors.IsNotFound(getErr) && w.Verb != "delete":
		op := emptyObjectPlan(ref)
		op.Effect, op.Summary, op.Verdict = v1alpha1.EffectCreate, "created by the topology controller: its machines are new, none is replaced", verdict
		return op, nil
	case getErr != nil:
		return v1alpha1.ObjectPlan{}, core.Call{Verb: "get", GR: kind.GroupResource(), Kind: kind.GVK.Kind, Namespace: w.Namespace, Name: w.Name, Purpose: purpose}.Explain(getErr)
	}
	if w.Verb == "delete" {
		return o.c.deletePlan(ctx, cl, live, verdict, purpose)
	}
	planned := live
	if w.Err == nil {
		if planned, err = typedOf(kind, w.Object); err != nil {
			return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: %w", purpose, err)
		}
	}
	op, err := o.c.objectPlan(ctx, cl, live, planned, rolloutAfterChange(live, planned))
	if err != nil {
		return op, err
	}
	op.Verdict = verdict
	if !verdict.Admitted {
		op.Summary = "the topology controller's change of it would be refused: it stops there and changes nothing"
	}
	return op, nil
}

// deletePlan is the plan of a worker pool the topology controller would
// delete: every machine of it goes.
func (c planSession) deletePlan(ctx context.Context, cl *core.Clients, live client.Object, verdict v1alpha1.PlanVerdict, purpose string) (v1alpha1.ObjectPlan, error) {
	op := emptyObjectPlan(refOf(live))
	op.Effect, op.Verdict = v1alpha1.EffectDelete, verdict
	machines, err := c.listPlanMachines(ctx, cl, live, purpose)
	if err != nil {
		return op, err
	}
	for _, m := range machines {
		op.Machines = append(op.Machines, v1alpha1.PlanMachine{Name: m.Name, Object: objectName(live), Version: m.Spec.Version, Action: v1alpha1.ActionDelete, Reason: "its worker pool is removed from the Cluster's topology"})
	}
	op.Counts.Delete = len(op.Machines)
	op.Summary = fmt.Sprintf("deleted by the topology controller with its %d %s", len(op.Machines), core.Plural(len(op.Machines), "machine", "machines"))
	return op, nil
}

// applyDryRun sends u as a server-side apply dry run (forcing ownership of
// its fields, as GitOps controllers do) and returns the API server's
// answer, or the verdict of its refusal.
func (o *PlanOptions) applyDryRun(ctx context.Context, cl *core.Clients, u *unstructured.Unstructured, call core.Call) (*unstructured.Unstructured, v1alpha1.PlanVerdict, error) {
	applied := u.DeepCopy()
	for _, f := range [][]string{{"metadata", "resourceVersion"}, {"metadata", "uid"}, {"metadata", "managedFields"}, {"metadata", "creationTimestamp"}, {"metadata", "generation"}, {"status"}} {
		unstructured.RemoveNestedField(applied.Object, f...)
	}
	warnings, err := o.c.CollectWarnings(func() error {
		return cl.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.DryRunAll, client.ForceOwnership, client.FieldOwner(PlanFieldManager))
	})
	verdict, err := verdictOf(call.Explain(err), warnings)
	return applied, verdict, err
}

// convertTo decodes a ClusterClass or Cluster of v1beta2 or v1beta1 (through
// Cluster API's own conversion) into out, of v1beta2.
func convertTo(u *unstructured.Unstructured, out client.Object) error {
	gv := u.GroupVersionKind().GroupVersion()
	switch gv.Version {
	case clusterv1.GroupVersion.Version:
		return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
	case clusterv1beta1.GroupVersion.Version:
		switch hub := out.(type) {
		case *clusterv1.ClusterClass:
			src := &clusterv1beta1.ClusterClass{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, src); err != nil {
				return err
			}
			return clusterv1beta1.Convert_v1beta1_ClusterClass_To_v1beta2_ClusterClass(src, hub, nil)
		case *clusterv1.Cluster:
			return core.Cluster.FromV1beta1(u, hub)
		}
	}
	return fmt.Errorf("%s %s is %s: rollout plan -f reads v1beta2 and v1beta1", u.GetKind(), u.GetName(), gv)
}

// refusedWrite is the first write the API server refused (an admission
// webhook or its validation; not a delete of what is gone, which the
// topology controller ignores), nil if none.
func refusedWrite(writes []dryrun.Write) *dryrun.Write {
	for i := range writes {
		if writes[i].Err == nil {
			continue
		}
		if v, err := verdictOf(writes[i].Err, nil); err == nil && !v.Admitted {
			return &writes[i]
		}
	}
	return nil
}

// notComputedReason is why what the topology controller would do could not
// be computed, in Cluster API's words, with the way out when it is the
// preview's own limit.
func notComputedReason(err error) string {
	msg := err.Error()
	if errors.Is(err, dryrun.ErrNoWorkloadCluster) {
		return msg + " (its MachinePools have nodes, and whether they are upgrading is read from the workload cluster)"
	}
	if strings.Contains(msg, "RuntimeSDK") || strings.Contains(msg, "RuntimeClient") || strings.Contains(msg, "external") {
		return msg + " (the preview does not call Runtime Extensions: a class with external patches or an upgrade-plan extension is computed by the topology controller only)"
	}
	return msg
}

// anyChange says whether any object changes a field.
func anyChange(objs []v1alpha1.ObjectPlan) bool {
	for _, op := range objs {
		if len(op.Changes) > 0 || op.Effect == v1alpha1.EffectCreate || op.Effect == v1alpha1.EffectDelete {
			return true
		}
	}
	return false
}

// isTemplateKind says whether a kind is a template the topology controller
// clones from its ClusterClass.
func isTemplateKind(kind string) bool { return strings.HasSuffix(kind, "Template") }

// templateOrigin is the template a rotated one is cloned from, as the
// topology controller notes it.
func templateOrigin(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	if name := u.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]; name != "" {
		return "class template " + name
	}
	return "its ClusterClass"
}

// emptyObjectPlan is the plan of ref with empty lists.
func emptyObjectPlan(ref v1alpha1.PlanObjectRef) v1alpha1.ObjectPlan {
	return v1alpha1.ObjectPlan{Object: ref, Changes: []v1alpha1.PlanFieldChange{}, Steps: []v1alpha1.PlanStep{}, Machines: []v1alpha1.PlanMachine{}, Holds: []v1alpha1.PlanHold{}, Duration: v1alpha1.PlanDuration{Basis: "no machine is replaced"}}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func hasPausedAnnotation(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// clusterEditPatch is the merge patch of --class and --set-variable on
// cluster: spec.topology.classRef and the variables with the new values
// (the list whole, as a merge patch replaces lists).
func clusterEditPatch(cluster *clusterv1.Cluster, class string, vars map[string]json.RawMessage) ([]byte, error) {
	topology := map[string]any{}
	if class != "" {
		ns, name, ok := strings.Cut(class, "/")
		ref := map[string]any{"name": class}
		if ok {
			ref = map[string]any{"namespace": ns, "name": name}
		}
		topology["classRef"] = ref
	}
	if len(vars) > 0 {
		var list []map[string]any
		seen := map[string]bool{}
		for _, v := range cluster.Spec.Topology.Variables {
			value := json.RawMessage(v.Value.Raw)
			if nv, ok := vars[v.Name]; ok {
				value, seen[v.Name] = nv, true
			}
			list = append(list, map[string]any{"name": v.Name, "value": value})
		}
		for _, name := range sortedKeys(vars) {
			if !seen[name] {
				list = append(list, map[string]any{"name": name, "value": vars[name]})
			}
		}
		topology["variables"] = list
	}
	return core.PatchOf(cluster.ResourceVersion, nil, map[string]any{"topology": topology})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// planClusterEdit plans cluster/NAME --class and --set-variable: the
// Cluster's edit sent as a dry run (Cluster API's Cluster webhook judges a
// rebase and the variables), then what the topology controller would
// write.
func (o *PlanOptions) planClusterEdit(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster) ([]v1alpha1.ObjectPlan, []v1alpha1.ClusterPlan, error) {
	id := "Cluster " + cluster.Namespace + "/" + cluster.Name
	purpose := "plan the change of " + id
	if !cluster.Spec.Topology.IsDefined() {
		return nil, nil, fmt.Errorf("cannot %s: --class and --set-variable change a ClusterClass cluster's spec.topology, and %s has no topology", purpose, id)
	}
	patch, err := clusterEditPatch(cluster, o.Class, o.variables)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	verdict, answer, err := o.c.dryRun(ctx, cl, cluster, types.MergePatchType, patch, purpose)
	if err != nil {
		return nil, nil, err
	}
	op := emptyObjectPlan(refOf(cluster))
	op.Verdict = verdict
	op.Effect = v1alpha1.EffectNone
	op.Summary = clusterEditSummary(o.Class, o.variables)
	if !verdict.Admitted {
		return []v1alpha1.ObjectPlan{op}, nil, nil
	}
	edited := answer.(*clusterv1.Cluster)
	objs, cp, err := o.planClusterTopology(ctx, cl, edited)
	if err != nil {
		return nil, nil, err
	}
	return append([]v1alpha1.ObjectPlan{op}, objs...), []v1alpha1.ClusterPlan{cp}, nil
}

// clusterEditSummary is the Cluster's change on one line.
func clusterEditSummary(class string, vars map[string]json.RawMessage) string {
	var parts []string
	if class != "" {
		parts = append(parts, "spec.topology.classRef → "+class)
	}
	for _, name := range sortedKeys(vars) {
		parts = append(parts, "variable "+name+" → "+string(vars[name]))
	}
	return strings.Join(parts, "; ") + "; carried out by the topology controller"
}

// fleetTotals sums the clusters of a plan.
func fleetTotals(cps []v1alpha1.ClusterPlan) *v1alpha1.FleetTotals {
	if len(cps) == 0 {
		return nil
	}
	t := &v1alpha1.FleetTotals{Clusters: len(cps)}
	for _, cp := range cps {
		switch cp.Result {
		case v1alpha1.PlanClusterChanged:
			t.Changed++
		case v1alpha1.PlanClusterUnchanged:
			t.Unchanged++
		case v1alpha1.PlanClusterRefused:
			t.Refused++
		case v1alpha1.PlanClusterNotComputed:
			t.NotComputed++
		}
		t.ControlPlaneReplace += cp.ControlPlaneReplace
		t.WorkerReplace += cp.WorkerReplace
	}
	return t
}
