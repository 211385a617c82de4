package status

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// The steps of a ClusterClass cluster's upgrade, as Cluster API's topology
// controller takes them, and how status says where the upgrade stands.

// UpgradeOf computes the steps of a topology upgrade to target from the
// control plane (nil when it does not exist yet), the topology's worker
// pools, the MachineDeployment and MachinePool topologies not created yet,
// and the Cluster's upgrade plans (the versions still to be applied).
//
// The steps are, in version order (the control plane before the workers at
// one version): the control plane at its spec.version, then at each version
// of its plan, and at target; the workers at each version a pool has now,
// at each version of their plan, and at target. Versions are ordered as
// semantic versions; versions equal but for build metadata keep the order
// in which the plans list them.
func UpgradeOf(target string, cpPlan, workersPlan []string, cp *PartFacts, pools []PartFacts, missing, missingMPs []string) UpgradeStatus {
	u := UpgradeStatus{Version: target, ControlPlanePlan: cpPlan, WorkersPlan: workersPlan, Missing: missing, MissingMachinePools: missingMPs,
		Workers: []PartVersion{}, Steps: []UpgradeStep{}}
	var poolVersions []string
	for _, p := range pools {
		u.Workers = append(u.Workers, PartVersion{Object: p.Object, Topology: p.Topology, Version: p.Version, Machines: CountVersions(p.Machines)})
		poolVersions = append(poolVersions, p.Version)
	}
	cpVersions := append([]string(nil), cpPlan...)
	if cp != nil {
		u.ControlPlane = &PartVersion{Object: cp.Object, Version: cp.Version, Machines: CountVersions(cp.Machines)}
		cpVersions = append([]string{cp.Version}, cpVersions...)
	}
	cpVersions = append(cpVersions, target)
	workerVersions := append(append(append([]string(nil), poolVersions...), workersPlan...), target)
	seq := VersionSequence(poolVersions, cpVersions, workersPlan, []string{target})
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
	rolled := func(f PartFacts, v string) bool {
		return past(f.Version, v) || (f.Version == v && f.Complete && allAt(f.Machines, v))
	}
	nPools := len(pools) + len(missing) + len(missingMPs)
	for _, v := range seq {
		if slices.Contains(cpVersions, v) && (cp == nil || at(v, cp.Version)) {
			st := UpgradeStep{Version: v, Part: core.PartControlPlane, Objects: 1}
			if cp != nil && at(cp.Version, v) {
				st.Applied = 1
			}
			if cp != nil && rolled(*cp, v) {
				st.RolledOut = 1
			}
			u.Steps = append(u.Steps, withState(st))
		}
		if nPools > 0 && slices.Contains(workerVersions, v) && v != "" {
			st := UpgradeStep{Version: v, Part: core.PartWorkers, Objects: nPools}
			for _, p := range pools {
				if at(p.Version, v) {
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
	u.Reached = cp != nil && cp.Version == target && allAt(cp.Machines, target) && len(missing) == 0 && len(missingMPs) == 0
	for _, p := range pools {
		u.Reached = u.Reached && p.Version == target && allAt(p.Machines, target)
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

// CountVersions counts machines by version, in version order.
func CountVersions(machines []string) []VersionCount {
	out := []VersionCount{}
	for _, v := range VersionSequence(machines) {
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

// VersionSequence lists the distinct versions of lists in semantic version
// order; versions that compare equal (they differ in build metadata) keep
// the order they first appear in, and versions that do not parse come last.
func VersionSequence(lists ...[]string) []string {
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
		return fmt.Sprintf("at %s on the control plane and %d worker %s", u.Version, pools, core.Plural(pools, "pool", "pools"))
	}
	line := "upgrading to " + u.Version
	if ok {
		line += ": " + cur.describe()
		var then []string
		for _, st := range u.Steps[i+1:] {
			if st.State != StepRolledOut {
				then = append(then, core.PartName(st.Part)+" "+st.Version)
			}
		}
		if len(then) > 0 {
			line += "; then " + strings.Join(then, ", ")
		}
	}
	if len(u.Missing) > 0 {
		line += fmt.Sprintf("; MachineDeployment %s %s not created yet", core.Plural(len(u.Missing), "topology", "topologies"), strings.Join(u.Missing, ", "))
	}
	if len(u.MissingMachinePools) > 0 {
		line += fmt.Sprintf("; MachinePool %s %s not created yet", core.Plural(len(u.MissingMachinePools), "topology", "topologies"), strings.Join(u.MissingMachinePools, ", "))
	}
	return line
}

// describe is the current step in the summary: "control plane v1.34.2
// rolling out", "workers v1.34.2 rolling out, 1 of 2 pools done", "waiting
// for the topology controller to start control plane v1.35.0".
func (st UpgradeStep) describe() string {
	what := core.PartName(st.Part) + " " + st.Version
	switch st.State {
	case StepPending:
		return "waiting for the topology controller to start " + what
	case StepRollingOut:
		if st.Part == core.PartWorkers {
			return fmt.Sprintf("%s rolling out, %d of %d %s done", what, st.RolledOut, st.Objects, core.Plural(st.Objects, "pool", "pools"))
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
		if st.Part == core.PartWorkers {
			return fmt.Sprintf("rolling out, %d of %d %s done", st.RolledOut, st.Objects, core.Plural(st.Objects, "pool", "pools"))
		}
		return "rolling out"
	}
	return "pending"
}

// versionsText is "v1.33.4 (1), v1.34.2 (2)": machines by version.
func versionsText(vs []VersionCount) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%s (%d)", core.OrNone(v.Version), v.Machines))
	}
	return strings.Join(parts, ", ")
}
