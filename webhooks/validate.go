package webhooks

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/skew"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Validator is the validating webhook of one kind (MachineDeployment,
// MachinePool, KubeadmControlPlane or Cluster): it refuses what Policy refuses, unless a
// member of an override group sets the break-glass annotation.
type Validator[T client.Object] struct {
	// Policy judges changes (a policy.Policy, or FreshPolicy in the guard).
	Policy policy.Decider
	// Overrides says who may use the break-glass override.
	Overrides policy.OverrideGroups
	// GroupKind names the kind in refusals.
	GroupKind schema.GroupKind
	// Recording records refused overrides on the live revision; nil skips
	// it.
	Recording *Recording
	// Enforcement is EnforcementDeny (refuse what the policy refuses, the
	// default when empty) or EnforcementWarn.
	Enforcement Enforcement
	// Stamps, when set, tells whether the guard wrote the stamps of the
	// stored object: a control plane whose highest-run stamp it did not
	// write is judged without its stamps. nil takes every stamp as
	// written.
	Stamps *history.Stamps
}

// Enforcement is what the validating webhooks do with a change the policy
// refuses.
type Enforcement string

const (
	// EnforcementDeny refuses it.
	EnforcementDeny Enforcement = "deny"
	// EnforcementWarn allows it with a warning that carries the refusal,
	// and counts it (outcome "warned"): a way to adopt the guard in stages,
	// seeing what it would refuse before it refuses anything.
	EnforcementWarn Enforcement = "warn"
)

// ParseEnforcement reads the value of --enforcement.
func ParseEnforcement(s string) (Enforcement, error) {
	switch e := Enforcement(s); e {
	case EnforcementDeny, EnforcementWarn:
		return e, nil
	case "":
		return EnforcementDeny, nil
	}
	return "", fmt.Errorf("--enforcement %q: want %s (refuse what the policy refuses) or %s (allow it with a warning, and count it)", s, EnforcementDeny, EnforcementWarn)
}

// Recording is how a webhook records history at admission: with Recorder,
// and only of an old object Stored says the API server stored.
type Recording struct {
	// Recorder writes the records.
	Recorder *history.Recorder
	// Stored checks a request's old object against what the API server
	// stored.
	Stored Persisted
}

// NewValidators returns the validators of the three kinds the guard polices.
func NewValidators(p policy.Decider, overrides policy.OverrideGroups, recording *Recording) (*Validator[*clusterv1.MachineDeployment], *Validator[*controlplanev1.KubeadmControlPlane], *Validator[*clusterv1.Cluster]) {
	return &Validator[*clusterv1.MachineDeployment]{Policy: p, Overrides: overrides, Recording: recording, GroupKind: clusterv1.GroupVersion.WithKind("MachineDeployment").GroupKind()},
		&Validator[*controlplanev1.KubeadmControlPlane]{Policy: p, Overrides: overrides, Recording: recording, GroupKind: controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind()},
		&Validator[*clusterv1.Cluster]{Policy: p, Overrides: overrides, Recording: recording, GroupKind: clusterv1.GroupVersion.WithKind("Cluster").GroupKind()}
}

// NewMachinePoolValidator returns the validator of MachinePools: the worker
// rules, as for MachineDeployments (policy.Policy judges both alike).
func NewMachinePoolValidator(p policy.Decider, overrides policy.OverrideGroups, recording *Recording) *Validator[*clusterv1.MachinePool] {
	return &Validator[*clusterv1.MachinePool]{Policy: p, Overrides: overrides, Recording: recording, GroupKind: clusterv1.GroupVersion.WithKind("MachinePool").GroupKind()}
}

// NewMachineValidators returns the validators of MachineSets and Machines:
// the worker rules, judged where they differ from the owner their
// controller reference names (policy.Policy.DecideWorkerPool). Neither
// has revisions, so a refused override is logged, not recorded.
func NewMachineValidators(p policy.Decider, overrides policy.OverrideGroups) (*Validator[*clusterv1.MachineSet], *Validator[*clusterv1.Machine]) {
	return &Validator[*clusterv1.MachineSet]{Policy: p, Overrides: overrides, GroupKind: kinds.MachineSet.GVK.GroupKind()},
		&Validator[*clusterv1.Machine]{Policy: p, Overrides: overrides, GroupKind: kinds.Machine.GVK.GroupKind()}
}

// ValidateCreate judges a new object.
func (v *Validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	return v.judge(ctx, nil, obj)
}

// ValidateUpdate judges a change.
func (v *Validator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	return v.judge(ctx, oldObj, newObj)
}

// ValidateDelete allows every deletion: removing an object breaks no skew.
func (v *Validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator[T]) judge(ctx context.Context, oldObj client.Object, newObj T) (admission.Warnings, error) {
	if oldObj != nil && reflect.ValueOf(oldObj).IsNil() {
		oldObj = nil
	}
	kind := v.GroupKind.Kind
	var err error
	if oldObj, err = v.withoutForgedStamps(ctx, oldObj); err != nil {
		countDecision(kind, outcomeError, skew.Decision{}, 0)
		return nil, err
	}
	d, warnings, err := v.Policy.Decide(ctx, oldObj, newObj)
	if err != nil {
		countDecision(kind, outcomeError, d, 0)
		return nil, err
	}
	reason, requested := policy.OverrideRequested(oldObj, newObj)
	if d.Allowed() {
		countDecision(kind, outcomeAllowed, d, len(warnings)+len(d.Warnings))
		return toAdmission(v.GroupKind, newObj.GetName(), d, nil, warnings)
	}
	if !requested {
		if v.Enforcement == EnforcementWarn {
			return v.warnOnly(kind, newObj.GetName(), d, warnings)
		}
		countDecision(kind, outcomeRefused, d, 0)
		return toAdmission(v.GroupKind, newObj.GetName(), d, nil, warnings)
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not read the request: %w", err)
	}
	if v.Overrides.Allows(req.UserInfo) {
		countDecision(kind, outcomeOverridden, d, 1)
		warnings = append(warnings, fmt.Sprintf("rollout-guard: override by %s honoured (%s): %s; recorded in the revision history",
			req.UserInfo.Username, reason, strings.Join(policy.RuleIDs(d), ", ")))
		return append(admission.Warnings{}, append(warnings, d.Warnings...)...), nil
	}
	if v.Enforcement == EnforcementWarn {
		// Nothing is refused, so there is no override to refuse.
		return v.warnOnly(kind, newObj.GetName(), d, warnings)
	}
	countDecision(kind, outcomeRefused, d, 0)
	if err := v.recordRefusedOverride(ctx, req, oldObj, reason, d); err != nil {
		// The refusal stands either way; a failed record must not turn it into an error.
		log.FromContext(ctx).Error(err, "could not record a refused override", "user", req.UserInfo.Username)
	}
	notHonoured := field.Forbidden(field.NewPath("metadata", "annotations").Key(revisions.AnnotationOverride),
		fmt.Sprintf("override not honoured: user %s is not in an override group (%s)", req.UserInfo.Username, v.Overrides))
	return toAdmission(v.GroupKind, newObj.GetName(), d, field.ErrorList{notHonoured}, warnings)
}

// withoutForgedStamps returns oldObj, or a copy without its revision
// stamps when it carries a highest run (what the policy reads of them) the
// guard did not write (history.Stamps).
func (v *Validator[T]) withoutForgedStamps(ctx context.Context, oldObj client.Object) (client.Object, error) {
	if v.Stamps == nil || oldObj == nil || oldObj.GetAnnotations()[revisions.AnnotationHighestRun] == "" {
		return oldObj, nil
	}
	if written, err := v.Stamps.Written(ctx, oldObj); err != nil {
		return nil, fmt.Errorf("rollout-guard could not judge %s/%s: %w", oldObj.GetNamespace(), oldObj.GetName(), err)
	} else if written {
		return oldObj, nil
	}
	out, ok := oldObj.DeepCopyObject().(client.Object)
	if !ok {
		return oldObj, nil
	}
	out.SetAnnotations(revisions.Unstamped(oldObj.GetAnnotations()))
	return out, nil
}

// warnOnly answers a change the policy refuses, when the guard only warns:
// allowed, with the refusal as a warning, counted as warned.
func (v *Validator[T]) warnOnly(kind, name string, d skew.Decision, warnings []string) (admission.Warnings, error) {
	countDecision(kind, outcomeWarned, d, 1)
	out := append(admission.Warnings{}, warnings...)
	out = append(out, "rollout-guard (--enforcement=warn) would refuse this change: "+policy.Refusal(v.GroupKind, name, d, nil).Error())
	return append(out, d.Warnings...), nil
}

// recordRefusedOverride notes a refused override on the live revision of the
// object (MachineDeployments, MachinePools and KubeadmControlPlanes), except
// on dry-run and when the request's old object is not what the API server
// stored.
func (v *Validator[T]) recordRefusedOverride(ctx context.Context, req admission.Request, oldObj client.Object, reason string, d skew.Decision) error {
	if v.Recording == nil || oldObj == nil || (req.DryRun != nil && *req.DryRun) {
		return nil
	}
	kind, ok := kinds.HistoryOf(oldObj)
	if !ok {
		log.FromContext(ctx).Info("refused override", "user", req.UserInfo.Username, "reason", reason, "rules", policy.RuleIDs(d))
		return nil
	}
	snap, err := kind.Snapshot(oldObj)
	if err != nil {
		return err
	}
	stored, err := v.Recording.Stored.Verified(ctx, kind, oldObj, snap, "a refused override", req.UserInfo.Username)
	if err != nil || !stored {
		return err
	}
	rec := revisions.StampsOf(oldObj)
	if rec.Revision == 0 {
		rec = history.Adopted(oldObj)
	}
	return v.Recording.Recorder.RecordRefusedOverride(ctx, oldObj, kind.GVK, snap, rec, history.RefusedOverride{
		At: time.Now().UTC().Truncate(time.Second), By: req.UserInfo.Username, Reason: reason, Rules: policy.RuleIDs(d),
	})
}
