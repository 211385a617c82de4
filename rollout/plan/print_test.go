package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/internal/golden"
)

// goldenPlans are plans as the sandbox shows them, for the printer and the
// schema: a worker pool's template switch, a refused undo of a control
// plane, and a chained upgrade of a ClusterClass cluster.
func goldenPlans() map[string]*v1alpha1.RolloutPlan {
	md := v1alpha1.ObjectPlan{
		Object:  v1alpha1.PlanObjectRef{Kind: "MachineDeployment", Namespace: "default", Name: "demo-md-0"},
		Effect:  v1alpha1.EffectRollout,
		Summary: "infrastructureRef demo-md-0 → demo-md-0-v2",
		Verdict: v1alpha1.PlanVerdict{Admitted: true},
		Changes: []v1alpha1.PlanFieldChange{{Path: "infrastructureRef", From: "DevMachineTemplate/demo-md-0", To: "DevMachineTemplate/demo-md-0-v2", RollsOut: true}},
		Steps:   []v1alpha1.PlanStep{},
		Strategy: &v1alpha1.PlanStrategy{Type: "RollingUpdate", MaxSurge: "1", MaxUnavailable: "0", DeletionOrder: "Random",
			Description: "RollingUpdate: up to 1 new machine above the 3 wanted, at most 0 unavailable; old machines deleted in Random order once new ones are available"},
		Machines: []v1alpha1.PlanMachine{
			{Name: "demo-md-0-8xk2p-4rj9c", Object: "machinedeployment/demo-md-0", MachineSet: "demo-md-0-8xk2p", Version: "v1.33.5", Action: v1alpha1.ActionReplace, Reason: "infrastructureRef DevMachineTemplate/demo-md-0 → DevMachineTemplate/demo-md-0-v2"},
			{Name: "demo-md-0-8xk2p-7tq2d", Object: "machinedeployment/demo-md-0", MachineSet: "demo-md-0-8xk2p", Version: "v1.33.5", Action: v1alpha1.ActionReplace, Reason: "infrastructureRef DevMachineTemplate/demo-md-0 → DevMachineTemplate/demo-md-0-v2"},
			{Name: "demo-md-0-8xk2p-zz5wl", Object: "machinedeployment/demo-md-0", MachineSet: "demo-md-0-8xk2p", Version: "v1.33.5", Action: v1alpha1.ActionReplace, Reason: "infrastructureRef DevMachineTemplate/demo-md-0 → DevMachineTemplate/demo-md-0-v2"},
		},
		Counts:   v1alpha1.PlanCounts{Replace: 3},
		Holds:    []v1alpha1.PlanHold{},
		Duration: v1alpha1.PlanDuration{Basis: "unknown: the history of machinedeployment/demo-md-0 records no rollout or restart to learn from"},
	}
	kcp := v1alpha1.ObjectPlan{
		Object:  v1alpha1.PlanObjectRef{Kind: "KubeadmControlPlane", Namespace: "default", Name: "demo-control-plane"},
		Effect:  v1alpha1.EffectRollout,
		Summary: "undo to revision 1: version v1.34.3 → v1.33.5",
		Verdict: v1alpha1.PlanVerdict{RefusedBy: "rollout-guard", Webhook: "validate.kubeadmcontrolplane.rollout-guard.io", Rules: []string{"ControlPlaneDowngrade", "EtcdDowngrade"},
			Message: `KubeadmControlPlane.controlplane.cluster.x-k8s.io "demo-control-plane" is invalid: [spec.version: Forbidden: KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.34.3 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later, spec.version: Forbidden: KubeadmControlPlane demo-control-plane: etcd downgrade from 3.6.5 to 3.5.24 is not supported [rule EtcdDowngrade]]`,
			Causes: []string{
				"spec.version: Forbidden: KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.34.3 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later",
				"spec.version: Forbidden: KubeadmControlPlane demo-control-plane: etcd downgrade from 3.6.5 to 3.5.24 is not supported [rule EtcdDowngrade]",
			}},
		Changes: []v1alpha1.PlanFieldChange{{Path: "version", From: "v1.34.3", To: "v1.33.5", RollsOut: true}},
		Steps: []v1alpha1.PlanStep{{Part: core.PartControlPlane, Version: "v1.33.5", Etcd: "3.5.24", EtcdSource: "kubeadm's default for v1.33.5",
			Objects: []string{"kubeadmcontrolplane/demo-control-plane"}, Machines: 1}},
		Strategy: &v1alpha1.PlanStrategy{Type: "RollingUpdate", MaxSurge: "1", DeletionOrder: "Oldest",
			Description: "RollingUpdate, maxSurge 1: one machine at a time, a new one created and joined before the oldest is deleted"},
		Machines: []v1alpha1.PlanMachine{{Name: "demo-control-plane-x7vqm", Object: "kubeadmcontrolplane/demo-control-plane", Version: "v1.34.3", Action: v1alpha1.ActionReplace, Reason: "version v1.34.3 → v1.33.5"}},
		Counts:   v1alpha1.PlanCounts{Replace: 1},
		Holds:    []v1alpha1.PlanHold{},
		Duration: v1alpha1.PlanDuration{Known: true, PerMachine: "38s", Estimate: "38s", Basis: "median per machine over 1 machine of the rollout of revision 2 (2030-01-02T02:00:00Z)"},
	}
	cc := v1alpha1.ObjectPlan{
		Object:    v1alpha1.PlanObjectRef{Kind: "Cluster", Namespace: "default", Name: "demo-cc"},
		Effect:    v1alpha1.EffectUpgrade,
		Summary:   "spec.topology.version v1.33.5 → v1.36.1",
		Verdict:   v1alpha1.PlanVerdict{Admitted: true, Warnings: []string{"Cluster demo-cc: Cluster API upgrades the control plane from v1.33.5 through v1.34.3, v1.35.2, v1.36.1 (steps from ClusterClass demo-class spec.kubernetesVersions)"}},
		Changes:   []v1alpha1.PlanFieldChange{{Path: "spec.topology.version", From: "v1.33.5", To: "v1.36.1", RollsOut: true}},
		StepsFrom: "ClusterClass demo-class spec.kubernetesVersions",
		Steps: []v1alpha1.PlanStep{
			{Part: core.PartControlPlane, Version: "v1.34.3", Etcd: "3.6.5", EtcdSource: "kubeadm's default for v1.34.3", Objects: []string{"kubeadmcontrolplane/demo-cc-control-plane"}, Machines: 1},
			{Part: core.PartControlPlane, Version: "v1.35.2", Etcd: "3.6.6", EtcdSource: "kubeadm's default for v1.35.2", Objects: []string{"kubeadmcontrolplane/demo-cc-control-plane"}, Machines: 1},
			{Part: core.PartControlPlane, Version: "v1.36.1", Etcd: "3.6.8", EtcdSource: "kubeadm's default for v1.36.1", Objects: []string{"kubeadmcontrolplane/demo-cc-control-plane"}, Machines: 1},
			{Part: core.PartWorkers, Version: "v1.36.1", Objects: []string{"machinedeployment/demo-cc-md-0"}, Machines: 1},
		},
		Strategy: &v1alpha1.PlanStrategy{Type: "RollingUpdate", MaxSurge: "1", DeletionOrder: "Oldest",
			Description: "RollingUpdate, maxSurge 1: one machine at a time, a new one created and joined before the oldest is deleted"},
		Machines: []v1alpha1.PlanMachine{
			{Name: "demo-cc-control-plane-jq4wz", Object: "kubeadmcontrolplane/demo-cc-control-plane", Version: "v1.33.5", Action: v1alpha1.ActionReplace, Reason: "control plane steps v1.34.3, v1.35.2, v1.36.1"},
			{Name: "demo-cc-md-0-m4x2v-9s8dl", Object: "machinedeployment/demo-cc-md-0", MachineSet: "demo-cc-md-0-m4x2v", Version: "v1.33.5", Action: v1alpha1.ActionReplace, Reason: "workers steps v1.36.1"},
		},
		Counts: v1alpha1.PlanCounts{Replace: 2},
		Holds: []v1alpha1.PlanHold{{Kind: v1alpha1.HoldTopology, Check: "topology.cluster.x-k8s.io/defer-upgrade", Object: "cluster/demo-cc",
			Message: "worker pool md-0 (spec.topology.workers.machineDeployments[name=md-0]) has annotation topology.cluster.x-k8s.io/defer-upgrade: the topology controller does not upgrade it until it is removed"}},
		Duration: v1alpha1.PlanDuration{Basis: "unknown: the history of kubeadmcontrolplane/demo-cc-control-plane records no rollout or restart to learn from"},
	}
	fleet := newRolloutPlan("rollout plan -f demo-class.yaml", nil)
	for _, name := range []string{"demo-cc", "demo-cc-2"} {
		op := md
		op.Object = v1alpha1.PlanObjectRef{Kind: "MachineDeployment", Namespace: "default", Name: name + "-md-0"}
		op.EditedThrough = &v1alpha1.PlanObjectRef{Kind: "ClusterClass", Namespace: "default", Name: "demo-class"}
		op.Summary = "infrastructureRef " + name + "-md-0-xtbb6 → " + name + "-md-0-jlkhb"
		op.Changes = []v1alpha1.PlanFieldChange{{Path: "infrastructureRef", From: "DevMachineTemplate/" + name + "-md-0-xtbb6", To: "DevMachineTemplate/" + name + "-md-0-jlkhb", RollsOut: true}}
		op.Machines = []v1alpha1.PlanMachine{{Name: name + "-md-0-lfwbl-4fd9l", Object: "machinedeployment/" + name + "-md-0", MachineSet: name + "-md-0-lfwbl", Version: "v1.33.5", Action: v1alpha1.ActionReplace, Reason: "infrastructureRef DevMachineTemplate/" + name + "-md-0-xtbb6 → DevMachineTemplate/" + name + "-md-0-jlkhb"}}
		op.Counts = v1alpha1.PlanCounts{Replace: 1}
		op.Duration = v1alpha1.PlanDuration{Basis: "unknown: the history of machinedeployment/" + name + "-md-0 records no rollout or restart to learn from"}
		fleet.Objects = append(fleet.Objects, op)
		fleet.Clusters = append(fleet.Clusters, v1alpha1.ClusterPlan{Cluster: v1alpha1.PlanObjectRef{Kind: "Cluster", Namespace: "default", Name: name}, Class: "default/demo-class",
			Result: v1alpha1.PlanClusterChanged, Objects: []string{"machinedeployment/" + name + "-md-0"}, WorkerReplace: 1, Counts: v1alpha1.PlanCounts{Replace: 1},
			TemplatesRotated: []string{"DevMachineTemplate " + name + "-md-0-jlkhb (new, from class template demo-class-default-worker-v2)"}})
	}
	fleet.Clusters = append(fleet.Clusters, v1alpha1.ClusterPlan{Cluster: v1alpha1.PlanObjectRef{Kind: "Cluster", Namespace: "default", Name: "demo-cc-3"}, Class: "default/demo-class",
		Result: v1alpha1.PlanClusterNotComputed, Reason: "error computing the desired state of the Cluster topology: failed to compute MachineDeployments: DevMachineTemplate default/demo-class-default-worker-v2 not found",
		Objects: []string{}, TemplatesRotated: []string{}})
	fleet.Admitted, fleet.ReplacesMachines, fleet.Fleet = true, true, fleetTotals(fleet.Clusters)
	return map[string]*v1alpha1.RolloutPlan{
		"plan-class-fleet.txt":   fleet,
		"plan-md-template.txt":   newRolloutPlan("rollout plan md/demo-md-0 --template devmachinetemplate/demo-md-0-v2", []v1alpha1.ObjectPlan{md}),
		"plan-kcp-refused.txt":   newRolloutPlan("rollout plan kcp/demo-control-plane --to-revision 1", []v1alpha1.ObjectPlan{kcp}),
		"plan-cluster-chain.txt": newRolloutPlan("rollout plan cluster/demo-cc --version v1.36.1", []v1alpha1.ObjectPlan{cc}),
	}
}

// TestPlanReport pins the report for people (rewrite with -update).
func TestPlanReport(t *testing.T) {
	for name, p := range goldenPlans() {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, writePlan(&out, p))
			golden.Check(t, filepath.Join("..", "testdata", name), out.String())
		})
	}
}

// planSchema loads plan.schema.json, the documented schema of -o json.
func planSchema(t *testing.T) *validate.SchemaValidator {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "api", "v1alpha1", "plan.schema.json"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	defs, _ := doc["definitions"].(map[string]any)
	// kube-openapi's validator does not follow references: inline them.
	expanded, err := json.Marshal(inlineRefs(t, doc, defs, 0))
	require.NoError(t, err)
	s := &spec.Schema{}
	require.NoError(t, json.Unmarshal(expanded, s))
	return validate.NewSchemaValidator(s, nil, "", strfmt.Default)
}

// inlineRefs replaces every {"$ref": "#/definitions/NAME"} in v by that
// definition.
func inlineRefs(t *testing.T, v any, defs map[string]any, depth int) any {
	t.Helper()
	require.Less(t, depth, 20, "recursive schema")
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/definitions/")
			require.True(t, found, "reference %s", ref)
			def, ok := defs[name]
			require.True(t, ok, "no definition %s", name)
			return inlineRefs(t, def, defs, depth+1)
		}
		out := map[string]any{}
		for k, e := range x {
			if k == "definitions" || k == "$schema" {
				continue
			}
			out[k] = inlineRefs(t, e, defs, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = inlineRefs(t, e, defs, depth+1)
		}
		return out
	}
	return v
}

// TestPlanJSONMatchesSchema: -o json of every golden plan validates against
// plan.schema.json, which allows no field it does not document; and the
// schema refuses what it must.
func TestPlanJSONMatchesSchema(t *testing.T) {
	v := planSchema(t)
	for name, p := range goldenPlans() {
		o := &PlanOptions{printFlags: core.NewPrintFlags(), c: planSession{Session: &core.Session{}}}
		o.printFlags.Output = "json"
		var out bytes.Buffer
		o.c.IOStreams.Out = &out
		require.NoError(t, o.print(p))
		var doc any
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
		res := v.Validate(doc)
		assert.True(t, res.IsValid(), "%s: %v\n%s", name, res.Errors, out.String())
	}
	for what, doc := range map[string]string{
		"another apiVersion":  `{"apiVersion":"rollout.rollout-guard.io/v2","kind":"RolloutPlan","change":"","admitted":true,"replacesMachines":false,"objects":[]}`,
		"an undocumented key": `{"apiVersion":"rollout.rollout-guard.io/v1alpha1","kind":"RolloutPlan","change":"","admitted":true,"replacesMachines":false,"objects":[],"extra":1}`,
		"no objects":          `{"apiVersion":"rollout.rollout-guard.io/v1alpha1","kind":"RolloutPlan","change":"","admitted":true,"replacesMachines":false}`,
	} {
		var d any
		require.NoError(t, json.Unmarshal([]byte(doc), &d))
		assert.False(t, v.Validate(d).IsValid(), "the schema refuses %s", what)
	}
}

// TestPlanYAML: -o yaml prints the same RolloutPlan.
func TestPlanYAML(t *testing.T) {
	o := &PlanOptions{printFlags: core.NewPrintFlags(), c: planSession{Session: &core.Session{}}}
	o.printFlags.Output = "yaml"
	var out bytes.Buffer
	o.c.IOStreams.Out = &out
	p := goldenPlans()["plan-kcp-refused.txt"]
	require.NoError(t, o.print(p))
	assert.Contains(t, out.String(), "apiVersion: rollout.rollout-guard.io/v1alpha1\n")
	assert.Contains(t, out.String(), "kind: RolloutPlan\n")
	assert.Equal(t, metav1.TypeMeta{APIVersion: v1alpha1.PlanAPIVersion, Kind: v1alpha1.PlanKind}, p.TypeMeta)
}
