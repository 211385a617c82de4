package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// machineChange is what a change does to the content of one object, the
// input of the machine planners.
type machineChange struct {
	// rollout are the differences that replace machines (revisions.RolloutChanges).
	rollout []revisions.Change
	// inPlace is true when the change is applied to the machines in place.
	inPlace bool
	// restartAt is the planned spec.rollout.after; zero when it does not
	// change.
	restartAt time.Time
	// inPlaceIfAccepted names the Runtime Extension handlers Cluster API
	// asks first whether a machine replaced for its content can be updated
	// in place instead (see inPlaceHandlers); "" when none is registered.
	inPlaceIfAccepted string
}

// changeText is a list of changes on one line: "version v1.34.3 →
// v1.35.2; infrastructureRef DevMachineTemplate/a → DevMachineTemplate/b".
func changeText(changes []revisions.Change) string {
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf("%s %s → %s", c.Path, core.OrNone(core.OneLine(c.From)), core.OrNone(core.OneLine(c.To))))
	}
	return strings.Join(parts, "; ")
}

// planMachineDeploymentMachines decides what the change of a
// MachineDeployment into newMD does to each of its machines, as Cluster
// API's MachineDeployment controller does: a machine whose MachineSet's
// template differs from the new template in a field that rolls out
// (version, infrastructureRef, bootstrap, failureDomain) is replaced; one
// created before a new spec.rollout.after is replaced; otherwise an
// in-place change updates it in place, and it is untouched when nothing it
// is made of changes. Machines being deleted are left out. The result is
// sorted by MachineSet and name.
func planMachineDeploymentMachines(newMD *clusterv1.MachineDeployment, ch machineChange, machines []clusterv1.Machine, sets []clusterv1.MachineSet) ([]v1alpha1.PlanMachine, error) {
	newSnap, err := revisions.ForMachineDeployment(newMD)
	if err != nil {
		return nil, err
	}
	byName := map[string]*clusterv1.MachineSet{}
	for i := range sets {
		byName[sets[i].Name] = &sets[i]
	}
	object := core.MachineDeployment.Singular() + "/" + newMD.Name
	var out []v1alpha1.PlanMachine
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		pm := v1alpha1.PlanMachine{Name: m.Name, Object: object, Version: m.Spec.Version}
		ms := byName[machineSetOf(m)]
		var rollout []revisions.Change
		if ms != nil {
			pm.MachineSet = ms.Name
			msSnap, err := revisions.ForMachineDeployment(&clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Template: ms.Spec.Template}})
			if err != nil {
				return nil, fmt.Errorf("MachineSet %s: %w", ms.Name, err)
			}
			if rollout, err = revisions.RolloutChanges(msSnap, newSnap); err != nil {
				return nil, fmt.Errorf("MachineSet %s: %w", ms.Name, err)
			}
		} else {
			// A machine of no MachineSet still known: judge it by the change.
			rollout = ch.rollout
		}
		pm.Action, pm.Reason = ch.decide(m, rollout)
		pm.InPlaceIfAccepted = ch.inPlaceFor(rollout)
		out = append(out, pm)
	}
	sortMachines(out)
	return out, nil
}

// decide says what the change does to machine m, given the fields that
// roll it out (rollout): replaced for those, or for a restart asked after it
// was created; updated in place; or untouched.
func (ch machineChange) decide(m clusterv1.Machine, rollout []revisions.Change) (string, string) {
	switch {
	case len(rollout) > 0:
		return v1alpha1.ActionReplace, changeText(rollout)
	case !ch.restartAt.IsZero() && m.CreationTimestamp.Time.Before(ch.restartAt):
		return v1alpha1.ActionReplace, "created before spec.rollout.after " + ch.restartAt.UTC().Format(time.RFC3339)
	case ch.inPlace:
		return v1alpha1.ActionInPlace, "updated in place"
	}
	return v1alpha1.ActionUntouched, ""
}

// machineSetOf is the MachineSet of a machine: its set-name label, or its
// owning MachineSet.
func machineSetOf(m clusterv1.Machine) string {
	if name := m.Labels[clusterv1.MachineSetNameLabel]; name != "" {
		return name
	}
	for _, ref := range m.OwnerReferences {
		if ref.Kind == "MachineSet" {
			return ref.Name
		}
	}
	return ""
}

// planControlPlaneMachines decides what the change of a
// KubeadmControlPlane into newKCP does to each of its machines: when the
// change rolls out, every machine is replaced, except that a change of
// spec.version alone leaves a machine that already runs the new version
// (one created for it before a revert); a machine created before a new
// spec.rollout.after is replaced; an in-place change updates every machine
// in place. Machines being deleted are left out.
func planControlPlaneMachines(newKCP *controlplanev1.KubeadmControlPlane, ch machineChange, machines []clusterv1.Machine) []v1alpha1.PlanMachine {
	object := core.KubeadmControlPlane.Singular() + "/" + newKCP.Name
	versionOnly := len(ch.rollout) == 1 && ch.rollout[0].Path == "version"
	var out []v1alpha1.PlanMachine
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		pm := v1alpha1.PlanMachine{Name: m.Name, Object: object, Version: m.Spec.Version}
		rollout := ch.rollout
		if versionOnly && m.Spec.Version == newKCP.Spec.Version {
			rollout = nil // already runs the new version
		}
		pm.Action, pm.Reason = ch.decide(m, rollout)
		pm.InPlaceIfAccepted = ch.inPlaceFor(rollout)
		out = append(out, pm)
	}
	sortMachines(out)
	return out
}

// planUpgradeMachines decides what a topology upgrade to target does to the
// machines of one part: every machine not at target is replaced (at the
// first step of its part).
func planUpgradeMachines(object, target string, machines []clusterv1.Machine, step string) []v1alpha1.PlanMachine {
	var out []v1alpha1.PlanMachine
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		pm := v1alpha1.PlanMachine{Name: m.Name, Object: object, MachineSet: machineSetOf(m), Version: m.Spec.Version, Action: v1alpha1.ActionUntouched}
		if m.Spec.Version != target {
			pm.Action, pm.Reason = v1alpha1.ActionReplace, step
		}
		out = append(out, pm)
	}
	sortMachines(out)
	return out
}

func sortMachines(ms []v1alpha1.PlanMachine) {
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].Object != ms[j].Object {
			return ms[i].Object < ms[j].Object
		}
		if ms[i].MachineSet != ms[j].MachineSet {
			return ms[i].MachineSet < ms[j].MachineSet
		}
		return ms[i].Name < ms[j].Name
	})
}

// countMachines sums machines by action.
func countMachines(ms []v1alpha1.PlanMachine) v1alpha1.PlanCounts {
	var c v1alpha1.PlanCounts
	for _, m := range ms {
		switch m.Action {
		case v1alpha1.ActionReplace:
			c.Replace++
		case v1alpha1.ActionInPlace:
			c.InPlace++
		default:
			c.Untouched++
		}
	}
	return c
}

// machineDeploymentStrategy is the rollout strategy of a MachineDeployment,
// with Cluster API's defaults (RollingUpdate, maxSurge 1, maxUnavailable 0,
// deletion order Random).
func machineDeploymentStrategy(md *clusterv1.MachineDeployment) *v1alpha1.PlanStrategy {
	s := md.Spec.Rollout.Strategy
	st := &v1alpha1.PlanStrategy{Type: string(s.Type), MaxSurge: "1", MaxUnavailable: "0", DeletionOrder: string(md.Spec.Deletion.Order)}
	if st.Type == "" {
		st.Type = string(clusterv1.RollingUpdateMachineDeploymentStrategyType)
	}
	if st.DeletionOrder == "" {
		st.DeletionOrder = string(clusterv1.RandomMachineSetDeletionOrder)
	}
	if v := s.RollingUpdate.MaxSurge; v != nil {
		st.MaxSurge = v.String()
	}
	if v := s.RollingUpdate.MaxUnavailable; v != nil {
		st.MaxUnavailable = v.String()
	}
	if st.Type == string(clusterv1.OnDeleteMachineDeploymentStrategyType) {
		st.MaxSurge, st.MaxUnavailable = "", ""
		st.Description = "OnDelete: a new machine is created only after you delete an old one; nothing is replaced by itself"
		return st
	}
	replicas := int32(1)
	if md.Spec.Replicas != nil {
		replicas = *md.Spec.Replicas
	}
	surge, _ := intstr.GetScaledValueFromIntOrPercent(ptrIntOrString(st.MaxSurge), int(replicas), true)
	unavailable, _ := intstr.GetScaledValueFromIntOrPercent(ptrIntOrString(st.MaxUnavailable), int(replicas), false)
	st.Description = fmt.Sprintf("RollingUpdate: up to %d new %s above the %d wanted, at most %d unavailable; old machines deleted in %s order once new ones are available",
		surge, core.Plural(surge, "machine", "machines"), replicas, unavailable, st.DeletionOrder)
	return st
}

// ptrIntOrString parses "1" or "25%" as an IntOrString.
func ptrIntOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// controlPlaneStrategy is the rollout strategy of a KubeadmControlPlane:
// maxSurge 1 (the default) creates a new machine before deleting an old
// one, 0 deletes first; the oldest machine goes first.
func controlPlaneStrategy(kcp *controlplanev1.KubeadmControlPlane) *v1alpha1.PlanStrategy {
	st := &v1alpha1.PlanStrategy{Type: string(controlplanev1.RollingUpdateStrategyType), MaxSurge: "1", DeletionOrder: "Oldest"}
	if v := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; v != nil {
		st.MaxSurge = v.String()
	}
	if st.MaxSurge == "0" {
		st.Description = "RollingUpdate, maxSurge 0: one machine at a time, the oldest deleted first and then replaced (the control plane runs one machine short meanwhile)"
	} else {
		st.Description = "RollingUpdate, maxSurge " + st.MaxSurge + ": one machine at a time, a new one created and joined before the oldest is deleted"
	}
	return st
}
