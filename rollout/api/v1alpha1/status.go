package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusAPIVersion is the apiVersion of what `rollout status` prints for a
// fleet with -o json (rollout status clusterclass/NAME, or cluster with
// -l SELECTOR or -A).
const StatusAPIVersion = "rollout.rollout-guard.io/v1alpha1"

// ClusterStatusKind and FleetStatusKind are the kinds of what `rollout
// status` prints for a fleet with -o json: a ClusterRolloutStatus each time
// a cluster's state changes, and a FleetRolloutStatus with the totals when
// the watch ends (or the one read of --watch=false is done).
const (
	ClusterStatusKind = "ClusterRolloutStatus"
	FleetStatusKind   = "FleetRolloutStatus"
)

// The states of a cluster in a fleet (ClusterRolloutStatus.State), worst
// first: the order `rollout status` groups them in.
const (
	// ClusterRefused: the topology controller's last write to one of the
	// cluster's objects was refused by an admission webhook or an
	// admission policy (the Cluster's TopologyReconciled condition is
	// False with reason ReconcileFailed and the refusal as its message).
	ClusterRefused = "Refused"
	// ClusterStalled: the cluster's rollout made no progress for
	// --progress-deadline.
	ClusterStalled = "Stalled"
	// ClusterPaused: the Cluster, or one of its objects, is paused.
	ClusterPaused = "Paused"
	// ClusterRolling: the cluster's rollout is not done.
	ClusterRolling = "Rolling"
	// ClusterUpToDate: the cluster is rolled out: every object observed its
	// generation, every machine is up to date and ready, and the topology
	// controller reconciled the Cluster's generation and reached
	// spec.topology.version.
	ClusterUpToDate = "UpToDate"
)

// ClusterRolloutStatus is one cluster of a fleet at one moment, as `rollout
// status clusterclass/NAME -o json` prints it, one JSON object a line.
// +kubebuilder:object:root=true
type ClusterRolloutStatus struct {
	metav1.TypeMeta `json:",inline"`
	// Time is when the state was read.
	Time metav1.Time `json:"time"`
	// Cluster is the Cluster.
	Cluster FleetClusterRef `json:"cluster"`
	// ClusterClass is the ClusterClass of the Cluster's topology,
	// "NAMESPACE/NAME"; "" for a Cluster without a topology.
	ClusterClass string `json:"clusterClass,omitempty"`
	// State is one of ClusterRefused, ClusterStalled, ClusterPaused,
	// ClusterRolling or ClusterUpToDate.
	State string `json:"state"`
	// Final reports that the state is the cluster's verdict for this watch:
	// up to date (and held for --grace), stalled, paused or refused.
	Final bool `json:"final"`
	// Reason says why the cluster is in its state: the refusal, what
	// stalled, how it is paused, what is still rolling; "" when up to date.
	Reason string `json:"reason,omitempty"`
	// Version is the Cluster's spec.topology.version, "" without a
	// topology.
	Version string `json:"version,omitempty"`
	// Machines count the cluster's machines.
	Machines FleetMachineCounts `json:"machines"`
	// Rolling are the cluster's control plane and worker pools whose
	// rollout is not done, in the cluster's order.
	Rolling []FleetObjectStatus `json:"rolling,omitempty"`
	// Wave is the Cluster's label rollout-guard.io/wave, "" without it.
	Wave string `json:"wave,omitempty"`
	// HeldBy is what the Runtime Extensions' lifecycle hooks that hold the
	// Cluster's topology say, as Cluster API writes it into the
	// TopologyReconciled condition ("BeforeClusterUpgrade: MESSAGE"); ""
	// when none holds it.
	HeldBy string `json:"heldBy,omitempty"`
}

// FleetClusterRef names a Cluster.
type FleetClusterRef struct {
	// Namespace and Name are the Cluster's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// FleetMachineCounts count a cluster's machines, or one object's.
type FleetMachineCounts struct {
	// Desired is the sum of spec.replicas.
	Desired int32 `json:"desired"`
	// UpToDate is how many machines are up to date and stay (none of an
	// old MachineSet, none being deleted), from the Machines themselves;
	// for a MachinePool without Machines, its status count.
	UpToDate int32 `json:"upToDate"`
	// Available is the sum of the status counts of available replicas.
	Available int32 `json:"available"`
	// Old is how many machines are to be replaced (of an old MachineSet,
	// out of date, or being deleted).
	Old int32 `json:"old"`
}

// FleetObjectStatus is one object of a cluster whose rollout is not done.
type FleetObjectStatus struct {
	// Object is "kubeadmcontrolplane/NAME", "machinedeployment/NAME" or
	// "machinepool/NAME".
	Object string `json:"object"`
	// Part is "controlPlane" or "workers".
	Part string `json:"part"`
	// Machines count its machines.
	Machines FleetMachineCounts `json:"machines"`
}

// FleetRolloutStatus is a fleet's totals, as `rollout status
// clusterclass/NAME -o json` prints them last.
// +kubebuilder:object:root=true
type FleetRolloutStatus struct {
	metav1.TypeMeta `json:",inline"`
	// Time is when the state was read.
	Time metav1.Time `json:"time"`
	// Fleet names what was watched: "clusterclass/NAME", "cluster -l
	// SELECTOR", "cluster -A".
	Fleet string `json:"fleet"`
	// Clusters is how many clusters the fleet has.
	Clusters int `json:"clusters"`
	// Refused, Stalled, Paused, Rolling and UpToDate count the clusters
	// in each state.
	Refused  int `json:"refused"`
	Stalled  int `json:"stalled"`
	Paused   int `json:"paused"`
	Rolling  int `json:"rolling"`
	UpToDate int `json:"upToDate"`
	// Done reports that every cluster is up to date.
	Done bool `json:"done"`
}
