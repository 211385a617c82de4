package plan

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// machinePlanner plans what a change does to the machines of one kind of
// object: which it replaces, with what strategy, in which version step, and
// what would hold it. planners holds one per kind plan can foresee.
type machinePlanner interface {
	planMachines(ctx context.Context, c planSession, cl *core.Clients, in machinePlanInput, op *v1alpha1.ObjectPlan) error
}

// planners are the machine planners of the kinds plan can foresee, by group
// and kind: a MachineDeployment and a KubeadmControlPlane. A Cluster is
// planned through its topology; the other kinds refuse a plan
// (Kind.RefusePlan).
var planners = map[schema.GroupKind]machinePlanner{
	core.MachineDeployment.GVK.GroupKind():   machineDeploymentPlanner{},
	core.KubeadmControlPlane.GVK.GroupKind(): controlPlanePlanner{},
}

// machinePlanInput is what a machinePlanner plans from.
type machinePlanInput struct {
	// live and planned are the object before and after the change.
	live, planned client.Object
	// change is what the change does to the machines' content.
	change machineChange
	// machines are the object's Machines.
	machines []clusterv1.Machine
	// facts are what the holds are decided from.
	facts holdFacts
	// purpose names the plan in errors.
	purpose string
}

// machineDeploymentPlanner plans a MachineDeployment's machines: its
// MachineSets' rolling update, the MachineSet preflight checks, and a
// workers step when its version changes.
type machineDeploymentPlanner struct{}

func (machineDeploymentPlanner) planMachines(ctx context.Context, c planSession, cl *core.Clients, in machinePlanInput, op *v1alpha1.ObjectPlan) error {
	p := in.planned.(*clusterv1.MachineDeployment)
	sets, err := c.listPlanMachineSets(ctx, cl, in.live, in.purpose)
	if err != nil {
		return err
	}
	in.change.inPlaceIfAccepted = c.inPlaceHandlers(ctx, cl, p)
	if op.Machines, err = planMachineDeploymentMachines(p, in.change, in.machines, sets); err != nil {
		return fmt.Errorf("cannot %s: %w", in.purpose, err)
	}
	op.Counts = countMachines(op.Machines)
	if op.Counts.Replace > 0 {
		op.Strategy = machineDeploymentStrategy(p)
	}
	facts := in.facts
	if ref := p.Spec.Template.Spec.Bootstrap.ConfigRef; ref.IsDefined() && op.Counts.Replace > 0 {
		facts.bootstrapSkip = c.templateAnnotation(ctx, cl, p.Namespace, ref, clusterv1.MachineSetSkipPreflightChecksAnnotation)
	}
	op.Holds = append(op.Holds, machineDeploymentHolds(p, op.Counts.Replace > 0, facts)...)
	if old := in.live.(*clusterv1.MachineDeployment).Spec.Template.Spec.Version; old != p.Spec.Template.Spec.Version {
		op.Steps = []v1alpha1.PlanStep{{Part: core.PartWorkers, Version: p.Spec.Template.Spec.Version, Objects: []string{objectName(in.live)}, Machines: op.Counts.Replace}}
	}
	return nil
}

// controlPlanePlanner plans a KubeadmControlPlane's machines: replaced
// one at a time, its own checks before each, and a control-plane step
// (with its etcd) when its version changes.
type controlPlanePlanner struct{}

func (controlPlanePlanner) planMachines(ctx context.Context, c planSession, cl *core.Clients, in machinePlanInput, op *v1alpha1.ObjectPlan) error {
	p := in.planned.(*controlplanev1.KubeadmControlPlane)
	in.change.inPlaceIfAccepted = c.inPlaceHandlers(ctx, cl, p)
	op.Machines = planControlPlaneMachines(p, in.change, in.machines)
	op.Counts = countMachines(op.Machines)
	if op.Counts.Replace > 0 {
		op.Strategy = controlPlaneStrategy(p)
	}
	facts := in.facts
	facts.cpMachines = in.machines
	op.Holds = append(op.Holds, controlPlaneHolds(p, op.Counts.Replace > 0, facts)...)
	if old := in.live.(*controlplanev1.KubeadmControlPlane).Spec.Version; old != p.Spec.Version {
		st := v1alpha1.PlanStep{Part: core.PartControlPlane, Version: p.Spec.Version, Objects: []string{objectName(in.live)}, Machines: op.Counts.Replace}
		st.Etcd, st.EtcdSource = etcdAt(p.Spec.Version, etcdImageTagOf(p))
		op.Steps = []v1alpha1.PlanStep{st}
	}
	return nil
}
