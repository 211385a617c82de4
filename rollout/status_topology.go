package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
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
	s.Paused = clusterPausedBy(cluster)
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

// clusterPausedBy says how a Cluster is paused, "" when it is not.
func clusterPausedBy(cluster *clusterv1.Cluster) string {
	if ptr.Deref(cluster.Spec.Paused, false) {
		return "spec.paused is true"
	}
	if _, ok := cluster.Annotations[clusterv1.PausedAnnotation]; ok {
		return "annotation " + clusterv1.PausedAnnotation
	}
	return ""
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

// upgradeOf computes the steps of a topology upgrade to target from the
// control plane (nil when it does not exist yet), the topology's worker
// pools, the MachineDeployment topologies not created yet, and the
// Cluster's upgrade plans (the versions still to be applied).
//
// The steps are, in version order (the control plane before the workers at
// one version): the control plane at its spec.version, then at each version
// of its plan, and at target; the workers at each version a pool has now,
// at each version of their plan, and at target. Versions are ordered as
// semantic versions; versions equal but for build metadata keep the order
// in which the plans list them.
func upgradeOf(target string, cpPlan, workersPlan []string, cp *partFacts, pools []partFacts, missing []string) UpgradeStatus {
	u := UpgradeStatus{Version: target, ControlPlanePlan: cpPlan, WorkersPlan: workersPlan, Missing: missing, Workers: []PartVersion{}, Steps: []UpgradeStep{}}
	var poolVersions []string
	for _, p := range pools {
		u.Workers = append(u.Workers, PartVersion{Object: p.object, Topology: p.topology, Version: p.version, Machines: countVersions(p.machines)})
		poolVersions = append(poolVersions, p.version)
	}
	cpVersions := append([]string(nil), cpPlan...)
	if cp != nil {
		u.ControlPlane = &PartVersion{Object: cp.object, Version: cp.version, Machines: countVersions(cp.machines)}
		cpVersions = append([]string{cp.version}, cpVersions...)
	}
	cpVersions = append(cpVersions, target)
	workerVersions := append(append(append([]string(nil), poolVersions...), workersPlan...), target)
	seq := versionSequence(poolVersions, cpVersions, workersPlan, []string{target})
	pos := map[string]int{}
	for i, v := range seq {
		pos[v] = i
	}
	// at reports have is v, or comes after it.
	at := func(have, v string) bool {
		p, ok := pos[have]
		return have != "" && ok && p >= pos[v]
	}
	past := func(have, v string) bool {
		p, ok := pos[have]
		return have != "" && ok && p > pos[v]
	}
	rolled := func(f partFacts, v string) bool {
		return past(f.version, v) || (f.version == v && f.complete && allAt(f.machines, v))
	}
	nPools := len(pools) + len(missing)
	for _, v := range seq {
		if contains(cpVersions, v) && (cp == nil || at(v, cp.version)) {
			st := UpgradeStep{Version: v, Part: PartControlPlane, Objects: 1}
			if cp != nil && at(cp.version, v) {
				st.Applied = 1
			}
			if cp != nil && rolled(*cp, v) {
				st.RolledOut = 1
			}
			u.Steps = append(u.Steps, withState(st))
		}
		if nPools > 0 && contains(workerVersions, v) && v != "" {
			st := UpgradeStep{Version: v, Part: PartWorkers, Objects: nPools}
			for _, p := range pools {
				if at(p.version, v) {
					st.Applied++
				}
				if rolled(p, v) {
					st.RolledOut++
				}
			}
			u.Steps = append(u.Steps, withState(st))
		}
	}
	for i := range u.Steps {
		if u.Steps[i].State != StepRolledOut {
			u.Steps[i].Current = true
			break
		}
	}
	u.Reached = cp != nil && cp.version == target && allAt(cp.machines, target) && len(missing) == 0
	for _, p := range pools {
		u.Reached = u.Reached && p.version == target && allAt(p.machines, target)
	}
	return u
}

// withState sets a step's state from its counts.
func withState(st UpgradeStep) UpgradeStep {
	switch {
	case st.RolledOut == st.Objects:
		st.State = StepRolledOut
	case st.Applied == 0:
		st.State = StepPending
	default:
		st.State = StepRollingOut
	}
	return st
}

// allAt reports whether every machine runs version v.
func allAt(machines []string, v string) bool {
	for _, m := range machines {
		if m != v {
			return false
		}
	}
	return true
}

// countVersions counts machines by version, in version order.
func countVersions(machines []string) []VersionCount {
	out := []VersionCount{}
	for _, v := range versionSequence(machines) {
		n := 0
		for _, m := range machines {
			if m == v {
				n++
			}
		}
		out = append(out, VersionCount{Version: v, Machines: n})
	}
	return out
}

// versionSequence lists the distinct versions of lists in semantic version
// order; versions that compare equal (they differ in build metadata) keep
// the order they first appear in, and versions that do not parse come last.
func versionSequence(lists ...[]string) []string {
	type entry struct {
		s string
		v *utilversion.Version
	}
	var parsed, other []entry
	seen := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			if s == "" || seen[s] {
				continue
			}
			seen[s] = true
			if v, err := utilversion.ParseSemantic(s); err == nil {
				parsed = append(parsed, entry{s, v})
			} else {
				other = append(other, entry{s: s})
			}
		}
	}
	sort.SliceStable(parsed, func(i, j int) bool { return parsed[i].v.LessThan(parsed[j].v) })
	out := make([]string, 0, len(parsed)+len(other))
	for _, e := range append(parsed, other...) {
		out = append(out, e.s)
	}
	return out
}

// partName names a part in messages.
func partName(part string) string {
	if part == PartControlPlane {
		return "control plane"
	}
	return "workers"
}

// current is the current step, false when every step is rolled out.
func (u UpgradeStatus) current() (UpgradeStep, int, bool) {
	for i, st := range u.Steps {
		if st.Current {
			return st, i, true
		}
	}
	return UpgradeStep{}, -1, false
}

// Summary is where the upgrade stands, on one line: "upgrading to v1.35.0:
// control plane v1.34.2 rolling out; then workers v1.34.2, control plane
// v1.35.0, workers v1.35.0", or "at v1.35.0 on the control plane and 2
// worker pools".
func (u UpgradeStatus) Summary() string {
	cur, i, ok := u.current()
	if !ok && u.Reached {
		pools := len(u.Workers)
		if pools == 0 {
			return fmt.Sprintf("at %s on the control plane (no worker pools)", u.Version)
		}
		return fmt.Sprintf("at %s on the control plane and %d worker %s", u.Version, pools, plural(pools, "pool", "pools"))
	}
	line := "upgrading to " + u.Version
	if ok {
		line += ": " + cur.describe()
		var then []string
		for _, st := range u.Steps[i+1:] {
			if st.State != StepRolledOut {
				then = append(then, partName(st.Part)+" "+st.Version)
			}
		}
		if len(then) > 0 {
			line += "; then " + strings.Join(then, ", ")
		}
	}
	if len(u.Missing) > 0 {
		line += fmt.Sprintf("; MachineDeployment %s %s not created yet", plural(len(u.Missing), "topology", "topologies"), strings.Join(u.Missing, ", "))
	}
	return line
}

// describe is the current step in the summary: "control plane v1.34.2
// rolling out", "workers v1.34.2 rolling out, 1 of 2 pools done", "waiting
// for the topology controller to start control plane v1.35.0".
func (st UpgradeStep) describe() string {
	what := partName(st.Part) + " " + st.Version
	switch st.State {
	case StepPending:
		return "waiting for the topology controller to start " + what
	case StepRollingOut:
		if st.Part == PartWorkers {
			return fmt.Sprintf("%s rolling out, %d of %d %s done", what, st.RolledOut, st.Objects, plural(st.Objects, "pool", "pools"))
		}
		return what + " rolling out"
	}
	return what + " rolled out"
}

// stateText is a step's state in the live view.
func (st UpgradeStep) stateText() string {
	switch st.State {
	case StepRolledOut:
		return "rolled out"
	case StepRollingOut:
		if st.Part == PartWorkers {
			return fmt.Sprintf("rolling out, %d of %d %s done", st.RolledOut, st.Objects, plural(st.Objects, "pool", "pools"))
		}
		return "rolling out"
	}
	return "pending"
}

// versionsText is "v1.33.4 (1), v1.34.2 (2)": machines by version.
func versionsText(vs []VersionCount) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%s (%d)", orNone(v.Version), v.Machines))
	}
	return strings.Join(parts, ", ")
}
