package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
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
	// one of its machines) and every MachineDeployment and MachinePool of
	// the topology (its spec.template.spec.version and every one of its
	// machines) are at Version, and that every one of them exists.
	Reached bool `json:"reached"`
	// ControlPlane is the control plane's version and its machines';
	// nil while the Cluster has none yet.
	ControlPlane *PartVersion `json:"controlPlane,omitempty"`
	// Workers are the versions of the topology's MachineDeployments, then
	// of its MachinePools, and of their machines, by name.
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
	// MissingMachinePools are the MachinePool topologies
	// (spec.topology.workers.machinePools[].name) that have no MachinePool
	// yet.
	MissingMachinePools []string `json:"missingMachinePools,omitempty"`
	// TopologyReconciled is the Cluster's TopologyReconciled condition,
	// "Reason: message", when it is not True (an upgrade in progress, a
	// lifecycle hook or a defer annotation holding it).
	TopologyReconciled string `json:"topologyReconciled,omitempty"`
}

// PartVersion is the version of the control plane or of one worker pool,
// and the versions its machines run.
type PartVersion struct {
	// Object is "kubeadmcontrolplane/NAME", "machinedeployment/NAME" or
	// "machinepool/NAME".
	Object string `json:"object"`
	// Topology is a MachineDeployment's name in
	// spec.topology.workers.machineDeployments, or a MachinePool's in
	// spec.topology.workers.machinePools.
	Topology string `json:"topology,omitempty"`
	// Version is its spec.version (control plane) or
	// spec.template.spec.version (MachineDeployment, MachinePool).
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
	// the MachineDeployments and MachinePools of the topology (created or
	// not) for the workers.
	Objects int `json:"objects"`
	// Applied is how many of them have the step's version, or a later one,
	// in their spec.
	Applied int `json:"applied"`
	// RolledOut is how many of them rolled it out (or went past it).
	RolledOut int `json:"rolledOut"`
}

// ClusterReport is the state of a ClusterClass cluster's rollout at one
// moment: the Cluster's own report (object "cluster/NAME", its Upgrade set,
// the counts summed over its objects) and the reports of its control
// plane, MachineDeployments and MachinePools.
type ClusterReport struct {
	// Cluster is the report the verdict is about.
	Cluster StatusReport
	// Objects are the control plane, then the MachineDeployments by name,
	// then the MachinePools by name.
	Objects []StatusReport
}

// TopologyObjects are the objects of a ClusterClass cluster that its
// rollout is evaluated from.
type TopologyObjects struct {
	// ControlPlane is its KubeadmControlPlane, nil before the topology
	// controller created it.
	ControlPlane *controlplanev1.KubeadmControlPlane
	// MachineDeployments and MachinePools are its worker pools (a
	// management cluster that serves no MachinePools has none).
	MachineDeployments []clusterv1.MachineDeployment
	MachinePools       []clusterv1.MachinePool
	// Machines and MachineSets are the cluster's.
	Machines    []clusterv1.Machine
	MachineSets []clusterv1.MachineSet
}

// PartFacts is what the upgrade steps are computed from, for one object.
type PartFacts struct {
	// Object is "kubeadmcontrolplane/NAME", "machinedeployment/NAME" or
	// "machinepool/NAME".
	Object string
	// Topology is a worker pool's topology name.
	Topology string
	// Version is the object's spec version.
	Version string
	// Machines are the spec.version of each of its machines.
	Machines []string
	// Complete is the object's rollout is complete (StatusReport.Complete).
	Complete bool
}

// EvaluateTopology computes the state of the rollout of a ClusterClass
// cluster from its Cluster and its objects.
//
// The cluster is complete only when every object is complete (as
// EvaluateStatus decides) and its spec.topology.version is reached: by the
// control plane's spec.version and every one of its machines, and by every
// MachineDeployment and MachinePool of the topology; and the topology
// controller has reconciled the Cluster's generation (a variable or class
// change rotates templates only once it has). During a chained upgrade an
// intermediate step rolled out is therefore not the end.
func EvaluateTopology(cluster *clusterv1.Cluster, objs TopologyObjects) ClusterReport {
	return EvaluateTopologyAt(cluster, objs, time.Now())
}

// EvaluateTopologyAt is EvaluateTopology at the local time now.
func EvaluateTopologyAt(cluster *clusterv1.Cluster, objs TopologyObjects, now time.Time) ClusterReport {
	r := ClusterReport{}
	var cpFacts *PartFacts
	if cp := objs.ControlPlane; cp != nil {
		var s StatusReport
		s, cpFacts = evaluateControlPlane(cp, objs.Machines, now)
		r.Objects = append(r.Objects, s)
	}
	mds, mps := evaluateMachineDeployments(objs, now), evaluateMachinePools(objs, now)
	r.Objects = append(append(r.Objects, mds.reports...), mps.reports...)
	pools := append(mds.facts, mps.facts...)
	workers := cluster.Spec.Topology.Workers
	missing := missingWorkers(workers.MachineDeployments, func(t clusterv1.MachineDeploymentTopology) string { return t.Name }, mds.created)
	missingMPs := missingWorkers(workers.MachinePools, func(t clusterv1.MachinePoolTopology) string { return t.Name }, mps.created)
	cpPlan, workersPlan := upgradePlans(cluster)
	u := UpgradeOf(cluster.Spec.Topology.Version, cpPlan, workersPlan, cpFacts, pools, missing, missingMPs)
	u.TopologyReconciled = topologyReconciled(cluster)
	r.Cluster = clusterStatus(cluster, r.Objects, &u)
	return r
}

// evaluateControlPlane reports on a topology's control plane, and gives
// its facts for the upgrade steps.
func evaluateControlPlane(cp *controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine, now time.Time) (StatusReport, *PartFacts) {
	own := core.MachinesWithLabel(machines, clusterv1.MachineControlPlaneNameLabel, cp.Name)
	s := EvaluateStatusAt(cp, own, nil, now)
	return s, &PartFacts{Object: s.Object, Version: cp.Spec.Version, Machines: machineVersions(own), Complete: s.Complete}
}

// evaluatePool reports on one worker pool, and gives its facts when the
// topology owns it (one added by hand, or one the topology removed, counts
// for done, not for the upgrade); nil facts otherwise.
func evaluatePool(obj client.Object, version string, own []clusterv1.Machine, sets []clusterv1.MachineSet, now time.Time) (StatusReport, *PartFacts) {
	s := EvaluateStatusAt(obj, own, sets, now)
	deleting := !obj.GetDeletionTimestamp().IsZero()
	if deleting {
		// The topology removed it (or someone deletes it): the cluster
		// is not rolled out until it is gone.
		s.deleting, s.Complete = true, false
	}
	if !core.TopologyOwned(obj) || deleting {
		return s, nil
	}
	return s, &PartFacts{Object: s.Object, Topology: core.TopologyName(obj), Version: version, Machines: machineVersions(own), Complete: s.Complete}
}

// poolReports gather a topology's worker pools of one kind: the report of
// each, the facts of those the topology owns, and the topology names of
// those it has created.
type poolReports struct {
	reports []StatusReport
	facts   []PartFacts
	created map[string]bool
}

// add evaluates one pool (evaluatePool) into p.
func (p *poolReports) add(obj client.Object, version string, own []clusterv1.Machine, sets []clusterv1.MachineSet, now time.Time) {
	s, f := evaluatePool(obj, version, own, sets, now)
	p.reports = append(p.reports, s)
	if f != nil {
		p.facts = append(p.facts, *f)
		p.created[core.TopologyName(obj)] = true
	}
}

// evaluateMachineDeployments evaluates the topology's MachineDeployments,
// by name.
func evaluateMachineDeployments(objs TopologyObjects, now time.Time) poolReports {
	mds := append([]clusterv1.MachineDeployment(nil), objs.MachineDeployments...)
	sort.Slice(mds, func(i, j int) bool { return mds[i].Name < mds[j].Name })
	p := poolReports{created: map[string]bool{}}
	for i := range mds {
		md := &mds[i]
		var ownSets []clusterv1.MachineSet
		for _, ms := range objs.MachineSets {
			if ms.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name {
				ownSets = append(ownSets, ms)
			}
		}
		own := core.MachinesWithLabel(objs.Machines, clusterv1.MachineDeploymentNameLabel, md.Name)
		p.add(md, md.Spec.Template.Spec.Version, own, ownSets, now)
	}
	return p
}

// evaluateMachinePools evaluates the topology's MachinePools, by name.
func evaluateMachinePools(objs TopologyObjects, now time.Time) poolReports {
	mps := append([]clusterv1.MachinePool(nil), objs.MachinePools...)
	sort.Slice(mps, func(i, j int) bool { return mps[i].Name < mps[j].Name })
	p := poolReports{created: map[string]bool{}}
	for i := range mps {
		mp := &mps[i]
		own := core.MachinesWithLabel(objs.Machines, clusterv1.MachinePoolNameLabel, kinds.MachinePoolLabelValue(mp.Name))
		p.add(mp, mp.Spec.Template.Spec.Version, own, nil, now)
	}
	return p
}

// missingWorkers are the names of the topology's worker entries (name
// reads one) that have no pool created yet.
func missingWorkers[T any](entries []T, name func(T) string, created map[string]bool) []string {
	var missing []string
	for _, t := range entries {
		if n := name(t); !created[n] {
			missing = append(missing, n)
		}
	}
	return missing
}

// upgradePlans are the versions Cluster API plans the control plane and
// the workers through (the Cluster's status).
func upgradePlans(cluster *clusterv1.Cluster) (cpPlan, workersPlan []string) {
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
	return cpPlan, workersPlan
}

// topologyReconciled is the reason and message of the Cluster's
// TopologyReconciled condition when it is not true, else "".
func topologyReconciled(cluster *clusterv1.Cluster) string {
	c := apimeta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	if c == nil || c.Status == metav1.ConditionTrue {
		return ""
	}
	return strings.TrimSuffix(c.Reason+": "+core.ConditionLine(c.Message), ": ")
}

// topologyObserved reports whether the topology controller reconciled the
// Cluster's generation: its TopologyReconciled condition was written for
// it. Just after an edit of spec.topology (a variable, a class) every
// object still looks rolled out until the topology controller writes the
// new templates; a condition that records no generation, or none yet,
// says nothing.
func topologyObserved(cluster *clusterv1.Cluster) bool {
	c := apimeta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	return c == nil || c.ObservedGeneration == 0 || c.ObservedGeneration >= cluster.Generation
}

// clusterStatus is the Cluster's own report: its objects' counts summed,
// paused when one of them is, complete when the topology controller
// reconciled the Cluster's generation, the upgrade u reached its version,
// every step and every object rolled out.
func clusterStatus(cluster *clusterv1.Cluster, objects []StatusReport, u *UpgradeStatus) StatusReport {
	s := StatusReport{Object: core.Cluster.Singular() + "/" + cluster.Name, Generation: cluster.Generation, Observed: topologyObserved(cluster), Upgrade: u, Machines: []MachineStatus{}}
	s.Paused = core.PausedBy(cluster)
	objectsComplete, objectsKey := s.sumObjects(objects)
	complete := u.Reached && s.Observed && objectsComplete
	var key strings.Builder
	key.WriteString(objectsKey)
	for _, st := range u.Steps {
		if st.State != StepRolledOut {
			complete = false
		}
		fmt.Fprintf(&key, "%s %s %s %d %d;", st.Version, st.Part, st.State, st.Applied, st.RolledOut)
	}
	fmt.Fprintf(&key, "%s %v %v", u.Version, u.Missing, u.MissingMachinePools)
	s.progress = key.String()
	s.Complete = complete
	return s
}

// machineVersions lists the spec.version of each machine.
func machineVersions(machines []clusterv1.Machine) []string {
	out := make([]string, 0, len(machines))
	for _, m := range machines {
		out = append(out, m.Spec.Version)
	}
	return out
}

// sumObjects adds the counts of a Cluster's objects to its report s, takes
// the first pause among them, and returns whether every one is complete and
// their part of the progress key.
func (s *StatusReport) sumObjects(objects []StatusReport) (complete bool, key string) {
	complete = true
	var b strings.Builder
	for _, o := range objects {
		s.Replicas += o.Replicas
		s.Current += o.Current
		s.UpToDate += o.UpToDate
		s.Available += o.Available
		s.Ready += o.Ready
		complete = complete && o.Complete
		if s.Paused == "" && o.Paused != "" {
			s.Paused = o.Object + ": " + o.Paused
		}
		b.WriteString(progressKey(o) + "\n")
	}
	return complete, b.String()
}
