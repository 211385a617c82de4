package plan

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// verdictOf turns the answer to a server-side dry run into a verdict. An
// error that is not the API server refusing the change (the guard
// unreachable, a permission denied, a conflict, the API server unreachable)
// is returned as an error: there is no verdict then.
func verdictOf(err error, warnings []string) (v1alpha1.PlanVerdict, error) {
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
	if errors.As(err, new(core.AdmissionRefusal)) {
		v.RefusedBy, v.Message = "API server", msg
		return v, nil
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
			if !slices.Contains(v.Rules, r[1]) {
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
func (c planSession) dryRun(ctx context.Context, cl *core.Clients, obj client.Object, pt types.PatchType, data []byte, purpose string) (v1alpha1.PlanVerdict, client.Object, error) {
	answer := obj.DeepCopyObject().(client.Object)
	warnings, err := c.CollectWarnings(func() error {
		return c.Send(ctx, cl, answer, pt, data, core.DryRunServer, purpose)
	})
	v, verr := verdictOf(err, warnings)
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
		set, err := o.c.LoadHistory(ctx, cl, obj, purpose)
		if err != nil {
			return v1alpha1.ObjectPlan{}, err
		}
		var target revisions.Revision
		var ok bool
		if o.ToRevision > 0 {
			if target, ok = set.Find(o.ToRevision); !ok {
				return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot %s: it has no revision %d; recorded revisions: %s (see %s history %s)", purpose, o.ToRevision, set.Numbers(), o.c.Name(), o.ref)
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
			if infra, err = o.c.ResolveTemplate(ctx, cl, obj.GetNamespace(), "--template", o.Template, core.InfrastructureGroupSuffix, "an infrastructure machine template", "DevMachineTemplate"); err != nil {
				return v1alpha1.ObjectPlan{}, err
			}
		}
		if o.BootstrapTemplate != "" {
			if bootstrap, err = o.c.ResolveTemplate(ctx, cl, obj.GetNamespace(), "--bootstrap-template", o.BootstrapTemplate, core.BootstrapGroupSuffix, "a bootstrap config template", "KubeadmConfigTemplate"); err != nil {
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
	verdict, answer, err := o.c.verdictFor(ctx, cl, obj, types.MergePatchType, patch, purpose)
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
	op, err := o.c.objectPlan(ctx, cl, obj, planned, restart)
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
func (c planSession) objectPlan(ctx context.Context, cl *core.Clients, live, planned client.Object, restartAt time.Time) (v1alpha1.ObjectPlan, error) {
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

	ch := machineChange{rollout: rollout, inPlace: inPlace, restartAt: restartAt}
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

// etcdImageTagOf is a KubeadmControlPlane's pinned etcd image tag, "" when
// kubeadm picks it.
func etcdImageTagOf(kcp *controlplanev1.KubeadmControlPlane) string {
	return kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
}
