package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The parts of a topology upgrade (UpgradeStep.Part).
const (
	// PartControlPlane is the Cluster's control plane.
	PartControlPlane = "controlPlane"
	// PartWorkers are the topology's MachineDeployments.
	PartWorkers = "workers"
)

// The states of an upgrade step (UpgradeStep.State).
const (
	// StepRolledOut: every object of the part has the step's version (or a
	// later one) in its spec, and every one at it runs it on all its
	// machines and is rolled out.
	StepRolledOut = "RolledOut"
	// StepRollingOut: some objects of the part have the step's version, not
	// all of them rolled it out yet.
	StepRollingOut = "RollingOut"
	// StepPending: no object of the part has the step's version yet; the
	// topology controller applies it when the steps before it are done.
	StepPending = "Pending"
)

// UpgradeStatus is where a ClusterClass cluster stands against its
// spec.topology.version: `rollout status cluster/NAME -o json` prints it as
// "upgrade" on the cluster's events.
//
// Cluster API (v1.12 and later) upgrades a topology in steps: the control
// plane one minor at a time (or along the versions of the ClusterClass's
// kubernetesVersions, or of an upgrade-plan extension), and the workers only
// when the version skew requires it and at the end. While an upgrade runs,
// the topology controller writes the versions still to be applied in
// Cluster.status.controlPlane.upgradePlan and status.workers.upgradePlan.
type UpgradeStatus struct {
	// Version is the Cluster's spec.topology.version: where the upgrade ends.
	Version string `json:"version"`
	// Reached reports that the control plane (its spec.version and every
	// one of its machines) and every MachineDeployment of the topology (its
	// spec.template.spec.version and every one of its machines) are at
	// Version, and that every MachineDeployment of the topology exists.
	Reached bool `json:"reached"`
	// ControlPlane is the control plane's version and its machines';
	// nil while the Cluster has none yet.
	ControlPlane *PartVersion `json:"controlPlane,omitempty"`
	// Workers are the versions of the topology's MachineDeployments and of
	// their machines, by name.
	Workers []PartVersion `json:"workers"`
	// ControlPlanePlan and WorkersPlan are the Cluster's
	// status.controlPlane.upgradePlan and status.workers.upgradePlan, as the
	// topology controller last wrote them: the versions it still has to
	// apply, in order. Empty when no upgrade is in progress.
	ControlPlanePlan []string `json:"controlPlanePlan,omitempty"`
	WorkersPlan      []string `json:"workersPlan,omitempty"`
	// Steps are the steps of the upgrade in order, from where the control
	// plane and the workers stand now to Version; the current one is the
	// first that is not rolled out.
	Steps []UpgradeStep `json:"steps"`
	// Missing are the MachineDeployment topologies
	// (spec.topology.workers.machineDeployments[].name) that have no
	// MachineDeployment yet.
	Missing []string `json:"missing,omitempty"`
	// TopologyReconciled is the Cluster's TopologyReconciled condition,
	// "Reason: message", when it is not True (an upgrade in progress, a
	// lifecycle hook or a defer annotation holding it).
	TopologyReconciled string `json:"topologyReconciled,omitempty"`
}

// PartVersion is the version of the control plane or of one worker pool,
// and the versions its machines run.
type PartVersion struct {
	// Object is "kubeadmcontrolplane/NAME" or "machinedeployment/NAME".
	Object string `json:"object"`
	// Topology is a MachineDeployment's name in
	// spec.topology.workers.machineDeployments.
	Topology string `json:"topology,omitempty"`
	// Version is its spec.version (control plane) or
	// spec.template.spec.version (MachineDeployment).
	Version string `json:"version"`
	// Machines count its machines by their spec.version, oldest first.
	Machines []VersionCount `json:"machines"`
}

// VersionCount is how many machines run one version.
type VersionCount struct {
	Version  string `json:"version"`
	Machines int    `json:"machines"`
}

// UpgradeStep is one step of a topology upgrade: the control plane or the
// workers going to one version.
type UpgradeStep struct {
	// Version is the Kubernetes version of the step.
	Version string `json:"version"`
	// Part is PartControlPlane or PartWorkers.
	Part string `json:"part"`
	// State is StepRolledOut, StepRollingOut or StepPending.
	State string `json:"state"`
	// Current marks the step the upgrade is at: the first one that is not
	// rolled out.
	Current bool `json:"current,omitempty"`
	// Objects is how many objects the part has: 1 for the control plane,
	// the MachineDeployments of the topology (created or not) for the
	// workers.
	Objects int `json:"objects"`
	// Applied is how many of them have the step's version, or a later one,
	// in their spec.
	Applied int `json:"applied"`
	// RolledOut is how many of them rolled it out (or went past it).
	RolledOut int `json:"rolledOut"`
}

// ClusterReport is the state of a ClusterClass cluster's rollout at one
// moment: the Cluster's own report (object "cluster/NAME", its Upgrade set,
// the counts summed over its objects) and the reports of its control plane
// and MachineDeployments.
type ClusterReport struct {
	// Cluster is the report the verdict is about.
	Cluster StatusReport
	// Objects are the control plane, then the MachineDeployments by name.
	Objects []StatusReport
}

// partFacts is what the upgrade steps are computed from, for one object.
type partFacts struct {
	// object is "kubeadmcontrolplane/NAME" or "machinedeployment/NAME".
	object string
	// topology is a MachineDeployment's topology name.
	topology string
	// version is the object's spec version.
	version string
	// machines are the spec.version of each of its machines.
	machines []string
	// complete is the object's rollout is complete (StatusReport.Complete).
	complete bool
}

// EvaluateTopology computes the state of the rollout of a ClusterClass
// cluster from its Cluster, its KubeadmControlPlane (nil before the
// topology controller created it), its MachineDeployments, and the Machines
// and MachineSets of the cluster.
//
// The cluster is complete only when every object is complete (as
// EvaluateStatus decides) and its spec.topology.version is reached: by the
// control plane's spec.version and every one of its machines, and by every
// MachineDeployment of the topology. During a chained upgrade an
// intermediate step rolled out is therefore not the end.
func EvaluateTopology(cluster *clusterv1.Cluster, cp *controlplanev1.KubeadmControlPlane, mds []clusterv1.MachineDeployment, machines []clusterv1.Machine, sets []clusterv1.MachineSet) ClusterReport {
	return evaluateTopology(cluster, cp, mds, machines, sets, time.Now())
}

// evaluateTopology is EvaluateTopology at the local time now.
func evaluateTopology(cluster *clusterv1.Cluster, cp *controlplanev1.KubeadmControlPlane, mds []clusterv1.MachineDeployment, machines []clusterv1.Machine, sets []clusterv1.MachineSet, now time.Time) ClusterReport {
	r := ClusterReport{}
	var (
		cpFacts *partFacts
		pools   []partFacts
	)
	if cp != nil {
		own := machinesWithLabel(machines, clusterv1.MachineControlPlaneNameLabel, cp.Name)
		s := evaluateStatus(cp, own, nil, now)
		r.Objects = append(r.Objects, s)
		cpFacts = &partFacts{object: s.Object, version: cp.Spec.Version, machines: machineVersions(own), complete: s.Complete}
	}
	sorted := append([]clusterv1.MachineDeployment(nil), mds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	created := map[string]bool{}
	for i := range sorted {
		md := &sorted[i]
		own := machinesWithLabel(machines, clusterv1.MachineDeploymentNameLabel, md.Name)
		var ownSets []clusterv1.MachineSet
		for _, ms := range sets {
			if ms.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name {
				ownSets = append(ownSets, ms)
			}
		}
		s := evaluateStatus(md, own, ownSets, now)
		if !md.DeletionTimestamp.IsZero() {
			// The topology removed it (or someone deletes it): the cluster
			// is not rolled out until it is gone.
			s.deleting, s.Complete = true, false
		}
		r.Objects = append(r.Objects, s)
		if !topologyOwned(md) || !md.DeletionTimestamp.IsZero() {
			// A pool added by hand, or one the topology removed: it counts
			// for done, not for the upgrade.
			continue
		}
		created[topologyName(md)] = true
		pools = append(pools, partFacts{object: s.Object, topology: topologyName(md), version: md.Spec.Template.Spec.Version, machines: machineVersions(own), complete: s.Complete})
	}
	var missing []string
	for _, t := range cluster.Spec.Topology.Workers.MachineDeployments {
		if !created[t.Name] {
			missing = append(missing, t.Name)
		}
	}
	var cpPlan, workersPlan []string
	if st := cluster.Status.ControlPlane; st != nil {
		for _, v := range st.UpgradePlan {
			cpPlan = append(cpPlan, v.Version)
		}
	}
	if st := cluster.Status.Workers; st != nil {
		for _, v := range st.UpgradePlan {
			workersPlan = append(workersPlan, v.Version)
		}
	}
	u := upgradeOf(cluster.Spec.Topology.Version, cpPlan, workersPlan, cpFacts, pools, missing)
	if c := apimeta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition); c != nil && c.Status != metav1.ConditionTrue {
		u.TopologyReconciled = strings.TrimSuffix(c.Reason+": "+conditionLine(c.Message), ": ")
	}

	s := StatusReport{Object: Cluster.Singular() + "/" + cluster.Name, Generation: cluster.Generation, Observed: true, Upgrade: &u, Machines: []MachineStatus{}}
	s.Paused = pausedBy(cluster)
	complete := u.Reached
	var key strings.Builder
	for _, o := range r.Objects {
		s.Replicas += o.Replicas
		s.Current += o.Current
		s.UpToDate += o.UpToDate
		s.Available += o.Available
		s.Ready += o.Ready
		complete = complete && o.Complete
		if s.Paused == "" && o.Paused != "" {
			s.Paused = o.Object + ": " + o.Paused
		}
		key.WriteString(progressKey(o) + "\n")
	}
	for _, st := range u.Steps {
		if st.State != StepRolledOut {
			complete = false
		}
		fmt.Fprintf(&key, "%s %s %s %d %d;", st.Version, st.Part, st.State, st.Applied, st.RolledOut)
	}
	fmt.Fprintf(&key, "%s %v", u.Version, u.Missing)
	s.progress = key.String()
	s.Complete = complete
	r.Cluster = s
	return r
}

// machinesWithLabel returns the machines whose label key is value.
func machinesWithLabel(machines []clusterv1.Machine, key, value string) []clusterv1.Machine {
	var out []clusterv1.Machine
	for _, m := range machines {
		if m.Labels[key] == value {
			out = append(out, m)
		}
	}
	return out
}

// machineVersions lists the spec.version of each machine.
func machineVersions(machines []clusterv1.Machine) []string {
	out := make([]string, 0, len(machines))
	for _, m := range machines {
		out = append(out, m.Spec.Version)
	}
	return out
}
