package plan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/skew"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestPlanDemo previews changes of the plain cluster demo, then makes them
// and compares. It runs beside TestPlanClassCluster (the clusters are
// independent); its own steps run in order.
func TestPlanDemo(t *testing.T) {
	t.Parallel()
	sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"a template switch replaces exactly the machines listed", templateSwitch},
		{"an edited manifest changing a label replaces none", labelOnly},
		{"a restart lists every machine", restart},
		{"a control-plane bump lists its machines and etcd, and holds the workers", controlPlaneBump},
		{"an undo the guard refuses changes nothing", refusedUndo},
		{"a worker pool's bootstrap template, version and admitted undo list its machines", workerPreviews},
		{"a user with read rights and patch gets the same plans and writes nothing", restrictedUser},
	} {
		if !t.Run(step.name, step.run) {
			return // the next steps build on this one
		}
	}
}

func mdKey() client.ObjectKey {
	return client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
}

func kcpKey() client.ObjectKey {
	return client.ObjectKey{Namespace: demo.Namespace, Name: demo.ControlPlaneName()}
}

func templateSwitch(t *testing.T) {
	md := builder.MachineDeployment(demo.Namespace, demo.MachineDeploymentName()).Build()
	before := storedOf(t, md)
	old := machines(t, workers())
	require.Len(t, old, workerMachines)
	change := []string{"md/" + demo.MachineDeploymentName(), "--template", "devmachinetemplate/" + demo.SpareWorkerTemplate()}

	p, _ := plan(t, 0, change...)
	require.Len(t, p.Objects, 1)
	op := p.Objects[0]
	assert.True(t, p.Admitted)
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, v1alpha1.EffectRollout, op.Effect)
	assert.Equal(t, keys(old), planned(op, v1alpha1.ActionReplace), "the plan lists exactly the worker machines")
	assert.Equal(t, v1alpha1.PlanCounts{Replace: workerMachines}, op.Counts)
	assert.Equal(t, []v1alpha1.PlanFieldChange{{Path: "infrastructureRef", From: "DevMachineTemplate/" + demo.MachineDeploymentName(), To: "DevMachineTemplate/" + demo.SpareWorkerTemplate(), RollsOut: true}}, op.Changes)
	require.NotNil(t, op.Strategy)
	assert.Equal(t, v1alpha1.PlanStrategy{Type: "RollingUpdate", MaxSurge: "1", MaxUnavailable: "0", DeletionOrder: "Random",
		Description: "RollingUpdate: up to 1 new machine above the 3 wanted, at most 0 unavailable; old machines deleted in Random order once new ones are available"}, *op.Strategy)
	assert.Empty(t, op.Holds)
	assert.False(t, op.Duration.Known, "the pool has never rolled out: %s", op.Duration.Basis)
	report(t, 0, change...)
	_, strict := plan(t, rollout.ExitWouldReplace, append(change, "--fail-on-replace")...)
	assert.Equal(t, "the change would replace 3 machines (--fail-on-replace); nothing was changed\n", strict.Stderr)
	assert.Equal(t, before, storedOf(t, md), "plan stored nothing: no stamp, no history record")

	// Make the change: exactly the machines listed are replaced.
	begin := time.Now()
	run := cli(t, change...)
	require.Equal(t, 0, run.Code, "stdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	rolledOut(t, "md/"+demo.MachineDeploymentName())
	recordTiming("template switch of 3 workers, rolled out", time.Since(begin))
	now := machines(t, workers())
	assert.Len(t, now, workerMachines)
	for name := range now {
		assert.NotContains(t, old, name, "a new machine")
	}
	var replaced []string
	for name := range old {
		if _, still := now[name]; !still {
			replaced = append(replaced, name)
		}
	}
	slices.Sort(replaced)
	assert.Equal(t, planned(op, v1alpha1.ActionReplace), replaced, "the machines replaced are the ones the plan listed")

	// `rollout status` is done when the new machines serve; Cluster API
	// deletes the emptied MachineSet a moment later. The next step edits
	// the pool only once that cleanup is over: an edit landing inside it
	// can stall Cluster API's MachineDeployment controller (seen in CI: it
	// applied the edit to the MachineSet it had just deleted, "uid
	// mismatch", and did not reconcile the pool again for over 6 minutes),
	// which is Cluster API's race, not what these steps check.
	framework.WaitFor(t, rolloutTimeout, pollInterval, "the emptied MachineSet deleted", func() (bool, string) {
		sets := &clusterv1.MachineSetList{}
		require.NoError(t, sb.Client.List(context.Background(), sets, client.InNamespace(demo.Namespace), workers()))
		var names []string
		for _, ms := range sets.Items {
			names = append(names, ms.Name)
		}
		return len(sets.Items) == 1, strings.Join(names, ", ")
	})
}

// manifest writes objects as one YAML file of several documents, as a
// GitOps repository holds them.
func manifest(t *testing.T, objs ...client.Object) string {
	t.Helper()
	var docs []string
	for _, obj := range objs {
		gvk, err := sb.Client.GroupVersionKindFor(obj)
		require.NoError(t, err)
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		obj.SetManagedFields(nil)
		raw, err := yaml.Marshal(obj)
		require.NoError(t, err)
		docs = append(docs, string(raw))
	}
	path := filepath.Join(t.TempDir(), "edited.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600))
	return path
}

func labelOnly(t *testing.T) {
	ctx := context.Background()
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, mdKey(), md))
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, kcpKey(), kcp))
	beforeMD, beforeKCP := storedOf(t, md.DeepCopy()), storedOf(t, kcp.DeepCopy())
	old := machines(t, workers())

	edited := md.DeepCopy()
	edited.Spec.Template.Labels["team"] = "payments"
	file := manifest(t, edited, kcp.DeepCopy())
	p, _ := plan(t, 0, "-f", file, "--fail-on-replace")
	require.Len(t, p.Objects, 2, "both objects of the file")
	mdPlan, kcpPlan := p.Objects[0], p.Objects[1]
	assert.Equal(t, v1alpha1.PlanObjectRef{Kind: "MachineDeployment", Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}, mdPlan.Object)
	assert.True(t, mdPlan.Verdict.Admitted, "%+v", mdPlan.Verdict)
	assert.Equal(t, v1alpha1.EffectInPlace, mdPlan.Effect)
	assert.Equal(t, []v1alpha1.PlanFieldChange{{Path: "metadata.labels.team", To: "payments"}}, mdPlan.Changes)
	assert.Empty(t, planned(mdPlan, v1alpha1.ActionReplace), "a label is no rollout")
	assert.Equal(t, keys(old), planned(mdPlan, v1alpha1.ActionInPlace))
	assert.Equal(t, v1alpha1.EffectNone, kcpPlan.Effect)
	assert.Equal(t, v1alpha1.PlanCounts{Untouched: cpMachines}, kcpPlan.Counts)
	assert.False(t, p.ReplacesMachines)
	report(t, 0, "-f", file)
	assert.Equal(t, beforeMD, storedOf(t, md.DeepCopy()))
	assert.Equal(t, beforeKCP, storedOf(t, kcp.DeepCopy()))

	// Make it: the label reaches every machine in place, none is replaced.
	kubectl(t, "patch", "md", demo.MachineDeploymentName(), "--type", "merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
	framework.WaitFor(t, rolloutTimeout, pollInterval, "the label on every worker machine", func() (bool, string) {
		list := &clusterv1.MachineList{}
		require.NoError(t, sb.Client.List(ctx, list, client.InNamespace(demo.Namespace), workers()))
		labelled := 0
		for _, m := range list.Items {
			if m.Labels["team"] == "payments" {
				labelled++
			}
		}
		return labelled == workerMachines && len(list.Items) == workerMachines, strings.Join(keys(machines(t, workers())), ", ")
	})
	rolledOut(t, "md/"+demo.MachineDeploymentName())
	assert.Equal(t, keys(old), keys(machines(t, workers())), "no machine was replaced")
}

func restart(t *testing.T) {
	workersNow := machines(t, workers())
	p, _ := plan(t, 0, "md/"+demo.MachineDeploymentName(), "--restart")
	op := p.Objects[0]
	assert.Equal(t, v1alpha1.EffectRestart, op.Effect)
	assert.Equal(t, keys(workersNow), planned(op, v1alpha1.ActionReplace))
	for _, m := range op.Machines {
		assert.True(t, strings.HasPrefix(m.Reason, "created before spec.rollout.after "), m.Reason)
	}

	p, _ = plan(t, 0, "cluster/"+demo.Name, "--restart")
	require.Len(t, p.Objects, 2, "the control plane, then the worker pool")
	assert.Equal(t, "KubeadmControlPlane", p.Objects[0].Object.Kind)
	assert.Equal(t, keys(machines(t, controlPlane())), planned(p.Objects[0], v1alpha1.ActionReplace))
	assert.Equal(t, keys(workersNow), planned(p.Objects[1], v1alpha1.ActionReplace))
	report(t, 0, "cluster/"+demo.Name, "--restart")
}

func controlPlaneBump(t *testing.T) {
	kcp := builder.KubeadmControlPlane(demo.Namespace, demo.ControlPlaneName()).Build()
	before := storedOf(t, kcp)
	old := machines(t, controlPlane())
	require.Len(t, old, cpMachines)
	change := []string{"kcp/" + demo.ControlPlaneName(), "--version", "v1.34.3"}

	p, _ := plan(t, 0, change...)
	require.Len(t, p.Objects, 1)
	op := p.Objects[0]
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, keys(old), planned(op, v1alpha1.ActionReplace), "the plan lists the control-plane machines")
	assert.Equal(t, []v1alpha1.PlanStep{{Part: rollout.PartControlPlane, Version: "v1.34.3", Etcd: "3.6.5", EtcdSource: "kubeadm's default for v1.34.3",
		Objects: []string{"kubeadmcontrolplane/" + demo.ControlPlaneName()}, Machines: cpMachines}}, op.Steps, "one step, with its etcd")
	require.NotNil(t, op.Strategy)
	assert.Equal(t, "Oldest", op.Strategy.DeletionOrder)
	report(t, 0, change...)
	assert.Equal(t, before, storedOf(t, kcp))

	begin := time.Now()
	run := cli(t, change...)
	require.Equal(t, 0, run.Code, "stdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/demo-control-plane rolling out: version v1.33.5 → v1.34.3\n", run.Stdout)

	// While the control plane is at v1.34 and the workers at v1.33, Cluster
	// API's MachineSet preflight checks keep a worker change from creating
	// machines: the plan names the check.
	back := []string{"md/" + demo.MachineDeploymentName(), "--template", "devmachinetemplate/" + demo.MachineDeploymentName()}
	p, _ = plan(t, 0, back...)
	var checks []string
	for _, h := range p.Objects[0].Holds {
		if h.Kind == v1alpha1.HoldPreflightCheck {
			checks = append(checks, h.Check)
		}
	}
	assert.Contains(t, checks, string(clusterv1.MachineSetPreflightCheckKubeadmVersionSkew), "%+v", p.Objects[0].Holds)
	d := p.Objects[0].Duration
	assert.True(t, d.Known, "the template switch is in the history (the label since replaced nothing): %s", d.Basis)
	assert.Contains(t, d.Basis, "machines of the rollout of revision 2")
	report(t, 0, back...)

	rolledOut(t, "kcp/"+demo.ControlPlaneName())
	recordTiming(fmt.Sprintf("control plane v1.33.5 → v1.34.3 (%d machines), rolled out", cpMachines), time.Since(begin))
	now := machines(t, controlPlane())
	assert.Len(t, now, cpMachines)
	for name, v := range now {
		assert.NotContains(t, old, name, "a new machine")
		assert.Equal(t, "v1.34.3", v)
	}
}

func refusedUndo(t *testing.T) {
	kcp := builder.KubeadmControlPlane(demo.Namespace, demo.ControlPlaneName()).Build()
	before := storedOf(t, kcp)
	undo := refusedUndoArgs(t)

	p, run := plan(t, rollout.ExitRefused, undo...)
	t.Logf("rollout plan %s -o json:\n%s", strings.Join(undo, " "), run.Stdout)
	require.Len(t, p.Objects, 1)
	v := p.Objects[0].Verdict
	assert.False(t, p.Admitted)
	assert.False(t, v.Admitted)
	assert.Equal(t, "rollout-guard", v.RefusedBy)
	assert.Equal(t, "validate.kubeadmcontrolplane.rollout-guard.io", v.Webhook)
	assert.Equal(t, []string{"ControlPlaneDowngrade", "EtcdDowngrade"}, v.Rules)
	assert.Contains(t, v.Message, "KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.34.3 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]")
	assert.Contains(t, v.Message, "etcd downgrade from 3.6.5")
	require.Len(t, v.Causes, 2, "one cause per rule, with its field")
	assert.True(t, strings.HasPrefix(v.Causes[0], "spec.version: Forbidden: KubeadmControlPlane demo-control-plane: Kubernetes downgrade"), v.Causes[0])
	assert.Equal(t, "error: the change would be refused: kubeadmcontrolplane/demo-control-plane by rollout-guard (ControlPlaneDowngrade, EtcdDowngrade); nothing was changed\n", run.Stderr)
	assert.Equal(t, []v1alpha1.PlanStep{{Part: rollout.PartControlPlane, Version: startVersion, Etcd: "3.5.24", EtcdSource: "kubeadm's default for v1.33.5",
		Objects: []string{"kubeadmcontrolplane/" + demo.ControlPlaneName()}, Machines: cpMachines}}, p.Objects[0].Steps)
	text := report(t, rollout.ExitRefused, undo...)
	assert.Contains(t, text.Stdout, "  Verdict:  REFUSED by rollout-guard (webhook validate.kubeadmcontrolplane.rollout-guard.io; rules ControlPlaneDowngrade, EtcdDowngrade)\n")
	assert.Equal(t, before, storedOf(t, kcp), "resourceVersion and history unchanged")
}

// refusedUndoArgs is the undo of the control plane to the revision that
// ran startVersion: once it runs v1.34, a Kubernetes and etcd downgrade.
func refusedUndoArgs(t *testing.T) []string {
	t.Helper()
	res := "kcp/" + demo.ControlPlaneName()
	return []string{res, "--to-revision", itoa(revisionWhere(t, res, "version "+startVersion, func(r v1alpha1.HistoryRevision) bool { return r.Version == startVersion }))}
}

// revisionWhere returns the number of the last recorded revision of res
// that match accepts.
func revisionWhere(t *testing.T, res, what string, match func(v1alpha1.HistoryRevision) bool) int64 {
	t.Helper()
	h := history(t, res)
	var n int64
	for _, r := range h.Revisions {
		if match(r) {
			n = r.Revision
		}
	}
	require.NotZero(t, n, "%s has a revision with %s: %+v", res, what, h.Revisions)
	return n
}

// preflightChecks are the names of the MachineSet preflight checks that
// would hold a plan.
func preflightChecks(op v1alpha1.ObjectPlan) []string {
	var out []string
	for _, h := range op.Holds {
		if h.Kind == v1alpha1.HoldPreflightCheck {
			out = append(out, h.Check)
		}
	}
	return out
}

// workerPreviews previews the worker pool's other changes, with the control
// plane at v1.34.3 and the workers at startVersion: a bootstrap config
// template switch, a version (the control plane's minor, and one above it,
// which the guard refuses) and an undo the guard admits. Each lists every
// worker machine to replace, and none is made.
func workerPreviews(t *testing.T) {
	md := builder.MachineDeployment(demo.Namespace, demo.MachineDeploymentName()).Build()
	kcp := builder.KubeadmControlPlane(demo.Namespace, demo.ControlPlaneName()).Build()
	beforeMD, beforeKCP := storedOf(t, md), storedOf(t, kcp)
	old := machines(t, workers())
	require.Len(t, old, workerMachines)
	for name, v := range old {
		require.Equal(t, startVersion, v, "worker %s", name)
	}
	res := "md/" + demo.MachineDeploymentName()
	mdObject := "machinedeployment/" + demo.MachineDeploymentName()
	kubeadmSkew := string(clusterv1.MachineSetPreflightCheckKubeadmVersionSkew)

	// A bootstrap config template switch replaces every worker; at
	// startVersion, a minor below the control plane, the new machines would
	// wait for Cluster API's kubeadm version skew check.
	spare := spareBootstrapTemplate(t)
	change := []string{res, "--bootstrap-template", "kubeadmconfigtemplate/" + spare}
	p, _ := plan(t, 0, change...)
	require.Len(t, p.Objects, 1)
	op := p.Objects[0]
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, v1alpha1.EffectRollout, op.Effect)
	assert.Equal(t, []v1alpha1.PlanFieldChange{{Path: "bootstrap.configRef", From: "KubeadmConfigTemplate/" + demo.MachineDeploymentName(), To: "KubeadmConfigTemplate/" + spare, RollsOut: true}}, op.Changes)
	assert.Equal(t, keys(old), planned(op, v1alpha1.ActionReplace), "the plan lists exactly the worker machines")
	assert.Equal(t, v1alpha1.PlanCounts{Replace: workerMachines}, op.Counts)
	assert.Empty(t, op.Steps, "no version step")
	assert.Contains(t, preflightChecks(op), kubeadmSkew, "%+v", op.Holds)
	report(t, 0, change...)

	// The control plane's version: every worker replaced, one step of the
	// workers, and nothing holds them.
	change = []string{res, "--version", "v1.34.3"}
	p, _ = plan(t, 0, change...)
	require.Len(t, p.Objects, 1)
	op = p.Objects[0]
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, v1alpha1.EffectRollout, op.Effect)
	assert.Equal(t, []v1alpha1.PlanFieldChange{{Path: "version", From: startVersion, To: "v1.34.3", RollsOut: true}}, op.Changes)
	assert.Equal(t, keys(old), planned(op, v1alpha1.ActionReplace))
	for _, m := range op.Machines {
		assert.Equal(t, "version "+startVersion+" → v1.34.3", m.Reason, m.Name)
	}
	assert.Equal(t, []v1alpha1.PlanStep{{Part: rollout.PartWorkers, Version: "v1.34.3", Objects: []string{mdObject}, Machines: workerMachines}}, op.Steps)
	assert.Empty(t, preflightChecks(op), "the new workers join at the control plane's minor: %+v", op.Holds)
	report(t, 0, change...)

	// A minor above the control plane: the guard refuses it.
	change = []string{res, "--version", "v1.35.2"}
	p, run := plan(t, rollout.ExitRefused, change...)
	require.Len(t, p.Objects, 1)
	v := p.Objects[0].Verdict
	assert.False(t, v.Admitted)
	assert.Equal(t, "rollout-guard", v.RefusedBy)
	assert.Equal(t, []string{string(skew.RuleWorkerNewerThanControlPlane)}, v.Rules, "%+v", v)
	assert.Contains(t, run.Stderr, "error: the change would be refused: "+mdObject+" by rollout-guard ("+string(skew.RuleWorkerNewerThanControlPlane)+")")

	// An undo the guard admits: back to the pool's first template.
	first := revisionWhere(t, res, "template "+demo.MachineDeploymentName(), func(r v1alpha1.HistoryRevision) bool {
		return r.Infrastructure == "DevMachineTemplate/"+demo.MachineDeploymentName()
	})
	change = []string{res, "--to-revision", itoa(first)}
	p, _ = plan(t, 0, change...)
	require.Len(t, p.Objects, 1)
	op = p.Objects[0]
	assert.True(t, p.Admitted)
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, v1alpha1.EffectRollout, op.Effect)
	assert.True(t, strings.HasPrefix(op.Summary, "undo to revision "+itoa(first)), op.Summary)
	assert.Contains(t, op.Changes, v1alpha1.PlanFieldChange{Path: "infrastructureRef", From: "DevMachineTemplate/" + demo.SpareWorkerTemplate(), To: "DevMachineTemplate/" + demo.MachineDeploymentName(), RollsOut: true})
	assert.Equal(t, keys(old), planned(op, v1alpha1.ActionReplace), "the undo replaces every worker")
	assert.Equal(t, v1alpha1.PlanCounts{Replace: workerMachines}, op.Counts)
	assert.Contains(t, preflightChecks(op), kubeadmSkew, "%+v", op.Holds)
	report(t, 0, change...)

	assert.Equal(t, beforeMD, storedOf(t, md), "plan stored nothing")
	assert.Equal(t, beforeKCP, storedOf(t, kcp))
	assert.Equal(t, old, machines(t, workers()), "no machine was replaced")
}

// spareBootstrapName is the name of the spare KubeadmConfigTemplate of the
// workers.
func spareBootstrapName() string { return demo.MachineDeploymentName() + "-v2" }

// spareBootstrapTemplate creates a KubeadmConfigTemplate beside the pool's,
// with one kubelet argument more, and returns its name.
func spareBootstrapTemplate(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	orig := &bootstrapv1.KubeadmConfigTemplate{}
	require.NoError(t, sb.Client.Get(ctx, mdKey(), orig))
	config := *orig.Spec.Template.Spec.DeepCopy()
	reg := &config.JoinConfiguration.NodeRegistration
	reg.KubeletExtraArgs = append(reg.KubeletExtraArgs, bootstrapv1.Arg{Name: "max-pods", Value: ptr.To("150")})
	spare := builder.KubeadmConfigTemplate(orig.Namespace, spareBootstrapName()).WithLabels(orig.Labels).WithKubeadmConfigSpec(config).Build()
	require.NoError(t, sb.Client.Create(ctx, spare))
	return spare.Name
}

// history returns `rollout history RES -o json`.
func history(t *testing.T, res string) v1alpha1.RolloutHistory {
	t.Helper()
	run := cli(t, "history", res, "-o", "json")
	require.Equal(t, 0, run.Code, "rollout history %s\nstdout: %s\nstderr: %s", res, run.Stdout, run.Stderr)
	var h v1alpha1.RolloutHistory
	require.NoError(t, yaml.Unmarshal([]byte(run.Stdout), &h), run.Stdout)
	return h
}

// TestPlanClassCluster previews the chained upgrade of demo-cc, then makes
// it: the steps the plan lists are the steps the topology controller takes,
// as the recorded history of its control plane and worker pool shows them.
func TestPlanClassCluster(t *testing.T) {
	t.Parallel()
	sb.RequireClusterReady(t, cc.Namespace, cc.Name, rolloutTimeout)
	ctx := context.Background()
	cluster := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name}, cluster))
	kcp := builder.KubeadmControlPlane(cc.Namespace, cc.ControlPlaneName()).Build()
	beforeKCP := storedOf(t, kcp)
	cpOld := machines(t, client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: cc.ControlPlaneName()})
	wOld := machines(t, client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: cc.MachineDeploymentName()})
	const target = "v1.36.1"

	// A decrease: Cluster API's and the guard's webhooks both refuse it.
	down, run := plan(t, rollout.ExitRefused, "cluster/"+cc.Name, "--version", "v1.32.4")
	assert.Contains(t, []string{"Cluster API", "rollout-guard"}, down.Objects[0].Verdict.RefusedBy, "%+v", down.Objects[0].Verdict)
	assert.Contains(t, run.Stderr, "error: the change would be refused: cluster/demo-cc by ")

	p, _ := plan(t, 0, "cluster/"+cc.Name, "--version", target)
	require.Len(t, p.Objects, 1)
	op := p.Objects[0]
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, v1alpha1.EffectUpgrade, op.Effect)
	assert.Equal(t, "ClusterClass demo-class spec.kubernetesVersions", op.StepsFrom)
	assert.Contains(t, op.Verdict.Warnings, "Cluster demo-cc: Cluster API upgrades the control plane from v1.33.5 through v1.34.3, v1.35.2, v1.36.1 (steps from ClusterClass demo-class spec.kubernetesVersions)", "the guard's own warning")
	var cpSteps, workerSteps, etcd []string
	for _, st := range op.Steps {
		if st.Part == rollout.PartControlPlane {
			cpSteps = append(cpSteps, st.Version)
			etcd = append(etcd, st.Etcd)
		} else {
			workerSteps = append(workerSteps, st.Version)
		}
	}
	assert.Equal(t, []string{"v1.34.3", "v1.35.2", "v1.36.1"}, cpSteps)
	assert.Equal(t, []string{"v1.36.1"}, workerSteps)
	assert.Equal(t, []string{"3.6.5", "3.6.6", "3.6.8"}, etcd, "kubeadm's etcd at each step")
	assert.Equal(t, append(keys(cpOld), keys(wOld)...), planned(op, v1alpha1.ActionReplace))
	report(t, 0, "cluster/"+cc.Name, "--version", target)
	fresh := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(cluster), fresh))
	assert.Equal(t, cluster.ResourceVersion, fresh.ResourceVersion, "plan stored nothing")
	assert.Equal(t, beforeKCP, storedOf(t, kcp))

	// Make it, and read what the topology controller did.
	begin := time.Now()
	kubectl(t, "patch", "cluster", cc.Name, "--type", "merge", "-p", `{"spec":{"topology":{"version":"`+target+`"}}}`)
	rolledOut(t, "cluster/"+cc.Name)
	recordTiming("chained upgrade v1.33.5 → v1.36.1 (1+1 machines)", time.Since(begin))
	made := func(res string) []string {
		var out []string
		for _, r := range history(t, res).Revisions {
			if r.FieldManager == rollout.TopologyFieldManager && r.Version != startVersion {
				out = append(out, r.Version)
			}
		}
		return out
	}
	assert.Equal(t, cpSteps, made("kcp/"+cc.ControlPlaneName()), "the control plane went through the steps listed")
	assert.Equal(t, workerSteps, made("md/"+cc.MachineDeploymentName()), "the workers went through the steps listed")

	// A topology-managed pool is restarted through its Cluster.
	p, _ = plan(t, 0, "md/"+cc.MachineDeploymentName(), "--restart")
	op = p.Objects[0]
	assert.Equal(t, &v1alpha1.PlanObjectRef{Kind: "Cluster", Namespace: cc.Namespace, Name: cc.Name}, op.EditedThrough)
	assert.True(t, op.Verdict.Admitted, "%+v", op.Verdict)
	assert.Equal(t, keys(machines(t, client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: cc.MachineDeploymentName()})), planned(op, v1alpha1.ActionReplace))
	report(t, 0, "md/"+cc.MachineDeploymentName(), "--restart")
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}
