package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlanAPIVersion is the apiVersion of what `rollout plan -o json|yaml`
// prints. The schema is versioned: fields may be added within a version,
// none is removed or changes meaning; plan.schema.json beside it is its JSON
// Schema.
const PlanAPIVersion = "rollout.rollout-guard.io/v1alpha1"

// PlanKind is the kind of what `rollout plan -o json|yaml` prints.
const PlanKind = "RolloutPlan"

// The effects of a planned change on one object (ObjectPlan.Effect).
const (
	// EffectRollout: the change replaces machines.
	EffectRollout = "rollout"
	// EffectInPlace: Cluster API applies the change to the existing
	// machines (labels, annotations, readiness gates, timeouts, ...).
	EffectInPlace = "in-place"
	// EffectRestart: spec.rollout.after, every machine created before it
	// is replaced.
	EffectRestart = "restart"
	// EffectUpgrade: a ClusterClass cluster's spec.topology.version; the
	// topology controller carries it out in Steps.
	EffectUpgrade = "upgrade"
	// EffectNone: nothing a rollout is made of changes.
	EffectNone = "none"
	// EffectCreate: the object does not exist yet (-f), or the topology
	// controller would create it (a worker pool added).
	EffectCreate = "create"
	// EffectDelete: the topology controller would delete it (a worker pool
	// removed from the topology), and with it its machines.
	EffectDelete = "delete"
)

// The actions on one machine (PlanMachine.Action).
const (
	// ActionReplace: the machine is deleted and a new one created.
	ActionReplace = "replace"
	// ActionInPlace: the machine is kept and updated in place.
	ActionInPlace = "in-place"
	// ActionUntouched: the change does not concern the machine.
	ActionUntouched = "untouched"
	// ActionDelete: the machine is deleted and none replaces it (its
	// worker pool is removed).
	ActionDelete = "delete"
)

// The kinds of holds (PlanHold.Kind).
const (
	// HoldPaused: the object or its Cluster is paused; nothing rolls out
	// until it is resumed.
	HoldPaused = "Paused"
	// HoldPreflightCheck: a Cluster API MachineSet preflight check would
	// keep new machines from being created (Check names it).
	HoldPreflightCheck = "PreflightCheck"
	// HoldControlPlaneChecks: the KubeadmControlPlane's own checks before it
	// creates or deletes a machine would wait (machines being deleted,
	// unhealthy components or etcd members).
	HoldControlPlaneChecks = "ControlPlaneChecks"
	// HoldUpgradeInProgress: a rollout or upgrade is still running; the
	// change waits for it, or (a ClusterClass cluster) is refused until it
	// is done.
	HoldUpgradeInProgress = "UpgradeInProgress"
	// HoldTopology: a topology annotation defers or holds the upgrade of a
	// worker pool, or the topology controller would revert a direct edit.
	HoldTopology = "Topology"
	// HoldOnDelete: the rollout strategy is OnDelete: machines are replaced
	// only when someone deletes them.
	HoldOnDelete = "OnDelete"
)

// RolloutPlan is what `rollout plan -o json|yaml` prints: what one change
// would do, object by object, computed without changing anything.
// +kubebuilder:object:root=true
type RolloutPlan struct {
	metav1.TypeMeta `json:",inline"`
	// Change is the change as asked: the command line without its
	// connection flags, e.g. "rollout plan md/md-0 --template
	// devmachinetemplate/md-0-v2".
	Change string `json:"change"`
	// Admitted is true when the API server admitted the change of every
	// object in the server-side dry run.
	Admitted bool `json:"admitted"`
	// ReplacesMachines is true when the change of any object replaces at
	// least one machine.
	ReplacesMachines bool `json:"replacesMachines"`
	// Objects are the objects the change touches, in order: for a Cluster,
	// the Cluster, then its control plane and worker pools; for a change
	// the topology controller carries out (a ClusterClass, a Cluster's class
	// or variables), each object it would change, cluster by cluster.
	Objects []ObjectPlan `json:"objects"`
	// Clusters are, for a change the topology controller carries out, the
	// Clusters it concerns, one entry each, in the order of Objects.
	Clusters []ClusterPlan `json:"clusters,omitempty"`
	// Fleet sums Clusters; nil when Clusters is empty.
	Fleet *FleetTotals `json:"fleet,omitempty"`
}

// The results of a Cluster's plan (ClusterPlan.Result).
const (
	// PlanClusterChanged: the topology controller would change some of its
	// objects, all admitted.
	PlanClusterChanged = "changed"
	// PlanClusterUnchanged: the topology controller would change nothing that
	// its machines are made of.
	PlanClusterUnchanged = "unchanged"
	// PlanClusterRefused: a write of the topology controller would be refused
	// (Reason says by whom and why); the controller stops there, as it
	// would on the real change.
	PlanClusterRefused = "refused"
	// PlanClusterNotComputed: what the topology controller would do could not
	// be computed (Reason says why: a template missing, an extension the
	// preview does not call); it is not counted as unchanged.
	PlanClusterNotComputed = "not-computed"
)

// ClusterPlan is what a change the topology controller carries out does to
// one Cluster, computed by Cluster API's own topology reconciler run with
// every write a server-side dry run.
type ClusterPlan struct {
	// Cluster is the Cluster.
	Cluster PlanObjectRef `json:"cluster"`
	// Class is its ClusterClass after the change, "NAMESPACE/NAME".
	Class string `json:"class"`
	// Result is PlanClusterChanged, PlanClusterUnchanged, PlanClusterRefused or
	// PlanClusterNotComputed.
	Result string `json:"result"`
	// Reason says why it is refused or not computed, in the words of who
	// refused it or of Cluster API.
	Reason string `json:"reason,omitempty"`
	// Objects are the objects of Objects that belong to this Cluster,
	// "kubeadmcontrolplane/NAME", "machinedeployment/NAME".
	Objects []string `json:"objects"`
	// TemplatesRotated are the templates the topology controller would
	// create in place of changed ones, "KIND/OLD → KIND (new)".
	TemplatesRotated []string `json:"templatesRotated"`
	// ControlPlaneReplace and WorkerReplace count the machines replaced.
	ControlPlaneReplace int `json:"controlPlaneReplace"`
	WorkerReplace       int `json:"workerReplace"`
	// Counts sum the machines of its objects by action.
	Counts PlanCounts `json:"counts"`
}

// FleetTotals sum the Clusters of a plan.
type FleetTotals struct {
	// Clusters is how many Clusters the change concerns.
	Clusters int `json:"clusters"`
	// Changed, Unchanged, Refused and NotComputed count them by Result.
	Changed     int `json:"changed"`
	Unchanged   int `json:"unchanged"`
	Refused     int `json:"refused"`
	NotComputed int `json:"notComputed"`
	// ControlPlaneReplace and WorkerReplace count the machines replaced.
	ControlPlaneReplace int `json:"controlPlaneReplace"`
	WorkerReplace       int `json:"workerReplace"`
}

// PlanObjectRef names an object of a plan.
type PlanObjectRef struct {
	// Kind is MachineDeployment, KubeadmControlPlane, MachinePool, Cluster
	// or ClusterClass.
	Kind string `json:"kind"`
	// Namespace is the object's namespace.
	Namespace string `json:"namespace"`
	// Name is the object's name.
	Name string `json:"name"`
}

// String is "kubeadmcontrolplane/NAME".
func (r PlanObjectRef) String() string {
	return strings.ToLower(r.Kind) + "/" + r.Name
}

// ObjectPlan is what the change does to one object.
type ObjectPlan struct {
	// Object is the object.
	Object PlanObjectRef `json:"object"`
	// EditedThrough is the object the edit is sent to when it is not Object
	// itself: the Cluster of a topology-managed object, or of a control
	// plane and worker pools the topology controller upgrades; the
	// ClusterClass whose edit the topology controller carries out.
	EditedThrough *PlanObjectRef `json:"editedThrough,omitempty"`
	// Effect is EffectRollout, EffectInPlace, EffectRestart, EffectUpgrade,
	// EffectNone, EffectCreate or EffectDelete.
	Effect string `json:"effect"`
	// Summary is the change on one line, e.g. "version v1.34.3 → v1.35.2".
	Summary string `json:"summary"`
	// Verdict is the API server's answer to the server-side dry run.
	Verdict PlanVerdict `json:"verdict"`
	// Changes are the fields that change, in the names of rollout history
	// --diff (relative to spec.template.spec of a MachineDeployment and to
	// spec.machineTemplate.spec of a KubeadmControlPlane).
	Changes []PlanFieldChange `json:"changes"`
	// Strategy is how Cluster API replaces the machines; nil when none is
	// replaced.
	Strategy *PlanStrategy `json:"strategy,omitempty"`
	// StepsFrom says where the steps of a topology upgrade come from:
	// "ClusterClass NAME spec.kubernetesVersions", "upgrade-plan extension
	// NAME of ClusterClass NAME, which decides the steps when the upgrade
	// starts: ..." (Steps then holds the target only), "Cluster API's
	// one-minor upgrade: ...", or "" for a change of one object.
	StepsFrom string `json:"stepsFrom,omitempty"`
	// Steps are the versions the control plane and the workers go through,
	// in order; empty when the Kubernetes version does not change.
	Steps []PlanStep `json:"steps"`
	// Machines are the object's machines (for a Cluster: of its control
	// plane and worker pools), with what the change does to each.
	Machines []PlanMachine `json:"machines"`
	// Counts sum Machines by action.
	Counts PlanCounts `json:"counts"`
	// Holds are what would keep the change from rolling out once admitted.
	Holds []PlanHold `json:"holds"`
	// Duration is how long the rollout may take, from the object's history.
	Duration PlanDuration `json:"duration"`
}

// PlanVerdict is the API server's answer to the change, sent as a
// server-side dry run: rollout-guard's webhooks and Cluster API's answer as
// they would to the real change, and nothing is stored or recorded.
type PlanVerdict struct {
	// Admitted is true when the API server would store the change.
	Admitted bool `json:"admitted"`
	// RefusedBy is "rollout-guard", "Cluster API" or "API server" when
	// refused. Admission webhooks are called in parallel: when several
	// refuse, the API server returns one answer.
	RefusedBy string `json:"refusedBy,omitempty"`
	// Webhook is the admission webhook that refused, e.g.
	// "validate.kubeadmcontrolplane.rollout-guard.io".
	Webhook string `json:"webhook,omitempty"`
	// Rules are the ids of rollout-guard's rules that refused, e.g.
	// "ControlPlaneDowngrade".
	Rules []string `json:"rules,omitempty"`
	// Message is the refusal as the API server returned it.
	Message string `json:"message,omitempty"`
	// Causes are the refusal's causes, one per field, "FIELD: Reason:
	// detail" (e.g. "spec.version: Forbidden: ..."), when the answer lists
	// them.
	Causes []string `json:"causes,omitempty"`
	// Warnings are the warnings the API server returned (rollout-guard's
	// among them, e.g. the steps of a chained upgrade).
	Warnings []string `json:"warnings,omitempty"`
	// Local is true when the verdict is rollout-guard's policy evaluated
	// by the CLI (plan --local, or a plan whose server-side dry run was not
	// permitted) on the facts the guard reads: the admission webhooks and
	// the API server's validation were not asked. The other parts of the
	// plan are the same as with a dry run.
	Local bool `json:"local,omitempty"`
}

// PlanFieldChange is one field that changes.
type PlanFieldChange struct {
	// Path is the field, e.g. "infrastructureRef", "version",
	// "metadata.labels.team".
	Path string `json:"path"`
	// From is the live value, "" when absent.
	From string `json:"from,omitempty"`
	// To is the planned value, "" when removed.
	To string `json:"to,omitempty"`
	// RollsOut is true when this field's change replaces machines.
	RollsOut bool `json:"rollsOut"`
}

// PlanStrategy is the rollout strategy that applies.
type PlanStrategy struct {
	// Type is RollingUpdate or OnDelete.
	Type string `json:"type"`
	// MaxSurge is how many machines may be created above the desired
	// number ("1", "25%").
	MaxSurge string `json:"maxSurge"`
	// MaxUnavailable is how many machines may be unavailable during the
	// rollout (MachineDeployment); "" for a KubeadmControlPlane.
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	// DeletionOrder is which old machines go first: Random, Newest or
	// Oldest (a MachineDeployment's spec.deletion.order; a
	// KubeadmControlPlane deletes the oldest machine).
	DeletionOrder string `json:"deletionOrder"`
	// Description says it in words.
	Description string `json:"description"`
}

// PlanStep is one step of an upgrade: the control plane or the workers
// going to one version.
type PlanStep struct {
	// Part is "controlPlane" or "workers".
	Part string `json:"part"`
	// Version is the Kubernetes version of the step.
	Version string `json:"version"`
	// Etcd is the etcd version the control plane runs after the step
	// (control-plane steps; "" when unknown).
	Etcd string `json:"etcd,omitempty"`
	// EtcdSource says where Etcd comes from: "imageTag 3.6.5-0" (pinned)
	// or "kubeadm's default for v1.35.2".
	EtcdSource string `json:"etcdSource,omitempty"`
	// Objects are the objects the step changes, "kubeadmcontrolplane/NAME"
	// or "machinedeployment/NAME".
	Objects []string `json:"objects"`
	// Machines is how many machines the step replaces.
	Machines int `json:"machines"`
}

// PlanMachine is one machine and what the change does to it.
type PlanMachine struct {
	// Name is the Machine's name.
	Name string `json:"name"`
	// Object is the object that owns it: "kubeadmcontrolplane/NAME" or
	// "machinedeployment/NAME".
	Object string `json:"object"`
	// MachineSet is the MachineSet it belongs to (worker machines).
	MachineSet string `json:"machineSet,omitempty"`
	// Version is its spec.version.
	Version string `json:"version"`
	// Action is ActionReplace, ActionInPlace or ActionUntouched.
	Action string `json:"action"`
	// Reason says why, e.g. "infrastructureRef DevMachineTemplate/md-0 →
	// DevMachineTemplate/md-0-v2", "created before spec.rollout.after".
	Reason string `json:"reason,omitempty"`
	// InPlaceIfAccepted, on a machine to be replaced, names the Runtime
	// Extension handlers registered for the hook Cluster API asks before it
	// updates such a machine in place (CanUpdateMachine for a control
	// plane, CanUpdateMachineSet for a MachineDeployment), comma-separated:
	// with Cluster API's InPlaceUpdates feature gate, the machine is
	// updated in place if one of them accepts the change, otherwise
	// replaced. Empty when no such handler is registered.
	InPlaceIfAccepted string `json:"inPlaceIfAccepted,omitempty"`
}

// PlanCounts count machines by action.
type PlanCounts struct {
	// Replace is how many machines are replaced.
	Replace int `json:"replace"`
	// InPlace is how many are updated in place.
	InPlace int `json:"inPlace"`
	// Untouched is how many the change does not concern.
	Untouched int `json:"untouched"`
	// Delete is how many are deleted with their worker pool.
	Delete int `json:"delete,omitempty"`
}

// PlanHold is one thing that would keep the change from rolling out once
// admitted.
type PlanHold struct {
	// Kind is HoldPaused, HoldPreflightCheck, HoldControlPlaneChecks,
	// HoldUpgradeInProgress, HoldTopology or HoldOnDelete.
	Kind string `json:"kind"`
	// Check is the Cluster API preflight check that would fail
	// (KubernetesVersionSkew, KubeadmVersionSkew, ControlPlaneIsStable,
	// ControlPlaneVersionSkew), or the annotation or condition that holds.
	Check string `json:"check,omitempty"`
	// Object is the object that holds it, "cluster/NAME",
	// "kubeadmcontrolplane/NAME", "machinedeployment/NAME".
	Object string `json:"object"`
	// Message says what holds it and the way out.
	Message string `json:"message"`
}

// PlanDuration is how long the rollout may take, from the object's
// recorded history.
type PlanDuration struct {
	// Known is false when the history holds no rollout to learn from.
	Known bool `json:"known"`
	// PerMachine is the median time one machine took in the object's last
	// recorded rollout (a Go duration, e.g. "41s").
	PerMachine string `json:"perMachine,omitempty"`
	// Estimate is PerMachine times the machines this change replaces.
	Estimate string `json:"estimate,omitempty"`
	// Basis says what it was learnt from, or why it is unknown.
	Basis string `json:"basis"`
}
