package plan

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// deniedBy finds the admission webhook in the API server's refusal:
// `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied
// the request: ...`.
var deniedBy = regexp.MustCompile(`admission webhook "([^"]+)" denied the request: `)

// ruleIDs finds rollout-guard's rule ids in a refusal: "[rule EtcdDowngrade]".
var ruleIDs = regexp.MustCompile(`\[rule ([A-Za-z]+)\]`)

// VerdictOf turns the answer to a server-side dry run into a verdict. An
// error that is not the API server refusing the change (the guard
// unreachable, a permission denied, a conflict, the API server unreachable)
// is returned as an error: there is no verdict then.
func VerdictOf(err error, warnings []string) (v1alpha1.PlanVerdict, error) {
	v := v1alpha1.PlanVerdict{Admitted: err == nil, Warnings: warnings}
	if err == nil {
		return v, nil
	}
	if core.IsGuardUnavailable(err) || core.IsConflict(err) {
		return v, err
	}
	msg := core.APIStatusOf(err).Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Field != "" {
					v.Causes = append(v.Causes, c.Field+": "+c.Message)
				} else if c.Message != "" {
					v.Causes = append(v.Causes, c.Message)
				}
			}
		}
	}
	if m := deniedBy.FindStringSubmatchIndex(msg); m != nil {
		v.Webhook = msg[m[2]:m[3]]
		v.Message = msg[m[1]:]
		switch {
		case strings.HasSuffix(v.Webhook, ".rollout-guard.io"):
			v.RefusedBy = "rollout-guard"
		case strings.HasSuffix(v.Webhook, ".cluster.x-k8s.io"):
			v.RefusedBy = "Cluster API"
		default:
			v.RefusedBy = "admission webhook " + v.Webhook
		}
		for _, r := range ruleIDs.FindAllStringSubmatch(v.Message, -1) {
			if !core.Contains(v.Rules, r[1]) {
				v.Rules = append(v.Rules, r[1])
			}
		}
		return v, nil
	}
	if status != nil && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
		v.RefusedBy, v.Message = "API server", msg
		return v, nil
	}
	return v, err
}

// dryRun sends one patch of obj as a server-side dry run and returns the
// verdict and the object as the API server would store it (nil when
// refused), with the warnings it returned.
func (c PlanSession) dryRun(ctx context.Context, cl *core.Clients, obj client.Object, pt types.PatchType, data []byte, purpose string) (v1alpha1.PlanVerdict, client.Object, error) {
	answer := obj.DeepCopyObject().(client.Object)
	warnings, err := c.CollectWarnings(func() error {
		return c.Send(ctx, cl, answer, pt, data, core.DryRunServer, purpose)
	})
	v, verr := VerdictOf(err, warnings)
	if verr != nil {
		return v, nil, verr
	}
	if !v.Admitted {
		return v, nil, nil
	}
	return v, answer, nil
}

// planObjectChange plans a change of one MachineDeployment or
// KubeadmControlPlane given by flags: the template switch, an undo or a
// restart.
func (o *PlanOptions) planObjectChange(ctx context.Context, cl *core.Clients, obj client.Object) (v1alpha1.ObjectPlan, error) {
	kind := core.KindOf(obj)
	id := core.Describe(obj, kind)
	purpose := "plan a change of " + id
	var (
		patch   []byte
		err     error
		restart time.Time
		note    string
	)
	switch {
	case o.Restart:
		if core.TopologyOwned(obj) {
			return o.planTopologyRestart(ctx, cl, obj)
		}
		restart = o.now()
		if patch, err = core.PatchOf(obj.GetResourceVersion(), nil, map[string]any{"rollout": map[string]any{"after": metav1.NewTime(restart)}}); err != nil {
			return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: %w", purpose, err)
		}
	case o.undo:
		if core.TopologyOwned(obj) {
			return v1alpha1.ObjectPlan{}, core.TopologyError("plan an undo of", obj, "plan the change of Cluster CLUSTER instead, e.g. rollout plan cluster/CLUSTER --version V")
		}
		set, err := o.Session.LoadHistory(ctx, cl, obj, purpose)
		if err != nil {
			return v1alpha1.ObjectPlan{}, err
		}
		var target revisions.Revision
		var ok bool
		if o.ToRevision > 0 {
			if target, ok = set.Find(o.ToRevision); !ok {
				return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: it has no revision %d; recorded revisions: %s (see %s history %s)", purpose, o.ToRevision, set.Numbers(), o.Session.Name(), o.ref)
			}
		} else if target, ok = set.Previous(); !ok {
			return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: it has no earlier revision to roll back to; recorded revisions: %s", purpose, set.Numbers())
		}
		note = "undo to " + core.Label(target)
		if why := core.AuthorUnknownOf(target.Record); why != "" {
			note += " (author unknown: " + core.AuthorUnknownReason(why) + "; rollout undo to it needs --force)"
		}
		if patch, err = revisions.RollbackPatch(obj, target.Snapshot); err != nil {
			return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: %w", purpose, err)
		}
	default:
		var infra, bootstrap *clusterv1.ContractVersionedObjectReference
		if o.Template != "" {
			if infra, err = o.Session.ResolveTemplate(ctx, cl, obj.GetNamespace(), "--template", o.Template, core.InfrastructureGroupSuffix, "an infrastructure machine template", "DevMachineTemplate"); err != nil {
				return v1alpha1.ObjectPlan{}, err
			}
		}
		if o.BootstrapTemplate != "" {
			if bootstrap, err = o.Session.ResolveTemplate(ctx, cl, obj.GetNamespace(), "--bootstrap-template", o.BootstrapTemplate, core.BootstrapGroupSuffix, "a bootstrap config template", "KubeadmConfigTemplate"); err != nil {
				return v1alpha1.ObjectPlan{}, err
			}
		}
		spec, err := core.SwitchSpec(obj, infra, bootstrap, o.Version)
		if err != nil {
			return v1alpha1.ObjectPlan{}, err
		}
		if patch, err = core.PatchOf(obj.GetResourceVersion(), nil, spec); err != nil {
			return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: %w", purpose, err)
		}
	}
	verdict, answer, err := o.Session.dryRun(ctx, cl, obj, types.MergePatchType, patch, purpose)
	if err != nil {
		return v1alpha1.ObjectPlan{}, err
	}
	planned := answer
	if planned == nil {
		// Refused: what it would have been, for the preview.
		if planned, err = core.ApplyMergePatch(obj, patch); err != nil {
			return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: %w", purpose, err)
		}
	}
	op, err := o.Session.objectPlan(ctx, cl, obj, planned, restart)
	if err != nil {
		return v1alpha1.ObjectPlan{}, err
	}
	op.Verdict = verdict
	if note != "" {
		op.Summary = note + ": " + op.Summary
	}
	return op, nil
}

// objectPlan computes what the change of live into planned does to a
// MachineDeployment or KubeadmControlPlane: its changes, machines, steps,
// strategy, holds and duration (everything but the verdict). restartAt is
// a planned spec.rollout.after, zero when unchanged.
func (c PlanSession) objectPlan(ctx context.Context, cl *core.Clients, live, planned client.Object, restartAt time.Time) (v1alpha1.ObjectPlan, error) {
	kind := core.KindOf(live)
	id := core.Describe(live, kind)
	purpose := "plan a change of " + id
	op := v1alpha1.ObjectPlan{Object: refOf(live), Changes: []v1alpha1.PlanFieldChange{}, Steps: []v1alpha1.PlanStep{}, Machines: []v1alpha1.PlanMachine{}, Holds: []v1alpha1.PlanHold{}}
	oldSnap, newSnap, err := core.Snapshots(live, planned)
	if err != nil {
		return op, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	changes, rollout, err := core.FieldChanges(oldSnap, newSnap)
	if err != nil {
		return op, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	inPlace, err := revisions.IsInPlace(oldSnap, newSnap)
	if err != nil {
		return op, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	op.Changes = append(op.Changes, changes...)
	if !restartAt.IsZero() && !core.RolloutAfter(live).Before(restartAt) {
		restartAt = time.Time{} // already restarted at or after it
	}
	if !restartAt.IsZero() {
		op.Changes = append(op.Changes, v1alpha1.PlanFieldChange{Path: "spec.rollout.after", From: timeText(core.RolloutAfter(live)), To: restartAt.Format(time.RFC3339), RollsOut: true})
	}
	switch {
	case len(rollout) > 0:
		op.Effect = v1alpha1.EffectRollout
	case !restartAt.IsZero():
		op.Effect = v1alpha1.EffectRestart
	case inPlace:
		op.Effect = v1alpha1.EffectInPlace
	default:
		op.Effect = v1alpha1.EffectNone
	}
	cause, err := revisions.ChangeCause(oldSnap, newSnap)
	if err != nil {
		return op, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	switch {
	case cause != "" && !restartAt.IsZero():
		op.Summary = cause + "; spec.rollout.after " + restartAt.Format(time.RFC3339)
	case cause != "":
		op.Summary = cause
	case !restartAt.IsZero():
		op.Summary = "every machine created before " + restartAt.Format(time.RFC3339) + " is replaced"
	default:
		op.Summary = "no change to what its machines are made of"
	}

	ch := MachineChange{Rollout: rollout, InPlace: inPlace, RestartAt: restartAt}
	machines, err := c.listPlanMachines(ctx, cl, live, purpose)
	if err != nil {
		return op, err
	}
	facts, err := c.holdFactsOf(ctx, cl, live, purpose)
	if err != nil {
		return op, err
	}
	if planner := planners[kind.GVK.GroupKind()]; planner != nil {
		in := machinePlanInput{live: live, planned: planned, change: ch, machines: machines, facts: facts, purpose: purpose}
		if err := planner.planMachines(ctx, c, cl, in, &op); err != nil {
			return op, err
		}
	}
	if core.TopologyOwned(live) {
		op.Holds = append(op.Holds, topologyManagedHold(live, kind, orText(core.ClusterNameOf(live), "<its Cluster>")))
	}
	op.Duration = c.durationOf(ctx, cl, live, machines, op.Counts.Replace)
	return op, nil
}

// machinePlanner plans what a change does to the machines of one kind of
// object: which it replaces, with what strategy, in which version step, and
// what would hold it. planners holds one per kind plan can foresee.
type machinePlanner interface {
	planMachines(ctx context.Context, c PlanSession, cl *core.Clients, in machinePlanInput, op *v1alpha1.ObjectPlan) error
}

// planners are the machine planners of the kinds plan can foresee, by group
// and kind: a MachineDeployment and a KubeadmControlPlane. A Cluster is
// planned through its topology; the other kinds refuse a plan
// (Kind.refusePlan).
var planners = map[schema.GroupKind]machinePlanner{
	core.MachineDeployment.GVK.GroupKind():   machineDeploymentPlanner{},
	core.KubeadmControlPlane.GVK.GroupKind(): controlPlanePlanner{},
}

// machinePlanInput is what a machinePlanner plans from.
type machinePlanInput struct {
	// live and planned are the object before and after the change.
	live, planned client.Object
	// change is what the change does to the machines' content.
	change MachineChange
	// machines are the object's Machines.
	machines []clusterv1.Machine
	// facts are what the holds are decided from.
	facts HoldFacts
	// purpose names the plan in errors.
	purpose string
}

// machineDeploymentPlanner plans a MachineDeployment's machines: its
// MachineSets' rolling update, the MachineSet preflight checks, and a
// workers step when its version changes.
type machineDeploymentPlanner struct{}

func (machineDeploymentPlanner) planMachines(ctx context.Context, c PlanSession, cl *core.Clients, in machinePlanInput, op *v1alpha1.ObjectPlan) error {
	p := in.planned.(*clusterv1.MachineDeployment)
	sets, err := c.listPlanMachineSets(ctx, cl, in.live, in.purpose)
	if err != nil {
		return err
	}
	if op.Machines, err = PlanMachineDeploymentMachines(p, in.change, in.machines, sets); err != nil {
		return fmt.Errorf("cannot %s: %w", in.purpose, err)
	}
	op.Counts = CountMachines(op.Machines)
	if op.Counts.Replace > 0 {
		op.Strategy = MachineDeploymentStrategy(p)
	}
	facts := in.facts
	if ref := p.Spec.Template.Spec.Bootstrap.ConfigRef; ref.IsDefined() && op.Counts.Replace > 0 {
		facts.BootstrapSkip = c.templateAnnotation(ctx, cl, p.Namespace, ref, clusterv1.MachineSetSkipPreflightChecksAnnotation)
	}
	op.Holds = append(op.Holds, MachineDeploymentHolds(p, op.Counts.Replace > 0, facts)...)
	if old := in.live.(*clusterv1.MachineDeployment).Spec.Template.Spec.Version; old != p.Spec.Template.Spec.Version {
		op.Steps = []v1alpha1.PlanStep{{Part: core.PartWorkers, Version: p.Spec.Template.Spec.Version, Objects: []string{objectName(in.live)}, Machines: op.Counts.Replace}}
	}
	return nil
}

// controlPlanePlanner plans a KubeadmControlPlane's machines: replaced
// one at a time, its own checks before each, and a control-plane step
// (with its etcd) when its version changes.
type controlPlanePlanner struct{}

func (controlPlanePlanner) planMachines(_ context.Context, _ PlanSession, _ *core.Clients, in machinePlanInput, op *v1alpha1.ObjectPlan) error {
	p := in.planned.(*controlplanev1.KubeadmControlPlane)
	op.Machines = PlanControlPlaneMachines(p, in.change, in.machines)
	op.Counts = CountMachines(op.Machines)
	if op.Counts.Replace > 0 {
		op.Strategy = ControlPlaneStrategy(p)
	}
	facts := in.facts
	facts.CPMachines = in.machines
	op.Holds = append(op.Holds, ControlPlaneHolds(p, op.Counts.Replace > 0, facts)...)
	if old := in.live.(*controlplanev1.KubeadmControlPlane).Spec.Version; old != p.Spec.Version {
		st := v1alpha1.PlanStep{Part: core.PartControlPlane, Version: p.Spec.Version, Objects: []string{objectName(in.live)}, Machines: op.Counts.Replace}
		st.Etcd, st.EtcdSource = etcdAt(p.Spec.Version, EtcdImageTagOf(p))
		op.Steps = []v1alpha1.PlanStep{st}
	}
	return nil
}

// refOf names an object in a plan.
func refOf(obj client.Object) v1alpha1.PlanObjectRef {
	return v1alpha1.PlanObjectRef{Kind: core.KindOf(obj).GVK.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func orText(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// EtcdImageTagOf is a KubeadmControlPlane's pinned etcd image tag, "" when
// kubeadm picks it.
func EtcdImageTagOf(kcp *controlplanev1.KubeadmControlPlane) string {
	return kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
}

// listPlanMachines reads the Machines of a MachineDeployment or
// KubeadmControlPlane.
func (c PlanSession) listPlanMachines(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) ([]clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := cl.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), core.MachineLabels(obj)); err != nil {
		return nil, core.Call{Verb: "list", GR: clusterv1.GroupVersion.WithResource("machines").GroupResource(), Kind: "Machine", Namespace: obj.GetNamespace(), Purpose: purpose}.Explain(err)
	}
	return list.Items, nil
}

// listPlanMachineSets reads the MachineSets of a MachineDeployment.
func (c PlanSession) listPlanMachineSets(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) ([]clusterv1.MachineSet, error) {
	list := &clusterv1.MachineSetList{}
	if err := cl.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), core.MachineSetLabels(obj)); err != nil {
		return nil, core.Call{Verb: "list", GR: clusterv1.GroupVersion.WithResource("machinesets").GroupResource(), Kind: "MachineSet", Namespace: obj.GetNamespace(), Purpose: purpose}.Explain(err)
	}
	return list.Items, nil
}

// holdFactsOf reads what the holds of a change of obj depend on: its
// Cluster and the Cluster's KubeadmControlPlane. A Cluster or control
// plane that cannot be found leaves them out (the holds they would show are
// then not checked); other errors are returned.
func (c PlanSession) holdFactsOf(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) (HoldFacts, error) {
	f := HoldFacts{CommandName: c.Name()}
	name := core.ClusterNameOf(obj)
	if name == "" {
		return f, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			c.Warnf("Cluster %s/%s of %s not found: holds of the Cluster and its control plane are not checked", obj.GetNamespace(), name, core.Describe(obj, core.KindOf(obj)))
			return f, nil
		}
		return f, core.Call{Verb: "get", GR: core.Cluster.GroupResource(), Kind: "Cluster", Namespace: obj.GetNamespace(), Name: name, Purpose: purpose}.Explain(err)
	}
	f.Cluster = cluster
	if kcp, ok := obj.(*controlplanev1.KubeadmControlPlane); ok {
		f.ControlPlane = kcp
		return f, nil
	}
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() || ref.Kind != core.KubeadmControlPlane.GVK.Kind || ref.APIGroup != core.KubeadmControlPlane.GVK.Group {
		return f, nil
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			return f, nil
		}
		return f, core.Call{Verb: "get", GR: core.KubeadmControlPlane.GroupResource(), Kind: "KubeadmControlPlane", Namespace: cluster.Namespace, Name: ref.Name, Purpose: purpose}.Explain(err)
	}
	f.ControlPlane = kcp
	return f, nil
}

// templateAnnotation reads one annotation of a referenced template, ""
// when it cannot be read.
func (c PlanSession) templateAnnotation(ctx context.Context, cl *core.Clients, namespace string, ref clusterv1.ContractVersionedObjectReference, key string) string {
	mapping, err := cl.Mapper.RESTMapping(ref.GroupKind())
	if err != nil {
		return ""
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, meta); err != nil {
		return ""
	}
	return meta.GetAnnotations()[key]
}

// durationOf estimates how long replacing n machines of obj takes, from its
// recorded history (see estimateDuration). A history that cannot be read
// leaves it unknown, saying why.
func (c PlanSession) durationOf(ctx context.Context, cl *core.Clients, obj client.Object, machines []clusterv1.Machine, n int) v1alpha1.PlanDuration {
	if n == 0 {
		return v1alpha1.PlanDuration{Basis: "no machine is replaced"}
	}
	set, err := c.LoadHistory(ctx, cl, obj, "read the history of "+core.Describe(obj, core.KindOf(obj)))
	if err != nil {
		return v1alpha1.PlanDuration{Basis: "unknown: " + err.Error()}
	}
	if !set.Recorded() {
		return v1alpha1.PlanDuration{Basis: fmt.Sprintf("unknown: rollout-guard has recorded no revision of %s", objectName(obj))}
	}
	records := make([]revisions.Record, 0, len(set.Revs))
	for _, r := range set.Revs {
		records = append(records, r.Record)
	}
	return EstimateDuration(objectName(obj), records, machines, n)
}
