package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/waves"
)

// The pure half of a fleet's status: each cluster evaluated as `rollout
// status cluster/NAME` evaluates it (EvaluateTopologyAt, or for a Cluster
// without a topology its control plane and worker pools), its state in the
// fleet (FleetStateOf), and the fleet grouped by state, worst first, with
// its totals (GroupFleet). Nothing here reads the API server.

// fleetOrder is the order of the states, worst first.
var fleetOrder = []string{v1alpha1.ClusterRefused, v1alpha1.ClusterStalled, v1alpha1.ClusterPaused, v1alpha1.ClusterRolling, v1alpha1.ClusterUpToDate}

// stateRank is a state's place in fleetOrder.
func stateRank(state string) int {
	for i, s := range fleetOrder {
		if s == state {
			return i
		}
	}
	return len(fleetOrder)
}

// StateText is a state as people read it: "refused", "up to date".
func StateText(state string) string {
	if state == v1alpha1.ClusterUpToDate {
		return "up to date"
	}
	return strings.ToLower(state)
}

// FleetMember is one cluster of a fleet as read: its Cluster and the
// objects labelled with its name.
type FleetMember struct {
	Cluster *clusterv1.Cluster
	Objects TopologyObjects
}

// FleetCluster is one cluster's state in a fleet.
type FleetCluster struct {
	// Namespace and Name are the Cluster's.
	Namespace, Name string
	// Class is its topology's ClusterClass, "NAMESPACE/NAME"; "" without
	// a topology.
	Class string
	// State is one of the states of v1alpha1 (ClusterRefused, ...).
	State string
	// Reason says why the cluster is in State; "" when up to date.
	Reason string
	// Final reports that State is the cluster's verdict for this watch.
	Final bool
	// Report is the cluster's report, as status cluster/NAME computes it.
	Report ClusterReport
	// Wave is the Cluster's label rollout-guard.io/wave, "" without it.
	Wave string
	// HeldBy is what holds the Cluster's topology: the lifecycle hooks
	// and their Runtime Extensions' messages (HookHold); "" when nothing
	// holds it.
	HeldBy string
}

// EvaluateFleetMember computes the report of one cluster of a fleet at
// now: a ClusterClass cluster as EvaluateTopologyAt does, a Cluster without
// a topology from its control plane and worker pools.
func EvaluateFleetMember(m FleetMember, now time.Time) ClusterReport {
	if m.Cluster.Spec.Topology.IsDefined() {
		return EvaluateTopologyAt(m.Cluster, m.Objects, now)
	}
	r := ClusterReport{}
	cp := m.Objects.ControlPlane
	if cp != nil {
		s, _ := evaluateControlPlane(cp, m.Objects.Machines, now)
		r.Objects = append(r.Objects, s)
	}
	mds, mps := evaluateMachineDeployments(m.Objects, now), evaluateMachinePools(m.Objects, now)
	r.Objects = append(append(r.Objects, mds.reports...), mps.reports...)
	s := StatusReport{Object: core.Cluster.Singular() + "/" + m.Cluster.Name, Generation: m.Cluster.Generation, Observed: true, Machines: []MachineStatus{}}
	s.Paused = core.PausedBy(m.Cluster)
	// A Cluster that names a control plane is not rolled out before it
	// exists.
	complete := cp != nil || !m.Cluster.Spec.ControlPlaneRef.IsDefined()
	objectsComplete, objectsKey := s.sumObjects(r.Objects)
	complete = complete && objectsComplete
	var key strings.Builder
	key.WriteString(objectsKey)
	s.progress = key.String()
	s.Complete = complete
	r.Cluster = s
	return r
}

// TopologyRefusal is the refusal of the topology controller's last write,
// from the Cluster's TopologyReconciled condition: False with reason
// ReconcileFailed and the API server's answer as its message, `failed to
// patch KubeadmControlPlane ns/name: admission webhook "..." denied the
// request: ...` or a ValidatingAdmissionPolicy's `... denied request: ...`.
// "" when the last reconcile was not refused (a failure of another kind,
// such as a webhook that could not be called, is not a refusal).
func TopologyRefusal(cluster *clusterv1.Cluster) string {
	c := apimeta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != clusterv1.ClusterTopologyReconciledFailedReason {
		return ""
	}
	msg := c.Message
	webhook := strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied the request")
	policy := strings.Contains(msg, "ValidatingAdmissionPolicy") && strings.Contains(msg, "denied request")
	if !webhook && !policy {
		return ""
	}
	return core.ConditionLine(msg)
}

// FleetStateOf is the state in a fleet of cluster, whose report is r and
// whose tracker's verdict is verdict: refused when the topology
// controller's write was refused, paused, stalled, up to date once rolled
// out, rolling otherwise. The deadline is --progress-deadline, for the
// reason of a stall.
func FleetStateOf(cluster *clusterv1.Cluster, r ClusterReport, verdict StatusVerdict, deadline time.Duration) FleetCluster {
	fc := FleetCluster{Namespace: cluster.Namespace, Name: cluster.Name, Report: r, Wave: cluster.Labels[waves.Label], HeldBy: HookHold(cluster)}
	if t := cluster.Spec.Topology; t.IsDefined() {
		ns := t.ClassRef.Namespace
		if ns == "" {
			ns = cluster.Namespace
		}
		fc.Class = ns + "/" + t.ClassRef.Name
	}
	switch refusal := TopologyRefusal(cluster); {
	case refusal != "":
		fc.State, fc.Reason, fc.Final = v1alpha1.ClusterRefused, refusal, true
	case r.Cluster.Paused != "" || verdict.Phase == PhasePaused:
		fc.State, fc.Reason, fc.Final = v1alpha1.ClusterPaused, r.Cluster.Paused, true
	case verdict.Phase == PhaseStalled:
		fc.State, fc.Reason, fc.Final = v1alpha1.ClusterStalled, fmt.Sprintf("no progress for %s: %s", deadline, RollingText(r)), true
	case verdict.Phase == PhaseRolledOut:
		fc.State, fc.Final = v1alpha1.ClusterUpToDate, true
	case fc.HeldBy != "":
		fc.State, fc.Reason = v1alpha1.ClusterRolling, "held: "+fc.HeldBy
	default:
		fc.State, fc.Reason = v1alpha1.ClusterRolling, RollingText(r)
	}
	return fc
}

// HookHold is what the lifecycle hooks that hold the Cluster's topology
// say, as Cluster API writes it into the TopologyReconciled condition:
// during an upgrade (reason ClusterUpgrading) its detail "Following hooks
// are blocking upgrade: HOOK: MESSAGE"; otherwise (reason
// LifecycleHookBlocking) the condition's message. "" when no hook holds it.
func HookHold(cluster *clusterv1.Cluster) string {
	c := apimeta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	switch c.Reason {
	case clusterv1.ClusterTopologyReconciledHookBlockingReason:
		return core.ConditionLine(c.Message)
	case clusterv1.ClusterTopologyReconciledClusterUpgradingReason:
		for _, line := range strings.Split(c.Message, "\n") {
			if _, hooks, ok := strings.Cut(line, "Following hooks are blocking upgrade: "); ok {
				return strings.TrimSpace(hooks)
			}
		}
	}
	return ""
}

// RollingText says what of a cluster is still rolling, and how many of its
// machines: "workers demo-md-0: 1/3 machines up to date, 2 old"; the
// upgrade's step first during a version upgrade; what the topology
// controller has yet to do when no object is rolling.
func RollingText(r ClusterReport) string {
	var parts []string
	s := r.Cluster
	if !s.Observed && s.Upgrade != nil {
		parts = append(parts, fmt.Sprintf("waiting for the topology controller to reconcile generation %d", s.Generation))
	}
	if u := s.Upgrade; u != nil && !u.Reached {
		parts = append(parts, u.Summary())
	}
	for _, o := range r.Objects {
		if !o.Complete {
			parts = append(parts, objectRollingText(o))
		}
	}
	if len(parts) == 0 {
		switch {
		case s.Upgrade != nil && s.Upgrade.TopologyReconciled != "":
			parts = append(parts, "TopologyReconciled: "+s.Upgrade.TopologyReconciled)
		case s.Complete:
			parts = append(parts, "complete, confirming")
		default:
			parts = append(parts, s.Summary())
		}
	}
	return strings.Join(parts, "; ")
}

// objectRollingText is one object's part of RollingText: "control plane:
// 1/3 machines up to date, 1 old", "workers md-0: waiting for generation 4
// to be observed".
func objectRollingText(o StatusReport) string {
	what := "control plane"
	if part, name, _ := strings.Cut(o.Object, "/"); part != core.KubeadmControlPlane.Singular() {
		what = "workers " + name
	}
	if !o.Observed {
		return fmt.Sprintf("%s: waiting for generation %d to be observed", what, o.Generation)
	}
	line := fmt.Sprintf("%s: %d/%d machines up to date", what, upToDateMachines(o), o.Replicas)
	if old := oldMachines(o); old > 0 {
		line += fmt.Sprintf(", %d old", old)
	}
	if o.deleting {
		line += ", being deleted"
	}
	return line
}

// upToDateMachines counts the report's machines that stay: up to date and
// not to be replaced (what the machines say now; the status counts lag
// them). A MachinePool without Machines has its status count.
func upToDateMachines(o StatusReport) int32 {
	if o.countsOnly {
		return o.UpToDate
	}
	n := int32(0)
	for _, m := range o.Machines {
		if m.UpToDate && !m.Old && !m.Deleting {
			n++
		}
	}
	return n
}

// oldMachines counts the report's machines to be replaced.
func oldMachines(o StatusReport) int32 {
	n := int32(0)
	for _, m := range o.Machines {
		if m.Old {
			n++
		}
	}
	return n
}

// FleetTotals count a fleet's clusters by state.
type FleetTotals struct {
	Clusters                                    int
	Refused, Stalled, Paused, Rolling, UpToDate int
}

// count is the total of one state.
func (t FleetTotals) count(state string) int {
	switch state {
	case v1alpha1.ClusterRefused:
		return t.Refused
	case v1alpha1.ClusterStalled:
		return t.Stalled
	case v1alpha1.ClusterPaused:
		return t.Paused
	case v1alpha1.ClusterRolling:
		return t.Rolling
	}
	return t.UpToDate
}

// String is "3 clusters: 1 rolling, 2 up to date": the states with
// clusters, worst first.
func (t FleetTotals) String() string {
	line := fmt.Sprintf("%d %s", t.Clusters, core.Plural(t.Clusters, "cluster", "clusters"))
	var parts []string
	for _, st := range fleetOrder {
		if n := t.count(st); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, StateText(st)))
		}
	}
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	return line
}

// FleetReport is a fleet at one moment: its clusters grouped by state,
// worst first (refused, stalled, paused, rolling, up to date), by
// namespace and name within a state, and their totals.
type FleetReport struct {
	// Fleet names what is watched: "clusterclass/NAME", "cluster -l
	// SELECTOR", "cluster -A".
	Fleet string
	// AllNamespaces: the clusters are named with their namespace.
	AllNamespaces bool
	Clusters      []FleetCluster
	Totals        FleetTotals
}

// GroupFleet orders clusters worst first and counts them.
func GroupFleet(fleet string, allNamespaces bool, clusters []FleetCluster) FleetReport {
	out := append([]FleetCluster(nil), clusters...)
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := stateRank(out[i].State), stateRank(out[j].State); a != b {
			return a < b
		}
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	t := FleetTotals{Clusters: len(out)}
	for _, c := range out {
		switch c.State {
		case v1alpha1.ClusterRefused:
			t.Refused++
		case v1alpha1.ClusterStalled:
			t.Stalled++
		case v1alpha1.ClusterPaused:
			t.Paused++
		case v1alpha1.ClusterRolling:
			t.Rolling++
		default:
			t.UpToDate++
		}
	}
	return FleetReport{Fleet: fleet, AllNamespaces: allNamespaces, Clusters: out, Totals: t}
}

// Final reports whether every cluster reached its verdict.
func (r FleetReport) Final() bool {
	for _, c := range r.Clusters {
		if !c.Final {
			return false
		}
	}
	return true
}

// Worst is the worst state of the fleet, ClusterUpToDate for an empty
// fleet.
func (r FleetReport) Worst() string {
	if len(r.Clusters) == 0 {
		return v1alpha1.ClusterUpToDate
	}
	return r.Clusters[0].State
}

// DisplayName is how the fleet's views name the cluster: its name, or
// NAMESPACE/NAME across namespaces.
func (r FleetReport) DisplayName(c FleetCluster) string {
	if r.AllNamespaces {
		return c.Namespace + "/" + c.Name
	}
	return c.Name
}

// FoldUpToDate is how many up-to-date clusters the grouped view lists by
// name; a longer group is folded to one line: the first foldShown names
// and the count of the others.
const (
	FoldUpToDate = 5
	foldShown    = 3
)

// RenderFleet draws the fleet grouped by state, worst first, under its
// totals: a head per state with clusters, then a line per cluster, its
// name and why it is in the state; a group of more than FoldUpToDate
// up-to-date clusters is folded to one line, a few names and the count of
// the others. The view is cut to
// width columns and height-1 lines (0: whole), the clusters left out
// counted on the last line. head is its first line ("" for none). It is
// pure, as RenderLive.
func RenderFleet(r FleetReport, head string, width, height int) []string {
	var lines []string
	if head != "" {
		lines = append(lines, head)
	}
	lines = append(lines, r.Fleet+": "+r.Totals.String())
	if r.Staged() {
		return fitLines(append(lines, renderWaves(r, height-1-len(lines))...), width, height)
	}
	nameW := 0
	for _, c := range r.Clusters {
		if c.Reason != "" {
			nameW = max(nameW, len(r.DisplayName(c)))
		}
	}
	var body []string
	for _, st := range fleetOrder {
		n := r.Totals.count(st)
		if n == 0 {
			continue
		}
		body = append(body, fmt.Sprintf("%s (%d)", StateText(st), n))
		if st == v1alpha1.ClusterUpToDate && n > FoldUpToDate {
			var first []string
			for _, c := range r.Clusters[len(r.Clusters)-n:][:foldShown] {
				first = append(first, r.DisplayName(c))
			}
			body = append(body, fmt.Sprintf("  %s and %d more", strings.Join(first, ", "), n-foldShown))
			continue
		}
		for _, c := range r.Clusters {
			if c.State != st {
				continue
			}
			line := "  " + r.DisplayName(c)
			if c.Reason != "" {
				line = fmt.Sprintf("  %-*s  %s", nameW, r.DisplayName(c), c.Reason)
			}
			body = append(body, line)
		}
	}
	if room := height - 1 - len(lines); height > 0 && len(body) > room {
		hidden := len(body) - max(room-1, 0)
		body = append(body[:max(room-1, 0)], fmt.Sprintf("  ... %d more %s", hidden, core.Plural(hidden, "line", "lines")))
	}
	return fitLines(append(lines, body...), width, height)
}

// FleetLine is one cluster's line when its state changes (without a
// terminal): "demo-cc-2: rolling: workers demo-cc-2-md-0: 0/1 machines up
// to date, 1 old", after "wave N: " for a cluster of a wave.
func (r FleetReport) FleetLine(c FleetCluster) string {
	line := r.DisplayName(c) + ": " + StateText(c.State)
	if c.Wave != "" {
		line = "wave " + c.Wave + ": " + line
	}
	if c.Reason != "" {
		line += ": " + c.Reason
	}
	return line
}

// ClusterStatusOf is a cluster's ClusterRolloutStatus (-o json) at now.
func ClusterStatusOf(c FleetCluster, now time.Time) v1alpha1.ClusterRolloutStatus {
	out := v1alpha1.ClusterRolloutStatus{
		TypeMeta:     metav1.TypeMeta{APIVersion: v1alpha1.StatusAPIVersion, Kind: v1alpha1.ClusterStatusKind},
		Time:         metav1.NewTime(now.UTC().Truncate(time.Millisecond)),
		Cluster:      v1alpha1.FleetClusterRef{Namespace: c.Namespace, Name: c.Name},
		ClusterClass: c.Class,
		State:        c.State,
		Final:        c.Final,
		Reason:       c.Reason,
		Wave:         c.Wave,
		HeldBy:       c.HeldBy,
	}
	if u := c.Report.Cluster.Upgrade; u != nil {
		out.Version = u.Version
	}
	for _, o := range c.Report.Objects {
		counts := machineCounts(o)
		out.Machines.Desired += counts.Desired
		out.Machines.UpToDate += counts.UpToDate
		out.Machines.Available += counts.Available
		out.Machines.Old += counts.Old
		if !o.Complete {
			part := core.PartWorkers
			if strings.HasPrefix(o.Object, core.KubeadmControlPlane.Singular()+"/") {
				part = core.PartControlPlane
			}
			out.Rolling = append(out.Rolling, v1alpha1.FleetObjectStatus{Object: o.Object, Part: part, Machines: counts})
		}
	}
	return out
}

// machineCounts are one object's counts.
func machineCounts(o StatusReport) v1alpha1.FleetMachineCounts {
	return v1alpha1.FleetMachineCounts{Desired: o.Replicas, UpToDate: upToDateMachines(o), Available: o.Available, Old: oldMachines(o)}
}

// FleetStatusOf is the fleet's FleetRolloutStatus (-o json) at now.
func FleetStatusOf(r FleetReport, now time.Time) v1alpha1.FleetRolloutStatus {
	t := r.Totals
	return v1alpha1.FleetRolloutStatus{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.StatusAPIVersion, Kind: v1alpha1.FleetStatusKind},
		Time:     metav1.NewTime(now.UTC().Truncate(time.Millisecond)),
		Fleet:    r.Fleet,
		Clusters: t.Clusters, Refused: t.Refused, Stalled: t.Stalled, Paused: t.Paused, Rolling: t.Rolling, UpToDate: t.UpToDate,
		Done: t.UpToDate == t.Clusters,
	}
}
