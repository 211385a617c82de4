package webhooks

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/skew"
)

// machineDeploymentVersionField is where a MachineDeployment's Kubernetes version lives.
const machineDeploymentVersionField = "spec.template.spec.version"

// MachineDeploymentValidator refuses MachineDeployment versions that break the
// kubelet skew against the cluster's control plane (rules
// WorkerNewerThanControlPlane and WorkerTooOld).
type MachineDeploymentValidator struct {
	facts factReader
}

var _ admission.Validator[*clusterv1.MachineDeployment] = &MachineDeploymentValidator{}

// ValidateCreate judges the version of a new MachineDeployment.
func (v *MachineDeploymentValidator) ValidateCreate(ctx context.Context, md *clusterv1.MachineDeployment) (admission.Warnings, error) {
	return v.validate(ctx, nil, md)
}

// ValidateUpdate judges a change of a MachineDeployment's version.
func (v *MachineDeploymentValidator) ValidateUpdate(ctx context.Context, oldMD, newMD *clusterv1.MachineDeployment) (admission.Warnings, error) {
	return v.validate(ctx, oldMD, newMD)
}

// ValidateDelete allows every deletion: removing a pool breaks no skew.
func (v *MachineDeploymentValidator) ValidateDelete(context.Context, *clusterv1.MachineDeployment) (admission.Warnings, error) {
	return nil, nil
}

func (v *MachineDeploymentValidator) validate(ctx context.Context, oldMD, newMD *clusterv1.MachineDeployment) (admission.Warnings, error) {
	gk := clusterv1.GroupVersion.WithKind("MachineDeployment").GroupKind()
	change := skew.WorkerChange{
		Kind:         "MachineDeployment",
		Name:         newMD.Name,
		VersionField: machineDeploymentVersionField,
		NewVersion:   newMD.Spec.Template.Spec.Version,
	}
	if oldMD != nil {
		change.OldVersion = oldMD.Spec.Template.Spec.Version
		if change.OldVersion == change.NewVersion {
			return nil, nil
		}
	}
	if change.NewVersion == "" {
		return nil, nil
	}
	cp, reason, err := v.facts.controlPlaneOf(ctx, newMD.Namespace, newMD.Spec.ClusterName)
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not read the control plane of MachineDeployment %s/%s: %w", newMD.Namespace, newMD.Name, err)
	}
	if cp == nil {
		// Without a control plane there is nothing to judge the skew against:
		// refuse only what is wrong on its own, and say why the rest was not checked.
		return toAdmission(gk, newMD.Name, versionOnly(machineDeploymentVersionField, change.NewVersion),
			fmt.Sprintf("rollout-guard: version skew of MachineDeployment %s/%s not checked: %s", newMD.Namespace, newMD.Name, reason))
	}
	change.ControlPlane = cp
	return toAdmission(gk, newMD.Name, skew.EvaluateWorker(change))
}
