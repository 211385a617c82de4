package skew

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyDocQuotesRefusals keeps docs/policy.md and the policy
// reference (docs/reference/policy.md) honest: every refusal and warning
// they quote is produced, word for word, by the changes below.
func TestPolicyDocQuotesRefusals(t *testing.T) {
	var doc string
	for _, page := range []string{"policy.md", filepath.Join("reference", "policy.md")} {
		raw, err := os.ReadFile(filepath.Join("..", "docs", page))
		require.NoError(t, err)
		doc += string(raw)
	}

	kcp := func(old, new string) cpCase { return cpCase{old: old, new: new} }
	with := func(c cpCase, f func(*cpCase)) cpCase { f(&c); return c }
	cps := []cpCase{
		kcp("v1.35.0", "v1.3x.0"),
		with(kcp("v1.35.0", "v1.35.0"), func(c *cpCase) { c.newTag = "latest" }),
		kcp("v1.35.2", "v1.34.1"),
		with(kcp("v1.35.0", "v1.34.3"), func(c *cpCase) {
			c.hist = History{HighestKubernetes: ReadVersion("v1.36.1"), HighestKubernetesSource: "revision 4"}
		}),
		with(kcp("v1.34.3", "v1.34.3"), func(c *cpCase) { c.newTag = "3.5.24-0" }),
		with(kcp("v1.36.1", "v1.36.1"), func(c *cpCase) { c.oldTag = "3.7.0-0" }),
		kcp("v1.34.3", "v1.36.0"),
		with(kcp("v1.35.0", "v1.36.0"), func(c *cpCase) { c.running = []string{"v1.34.3", "v1.35.0"} }),
		with(kcp("v1.35.2", "v1.34.1"), func(c *cpCase) { c.workers = []Worker{md("md-0", "v1.35.2")} }),
		with(kcp("v1.35.0", "v1.36.0"), func(c *cpCase) { c.workers = []Worker{md("md-0", "v1.32.4")} }),
		with(kcp("v1.35.2", "v1.34.1"), func(c *cpCase) {
			c.workers = workers([]Worker{md("demo-md-0", "v1.35.2")}, docMachines("MachineDeployment", "demo-md-0", "mf7ng", 25, "v1.35.2"))
		}),
		with(kcp("v1.35.2", "v1.34.1"), func(c *cpCase) {
			c.workers = []Worker{machineOf("", "", "edge-1", "v1.35.1"), machineOf("", "", "edge-2", "v1.35.2")}
		}),
		with(kcp("v1.35.0", "v1.36.0"), func(c *cpCase) {
			c.workers = workers([]Worker{md("md-0", "v1.32.4")}, docMachines("MachineDeployment", "md-0", "x7k2q", 3, "v1.31.9"))
		}),
		with(kcp("v1.35.0", "v1.36.0"), func(c *cpCase) {
			c.workers = workers([]Worker{{Kind: "MachinePool", Name: "mp-0", Version: ReadVersion("v1.33.1")}}, docMachines("MachinePool", "mp-0", "", 4, "v1.32.4"))
		}),
		{cluster: true, old: "v1.34.3", new: "v1.33.5"},
		{cluster: true, old: "v1.33.5", new: "v1.36.1"},
		{cluster: true, old: "v1.33.5", new: "v1.36.1", plan: classPlan("v1.34.3", "v1.36.1")},
		{cluster: true, old: "v1.32.4", new: "v1.36.1", plan: classPlan("v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1"), workers: []Worker{md("extra", "v1.32.4")}},
	}
	var quoted []string
	for _, c := range cps {
		d := EvaluateControlPlane(c.change())
		require.NotEmpty(t, d.Violations, "%+v", c)
		for _, v := range d.Violations {
			quoted = append(quoted, v.String())
		}
	}
	workers := []WorkerChange{
		{NewVersion: ReadVersion("1.35.x"), OldVersion: ReadVersion("v1.30.0"), ControlPlane: kcpState("v1.35.0")},
		{NewVersion: ReadVersion("v1.35.0"), OldVersion: ReadVersion("v1.34.3"), ControlPlane: kcpState("v1.35.0", "v1.34.3", "v1.35.0")},
		{NewVersion: ReadVersion("v1.31.0"), OldVersion: ReadVersion("v1.34.3"), ControlPlane: kcpState("v1.35.0", "v1.34.3", "v1.35.0")},
		{NewVersion: ReadVersion("v1.24.17"), ControlPlane: kcpState("v1.27.0")},
	}
	for _, w := range workers {
		w.Kind, w.Name, w.VersionField = "MachineDeployment", "md-0", "spec.template.spec.version"
		d := EvaluateWorker(w)
		require.NotEmpty(t, d.Violations, "%+v", w)
		for _, v := range d.Violations {
			quoted = append(quoted, v.String())
		}
	}
	warnings := []Decision{
		EvaluateControlPlane(kcp("v1.39.0", "v1.40.0").change()),
		EvaluateControlPlane(with(kcp("v1.36.1", "v1.37.0"), func(c *cpCase) { c.oldTag = "3.5.24-0" }).change()),
		EvaluateControlPlane(with(kcp("v1.35.0", "v1.36.0"), func(c *cpCase) {
			c.workers = []Worker{{Kind: "MachinePool", Name: "mp-0", Version: ReadVersion("garbage")}}
		}).change()),
		EvaluateWorker(WorkerChange{Kind: "MachineDeployment", Name: "md-0", OldVersion: ReadVersion("v1.30.0"), NewVersion: ReadVersion("v1.31.0"), ControlPlane: kcpState("v1.35.0")}),
		EvaluateControlPlane(cpCase{cluster: true, old: "v1.33.5", new: "v1.36.1", plan: classPlan("v1.34.3", "v1.35.2", "v1.36.1")}.change()),
		EvaluateControlPlane(cpCase{cluster: true, old: "v1.32.4", new: "v1.36.1", plan: &UpgradePlan{Source: "upgrade-plan extension plan.demo", Extension: "plan.demo"}}.change()),
		EvaluateControlPlane(cpCase{old: "v1.36.1", new: "v1.35.2", unrolled: true, running: []string{"v1.35.2"}}.change()),
		EvaluateControlPlane(cpCase{old: "v1.34.0", new: "v1.34.1", workers: docMachines("MachineDeployment", "md-0", "q4c8v", 5, "v1.35.0")}.change()),
	}
	for _, d := range warnings {
		require.True(t, d.Allowed(), "%v", d.Violations)
		require.Len(t, d.Warnings, 1)
		quoted = append(quoted, d.Warnings[0])
	}
	for _, q := range quoted {
		assert.True(t, strings.Contains(doc, q), "neither docs/policy.md nor docs/reference/policy.md quotes:\n%s", q)
	}
}

// docMachines returns n Machines of a pool named as Cluster API names them:
// the pool, its MachineSet's suffix (none for a MachinePool) and a suffix of
// their own.
func docMachines(poolKind, pool, set string, n int, version string) []Worker {
	suffixes := []string{"4xk2p", "8hq9z", "b2l7d", "f6tnw", "j3rm5"}
	prefix := pool + "-"
	if set != "" {
		prefix += set + "-"
	}
	var out []Worker
	for i := range n {
		suffix := fmt.Sprintf("z%04d", i)
		if i < len(suffixes) {
			suffix = suffixes[i]
		}
		out = append(out, machineOf(poolKind, pool, prefix+suffix, version))
	}
	return out
}
