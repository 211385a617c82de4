package skew

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// machineOf is a worker Machine of a pool; pool "" is a Machine of no known pool.
func machineOf(poolKind, pool, name, version string) Worker {
	return Worker{Kind: "Machine", Name: name, Version: ReadVersion(version), PoolKind: poolKind, PoolName: pool}
}

// mdMachines returns n Machines of MachineDeployment pool at version, named
// pool-00, pool-01, ...
func mdMachines(pool string, n int, version string) []Worker {
	var out []Worker
	for i := range n {
		out = append(out, machineOf("MachineDeployment", pool, fmt.Sprintf("%s-%02d", pool, i), version))
	}
	return out
}

func workers(groups ...[]Worker) []Worker { return slices.Concat(groups...) }

const kcpObj = "KubeadmControlPlane demo-control-plane: "

// newerLine and tooOldLine are the refusals of a group of workers, as
// docs/policy.md words them.
func newerLine(who, runs, versions, cp, keep, ref, refRuns string) string {
	return kcpObj + who + " " + runs + " " + versions + ", newer than " + cp + "; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at " + keep + ".x or later while " + ref + " " + refRuns + " " + keep
}

func tooOldLine(who, runs, versions, gap, cp, rule, upgrade, to string) string {
	return kcpObj + who + " " + runs + " " + versions + ", " + gap + " older than " + cp + "; " + rule + " [rule ControlPlaneLeavesWorkerTooOld]; upgrade " + upgrade + " to " + to + ".x or newer first, then set spec.version to " + cp
}

const (
	skew3 = "a kubelet may be at most 3 minors older than the API server"
	down1 = "KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.35.2 to v1.34.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)"
)

// TestWorkersLeftAreGrouped checks the words of the worker rules at every
// size: one line per rule and per pool (the pool with its Machines), the
// Machines of no known pool in a line of their own, at most NamesShown names
// and "and N more", versions as a range within a group.
func TestWorkersLeftAreGrouped(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		workers  []Worker
		want     []string // every violation, in order
		warnings []string // every warning, in order
	}{
		{
			name: "one Machine of a pool, the pool itself not left behind",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-0", "v1.34.3")}, mdMachines("md-0", 1, "v1.35.2")),
			want:    []string{down1, newerLine("Machine md-0-00 of MachineDeployment md-0", "runs", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs")},
		},
		{
			name: "a pool and its one Machine: one line",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-0", "v1.35.2")}, mdMachines("md-0", 1, "v1.35.2")),
			want:    []string{down1, newerLine("MachineDeployment md-0 and its Machine md-0-00", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs")},
		},
		{
			name: "exactly as many Machines as are named",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-0", "v1.35.2")}, mdMachines("md-0", NamesShown, "v1.35.2")),
			want:    []string{down1, newerLine("MachineDeployment md-0 and 3 of its Machines (md-0-00, md-0-01, md-0-02)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs")},
		},
		{
			name: "one Machine more than are named",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-0", "v1.35.2")}, mdMachines("md-0", NamesShown+1, "v1.35.2")),
			want:    []string{down1, newerLine("MachineDeployment md-0 and 4 of its Machines (md-0-00, md-0-01, md-0-02 and 1 more)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs")},
		},
		{
			name: "Machines of a pool without the pool",
			old:  "v1.35.2", new: "v1.34.1",
			workers: mdMachines("md-0", 5, "v1.35.2"),
			want:    []string{down1, newerLine("5 Machines of MachineDeployment md-0 (md-0-00, md-0-01, md-0-02 and 2 more)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs")},
		},
		{
			name: "several pools, a MachinePool and Machines of no pool: a line each, pools by kind and name, the rest last",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers(
				[]Worker{machineOf("", "", "loose-b", "v1.35.1"), machineOf("", "", "loose-a", "v1.35.2")},
				mdMachines("md-1", 2, "v1.35.2"),
				[]Worker{{Kind: "MachinePool", Name: "mp-0", Version: ReadVersion("v1.35.2")}, machineOf("MachinePool", "mp-0", "mp-0-x", "v1.35.2")},
				[]Worker{md("md-1", "v1.35.2"), md("md-0", "v1.35.0")},
			),
			want: []string{
				down1,
				newerLine("MachineDeployment md-0", "runs", "v1.35.0", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs"),
				newerLine("MachineDeployment md-1 and 2 of its Machines (md-1-00, md-1-01)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-1", "runs"),
				newerLine("MachinePool mp-0 and its Machine mp-0-x", "run", "v1.35.2", "v1.34.1", "v1.35", "MachinePool mp-0", "runs"),
				newerLine("2 Machines not in a MachineDeployment or MachinePool (loose-a, loose-b)", "run", "v1.35.1 to v1.35.2", "v1.34.1", "v1.35", "these Machines", "run"),
			},
		},
		{
			name: "one Machine of no pool keeps its own name in the remedy",
			old:  "v1.35.0", new: "v1.36.0",
			workers: []Worker{machineOf("", "", "m-9", "v1.31.2")},
			want:    []string{tooOldLine("Machine m-9", "runs", "v1.31.2", "5 minors", "v1.36.0", skew3, "Machine m-9", "v1.33")},
		},
		{
			name: "a pool name without its kind is no known pool",
			old:  "v1.35.0", new: "v1.36.0",
			workers: []Worker{machineOf("", "md-0", "m-1", "v1.32.2"), machineOf("", "", "m-2", "v1.32.2")},
			want:    []string{tooOldLine("2 Machines not in a MachineDeployment or MachinePool (m-1, m-2)", "run", "v1.32.2", "4 minors", "v1.36.0", skew3, "these Machines", "v1.33")},
		},
		{
			name: "mixed patches in a pool: one line with the range",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-0", "v1.35.2")}, mdMachines("md-0", 2, "v1.35.1"), []Worker{machineOf("MachineDeployment", "md-0", "md-0-new", "v1.35.2")}),
			want:    []string{down1, newerLine("MachineDeployment md-0 and 3 of its Machines (md-0-00, md-0-01, md-0-new)", "run", "v1.35.1 to v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs")},
		},
		{
			name: "mixed minors in a pool mid-rollout: the Machines on the new minor are fine, the others counted",
			old:  "v1.35.0", new: "v1.36.0",
			workers: workers([]Worker{md("md-0", "v1.33.4")}, mdMachines("md-0", 4, "v1.32.4"), []Worker{machineOf("MachineDeployment", "md-0", "md-0-new", "v1.33.4")}),
			want:    []string{tooOldLine("4 Machines of MachineDeployment md-0 (md-0-00, md-0-01, md-0-02 and 1 more)", "run", "v1.32.4", "4 minors", "v1.36.0", skew3, "MachineDeployment md-0", "v1.33")},
		},
		{
			name: "mixed minors in a pool, all too old: the range of versions and of minors",
			old:  "v1.35.0", new: "v1.36.0",
			workers: workers([]Worker{md("md-0", "v1.32.4")}, mdMachines("md-0", 3, "v1.31.9")),
			want: []string{tooOldLine("MachineDeployment md-0 and 3 of its Machines (md-0-00, md-0-01, md-0-02)", "run", "v1.31.9 to v1.32.4", "4 to 5 minors", "v1.36.0", skew3,
				"MachineDeployment md-0", "v1.33")},
		},
		{
			name: "mixed minors in a pool, all newer: kept at the highest",
			old:  "v1.36.1", new: "v1.35.1",
			workers: workers([]Worker{md("md-0", "v1.36.1")}, mdMachines("md-0", 2, "v1.37.0-rc.1")),
			want: []string{
				"KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.36.1 to v1.35.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.36.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)",
				newerLine("MachineDeployment md-0 and 2 of its Machines (md-0-00, md-0-01)", "run", "v1.36.1 to v1.37.0-rc.1", "v1.35.1", "v1.37", "MachineDeployment md-0", "runs"),
			},
		},
		{
			name: "kubelets on both sides of v1.25 in one pool",
			old:  "v1.28.0", new: "v1.29.0",
			workers: workers([]Worker{md("md-0", "v1.25.4")}, mdMachines("md-0", 1, "v1.24.9")),
			want: []string{tooOldLine("MachineDeployment md-0 and its Machine md-0-00", "run", "v1.24.9 to v1.25.4", "4 to 5 minors", "v1.29.0",
				"a kubelet may be at most 3 minors older than the API server, and a kubelet older than v1.25 at most 2", "MachineDeployment md-0", "v1.26")},
		},
		{
			name: "both rules in one change: the newer pool refused, the old pool's narrowed gap a warning",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-new", "v1.35.2"), md("md-old", "v1.30.1")}, mdMachines("md-new", 2, "v1.35.2"), mdMachines("md-old", 2, "v1.30.1")),
			want:    []string{down1, newerLine("MachineDeployment md-new and 2 of its Machines (md-new-00, md-new-01)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-new", "runs")},
			warnings: []string{
				kcpObj + "MachineDeployment md-old and 2 of its Machines (md-old-00, md-old-01) run v1.30.1, 4 minors older than v1.34.1, beyond the kubelet skew; allowed because this change does not widen the gap",
			},
		},
		{
			name: "an existing breach left as it was: one warning per group",
			old:  "v1.34.0", new: "v1.34.1",
			workers: workers(mdMachines("md-0", 5, "v1.35.0"), []Worker{machineOf("", "", "m-1", "v1.35.0")}),
			warnings: []string{
				kcpObj + "5 Machines of MachineDeployment md-0 (md-0-00, md-0-01, md-0-02 and 2 more) run v1.35.0, newer than v1.34.1; allowed because this change does not widen the gap",
				kcpObj + "Machine m-1 runs v1.35.0, newer than v1.34.1; allowed because this change does not widen the gap",
			},
		},
		{
			name: "50 Machines in 2 pools: three lines",
			old:  "v1.35.2", new: "v1.34.1",
			workers: workers([]Worker{md("md-0", "v1.35.2"), md("md-1", "v1.35.2")}, mdMachines("md-0", 20, "v1.35.2"), mdMachines("md-1", 30, "v1.35.2")),
			want: []string{
				down1,
				newerLine("MachineDeployment md-0 and 20 of its Machines (md-0-00, md-0-01, md-0-02 and 17 more)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-0", "runs"),
				newerLine("MachineDeployment md-1 and 30 of its Machines (md-1-00, md-1-01, md-1-02 and 27 more)", "run", "v1.35.2", "v1.34.1", "v1.35", "MachineDeployment md-1", "runs"),
			},
		},
		// The safe neighbours of the refusals above, with the same workers.
		{
			name: "50 Machines in 2 pools, a patch change of the control plane",
			old:  "v1.35.2", new: "v1.35.3",
			workers: workers([]Worker{md("md-0", "v1.35.2"), md("md-1", "v1.35.2")}, mdMachines("md-0", 20, "v1.35.2"), mdMachines("md-1", 30, "v1.35.2")),
		},
		{
			name: "a pool with Machines on two minors, upgrade within the skew of both",
			old:  "v1.35.0", new: "v1.35.4",
			workers: workers([]Worker{md("md-0", "v1.32.4")}, mdMachines("md-0", 3, "v1.32.1")),
		},
		{
			name: "Machines of no pool one minor behind, control plane one minor up",
			old:  "v1.35.2", new: "v1.36.0",
			workers: []Worker{machineOf("", "", "loose-b", "v1.35.1"), machineOf("", "", "loose-a", "v1.35.2")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cpCase{old: tc.old, new: tc.new, workers: tc.workers}
			d := EvaluateControlPlane(c.change())
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.String())
				assert.Equal(t, "spec.version", v.Field, "every worker refusal is on the control plane's version field")
				assert.Equal(t, tc.new, v.Value)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.warnings, d.Warnings)

			// The words do not depend on the order the workers were gathered in.
			reversed := slices.Clone(tc.workers)
			slices.Reverse(reversed)
			c.workers = reversed
			assert.Equal(t, d, EvaluateControlPlane(c.change()))
		})
	}
}

// TestWorkersLeftScale checks that the lines of a refusal grow with the
// pools, not with the Machines.
func TestWorkersLeftScale(t *testing.T) {
	for _, machines := range []int{1, 10, 500} {
		t.Run(fmt.Sprint(machines), func(t *testing.T) {
			var ws []Worker
			for _, pool := range []string{"md-a", "md-b", "md-c"} {
				ws = append(ws, md(pool, "v1.35.2"))
				ws = append(ws, mdMachines(pool, machines, "v1.35.2")...)
			}
			d := EvaluateControlPlane(cpCase{old: "v1.35.2", new: "v1.34.1", workers: ws}.change())
			require.Len(t, d.Violations, 1+3, "one downgrade and one line per pool")
			for _, v := range d.Violations[1:] {
				assert.LessOrEqual(t, len(v.String()), 400, v.String())
			}
		})
	}
}
