package skew

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
)

// NamesShown is how many Machines a refusal names in a group of workers
// before it says "and N more".
const NamesShown = 3

// machineKind is the kind of a single worker, as opposed to a pool.
const machineKind = "Machine"

// leftWorker is a worker that a control-plane change leaves out of the
// version-skew policy.
type leftWorker struct {
	// rule is RuleControlPlaneLeavesWorkerNewer or RuleControlPlaneLeavesWorkerTooOld.
	rule RuleID
	// refused says the change creates or widens the breach; false: it leaves
	// it as it was, which is only a warning.
	refused bool
	worker  Worker
	v       semver.Version
}

// workerGroup is the workers that one line of a decision names: those that
// break the same rule in the same way and belong to the same pool (the pool
// itself and its Machines), or the Machines that belong to no known pool.
type workerGroup struct {
	rule               RuleID
	refused            bool
	poolKind, poolName string // "" for Machines of no known pool
	pool               *leftWorker
	machines           []leftWorker
}

// groupKey is what puts two workers in the same group.
type groupKey struct {
	rule               RuleID
	refused            bool
	poolKind, poolName string
}

// keyOf returns the group a worker belongs to: a pool is its own pool; a
// Machine belongs to its pool, if known.
func keyOf(l leftWorker) groupKey {
	k := groupKey{rule: l.rule, refused: l.refused, poolKind: l.worker.PoolKind, poolName: l.worker.PoolName}
	if l.worker.Kind != machineKind {
		k.poolKind, k.poolName = l.worker.Kind, l.worker.Name
	}
	if k.poolKind == "" || k.poolName == "" {
		k.poolKind, k.poolName = "", ""
	}
	return k
}

// groupWorkers puts the workers left out of skew into groups, in a stable
// order: by rule (ControlPlaneLeavesWorkerNewer first), then by pool kind and
// name, the Machines of no known pool last; Machines by name in each group.
func groupWorkers(left []leftWorker) []*workerGroup {
	byKey := map[groupKey]*workerGroup{}
	var groups []*workerGroup
	for _, l := range left {
		k := keyOf(l)
		g := byKey[k]
		if g == nil {
			g = &workerGroup{rule: k.rule, refused: k.refused, poolKind: k.poolKind, poolName: k.poolName}
			byKey[k] = g
			groups = append(groups, g)
		}
		if l.worker.Kind != machineKind && g.pool == nil {
			g.pool = &l
			continue
		}
		g.machines = append(g.machines, l)
	}
	ruleOrder := func(id RuleID) int {
		if id == RuleControlPlaneLeavesWorkerNewer {
			return 0
		}
		return 1
	}
	slices.SortFunc(groups, func(a, b *workerGroup) int {
		if c := cmp.Compare(ruleOrder(a.rule), ruleOrder(b.rule)); c != 0 {
			return c
		}
		if a.refused != b.refused {
			if a.refused {
				return -1
			}
			return 1
		}
		if (a.poolName == "") != (b.poolName == "") {
			if a.poolName == "" {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.poolKind, b.poolKind), cmp.Compare(a.poolName, b.poolName))
	})
	for _, g := range groups {
		slices.SortFunc(g.machines, func(a, b leftWorker) int { return cmp.Compare(a.worker.Name, b.worker.Name) })
	}
	return groups
}

// reportWorkersLeft refuses, or warns about, the workers a control-plane
// change leaves out of skew: one violation or warning per group of workers,
// on the control plane's version field.
func reportWorkersLeft(r *verdict, f controlPlaneFacts, left []leftWorker) {
	obj, field := f.obj, f.versionField
	newV, value := f.newV.v, f.newV.text
	for _, g := range groupWorkers(left) {
		who, runs := g.subject()
		ref, refRuns := g.reference()
		lo, hi := g.versions()
		loM, hiM, cpNew := MinorOf(lo), MinorOf(hi), MinorOf(newV)
		versions := vs(lo)
		if vs(hi) != versions {
			versions += " to " + vs(hi)
		}
		switch g.rule {
		case RuleControlPlaneLeavesWorkerNewer:
			if !g.refused {
				r.warn(fmt.Sprintf("%s: %s %s %s, newer than %s; allowed because this change does not widen the gap", obj, who, runs, versions, vs(newV)))
				continue
			}
			r.refuse(Violation{
				Rule:    RuleControlPlaneLeavesWorkerNewer,
				Field:   field,
				Value:   value,
				Message: fmt.Sprintf("%s: %s %s %s, newer than %s; a kubelet must not be newer than the API server", obj, who, runs, versions, vs(newV)),
				Remedy:  fmt.Sprintf("keep %s at %s.x or later while %s %s %s", field, hiM.v(), ref, refRuns, hiM.v()),
			})
		case RuleControlPlaneLeavesWorkerTooOld:
			gap := minorsRange(cpNew.minorsAfter(hiM), cpNew.minorsAfter(loM))
			if !g.refused {
				r.warn(fmt.Sprintf("%s: %s %s %s, %s older than %s, beyond the kubelet skew; allowed because this change does not widen the gap", obj, who, runs, versions, gap, vs(newV)))
				continue
			}
			rule := kubeletRule(loM)
			if kubeletSkew(loM) != kubeletSkew(hiM) {
				rule = "a kubelet may be at most 3 minors older than the API server, and a kubelet older than v1.25 at most 2"
			}
			r.refuse(Violation{
				Rule:    RuleControlPlaneLeavesWorkerTooOld,
				Field:   field,
				Value:   value,
				Message: fmt.Sprintf("%s: %s %s %s, %s older than %s; %s", obj, who, runs, versions, gap, vs(newV), rule),
				Remedy:  fmt.Sprintf("upgrade %s to %s.x or newer first, then set %s to %s", ref, oldestKubeletFor(cpNew).v(), field, vs(newV)),
			})
		}
	}
}

// subject names the workers of a group as the subject of a sentence, with
// its verb: "MachineDeployment md-0" runs, "MachineDeployment md-0 and 25 of
// its Machines (a, b, c and 22 more)" run, "3 Machines of MachinePool mp-0
// (a, b, c)" run, "Machine m-1" runs.
func (g *workerGroup) subject() (string, string) {
	pool := object(g.poolKind, g.poolName)
	n := len(g.machines)
	switch {
	case g.pool != nil && n == 0:
		return object(g.pool.worker.Kind, g.pool.worker.Name), "runs"
	case g.pool != nil && n == 1:
		return fmt.Sprintf("%s and its Machine %s", pool, g.machines[0].worker.Name), "run"
	case g.pool != nil:
		return fmt.Sprintf("%s and %d of its Machines (%s)", pool, n, g.names()), "run"
	case g.poolName != "" && n == 1:
		return fmt.Sprintf("Machine %s of %s", g.machines[0].worker.Name, pool), "runs"
	case g.poolName != "":
		return fmt.Sprintf("%d Machines of %s (%s)", n, pool, g.names()), "run"
	case n == 1:
		return object(machineKind, g.machines[0].worker.Name), "runs"
	}
	return fmt.Sprintf("%d Machines not in a MachineDeployment or MachinePool (%s)", n, g.names()), "run"
}

// reference names the workers of a group in a remedy, with its verb: their
// pool, which is what an operator upgrades, else the Machine or "these
// Machines".
func (g *workerGroup) reference() (string, string) {
	switch {
	case g.poolName != "":
		return object(g.poolKind, g.poolName), "runs"
	case len(g.machines) == 1:
		return object(machineKind, g.machines[0].worker.Name), "runs"
	}
	return "these Machines", "run"
}

// names lists the first NamesShown Machines of a group, and how many more
// there are.
func (g *workerGroup) names() string {
	var names []string
	for _, m := range g.machines[:min(len(g.machines), NamesShown)] {
		names = append(names, m.worker.Name)
	}
	s := strings.Join(names, ", ")
	if more := len(g.machines) - NamesShown; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// versions returns the lowest and highest version the workers of a group
// run (of equal versions, the one whose text sorts first).
func (g *workerGroup) versions() (semver.Version, semver.Version) {
	var all []semver.Version
	if g.pool != nil {
		all = append(all, g.pool.v)
	}
	for _, m := range g.machines {
		all = append(all, m.v)
	}
	slices.SortFunc(all, func(a, b semver.Version) int {
		return cmp.Or(a.Compare(b), cmp.Compare(a.String(), b.String()))
	})
	return all[0], all[len(all)-1]
}

// minorsRange says "4 minors", or "4 to 5 minors" when lo and hi differ.
func minorsRange(lo, hi int) string {
	if lo == hi {
		return minors(lo)
	}
	return fmt.Sprintf("%d to %d minors", lo, hi)
}
