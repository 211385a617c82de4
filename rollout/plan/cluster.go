package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/skew"
)

// planClusterRef plans a change of a whole Cluster: --version (a ClusterClass
// cluster's spec.topology.version) or --restart.
func (o *PlanOptions) planClusterRef(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster) ([]v1alpha1.ObjectPlan, error) {
	if o.Restart {
		return o.planClusterRestart(ctx, cl, cluster)
	}
	id := "Cluster " + cluster.Namespace + "/" + cluster.Name
	purpose := "plan the upgrade of " + id
	if !cluster.Spec.Topology.IsDefined() {
		return nil, fmt.Errorf("cannot %s: --version on a cluster changes its spec.topology.version, and %s has no topology (it is not a ClusterClass cluster); plan its control plane and worker pools one by one: %s plan kcp/%s --version %s, then %s plan md/NAME --version %s",
			purpose, id, o.c.Name(), orText(cluster.Spec.ControlPlaneRef.Name, "NAME"), o.Version, o.c.Name(), o.Version)
	}
	var verdict v1alpha1.PlanVerdict
	var answer client.Object
	err, _ := core.RetryConflicts(func() error {
		patch, err := core.PatchOf(cluster.ResourceVersion, nil, map[string]any{"topology": map[string]any{"version": o.Version}})
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		verdict, answer, err = o.c.verdictFor(ctx, cl, cluster, types.MergePatchType, patch, purpose)
		return err
	}, func() error {
		o.c.Notef("conflict: %s changed after it was read; reading it again", id)
		obj, err := o.c.Reread(ctx, cl, cluster, purpose)
		if err != nil {
			return err
		}
		cluster = obj.(*clusterv1.Cluster)
		return nil
	})
	if err != nil {
		return nil, err
	}
	planned, _ := answer.(*clusterv1.Cluster)
	if planned == nil {
		planned = cluster.DeepCopy()
		planned.Spec.Topology.Version = o.Version
	}
	op, err := o.c.topologyPlan(ctx, cl, cluster, planned)
	if err != nil {
		return nil, err
	}
	op.Verdict = verdict
	return []v1alpha1.ObjectPlan{op}, nil
}

// topologyPlan computes what the change of a ClusterClass cluster's
// spec.topology.version from live to planned does: the steps Cluster API's
// topology controller takes the control plane and the worker pools
// through, the etcd version at each control-plane step, the machines each
// part replaces, and what would hold it.
func (c planSession) topologyPlan(ctx context.Context, cl *core.Clients, live, planned *clusterv1.Cluster) (v1alpha1.ObjectPlan, error) {
	id := "Cluster " + live.Namespace + "/" + live.Name
	purpose := "plan the upgrade of " + id
	from, to := live.Spec.Topology.Version, planned.Spec.Topology.Version
	op := v1alpha1.ObjectPlan{Object: refOf(live), Changes: []v1alpha1.PlanFieldChange{}, Steps: []v1alpha1.PlanStep{}, Machines: []v1alpha1.PlanMachine{}, Holds: []v1alpha1.PlanHold{}}
	if from == to {
		op.Effect, op.Summary = v1alpha1.EffectNone, "spec.topology.version stays "+from
		op.Duration = v1alpha1.PlanDuration{Basis: "no machine is replaced"}
		return op, nil
	}
	op.Effect = v1alpha1.EffectUpgrade
	op.Summary = fmt.Sprintf("spec.topology.version %s → %s", core.OrNone(from), to)
	op.Changes = append(op.Changes, v1alpha1.PlanFieldChange{Path: "spec.topology.version", From: from, To: to, RollsOut: true})

	m, err := c.ClusterMembers(ctx, cl, live, purpose)
	if err != nil {
		return op, err
	}
	kcp := m.ControlPlane
	if kcp == nil {
		return op, fmt.Errorf("cannot %s: it has no KubeadmControlPlane yet (spec.controlPlaneRef %q): the topology controller creates it at %s, with nothing to replace", purpose, live.Spec.ControlPlaneRef.Name, to)
	}
	cpVersion := kcp.Spec.Version

	// The control plane's steps: from the class's version list, its
	// upgrade-plan extension, or one minor; a decrease (which Cluster API
	// refuses) as the one step asked.
	class := &clusterv1.ClusterClass{}
	key := live.GetClassKey()
	var cpPlan []string
	extension := ""
	switch err := cl.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, class); {
	case lowerVersion(to, cpVersion):
		op.StepsFrom = "a decrease from the control plane's " + cpVersion + ", which Cluster API does not carry out"
		cpPlan = []string{to}
	case apierrors.IsNotFound(err):
		return op, fmt.Errorf("cannot %s: its ClusterClass %s/%s (spec.topology.classRef) does not exist", purpose, key.Namespace, key.Name)
	case err != nil:
		return op, core.Call{Verb: "get", GR: clusterv1.GroupVersion.WithResource("clusterclasses").GroupResource(), Kind: "ClusterClass", Namespace: key.Namespace, Name: key.Name, Purpose: purpose}.Explain(err)
	case class.Spec.Upgrade.External.GenerateUpgradePlanExtension != "":
		// Asked below, once the workers' versions are known.
		extension = class.Spec.Upgrade.External.GenerateUpgradePlanExtension
		cpPlan = []string{to}
	case len(class.Spec.KubernetesVersions) > 0:
		op.StepsFrom = "ClusterClass " + class.Name + " spec.kubernetesVersions"
		if cpPlan, err = policy.ClassUpgradePlan(class.Spec.KubernetesVersions, to, cpVersion); err != nil {
			return op, fmt.Errorf("cannot %s: ClusterClass %s: %w", purpose, class.Name, err)
		}
	default:
		op.StepsFrom = "Cluster API's one-minor upgrade: ClusterClass " + class.Name + " lists no spec.kubernetesVersions and names no upgrade-plan extension"
		cpPlan = oneMinorPlan(to, cpVersion)
	}

	// The workers: the topology's MachineDeployments (those it removed, and
	// pools added by hand, are not upgraded by it).
	var workerObjects, workerVersions []string
	var workerMachines []clusterv1.Machine
	for _, md := range m.MachineDeployments {
		if !core.TopologyOwned(md) || !md.DeletionTimestamp.IsZero() {
			continue
		}
		workerObjects = append(workerObjects, objectName(md))
		workerVersions = append(workerVersions, md.Spec.Template.Spec.Version)
		machines, err := c.listPlanMachines(ctx, cl, md, purpose)
		if err != nil {
			return op, err
		}
		workerMachines = append(workerMachines, machines...)
	}
	var extWorkersPlan []string
	if extension != "" {
		stepsFrom := "upgrade-plan extension " + extension + " of ClusterClass " + class.Name
		extCP, extWorkers, err := askUpgradePlanExtension(ctx, cl, extension, planned, cpVersion, minVersion(workerVersions))
		switch {
		case err != nil:
			c.Warnf("cannot ask %s for the upgrade's steps (%v): only the target is shown", stepsFrom, core.OneLine(err.Error()))
			op.StepsFrom = stepsFrom + ", which decides the steps when the upgrade starts: only the target is shown"
		case len(extCP) == 0 && len(extWorkers) == 0:
			op.StepsFrom = stepsFrom + ", asked now: no step"
			cpPlan = nil
		default:
			op.StepsFrom = stepsFrom + ", asked now (Cluster API asks it again when the upgrade starts)"
			cpPlan, extWorkersPlan = extCP, extWorkers
			if problem := extensionPlanProblem(to, cpVersion, minVersion(workerVersions), extCP, extWorkers); problem != "" {
				c.Warnf("Cluster API refuses the steps %s answers (%s): its topology controller does not start this upgrade until the extension answers steps that end at %s", stepsFrom, problem, to)
			}
		}
	}
	workersPlan, err := workersUpgradePlan(to, cpVersion, minVersion(workerVersions), cpPlan)
	if err != nil {
		return op, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if len(extWorkersPlan) > 0 {
		// The extension's own steps for the workers, as Cluster API takes
		// them.
		workersPlan = extWorkersPlan
	}
	cpMachines, err := c.listPlanMachines(ctx, cl, kcp, purpose)
	if err != nil {
		return op, err
	}
	cpStep := "control plane steps " + strings.Join(cpPlan, ", ")
	op.Machines = append(op.Machines, planUpgradeMachines(objectName(kcp), to, cpMachines, cpStep)...)
	wStep := "workers steps " + strings.Join(workersPlan, ", ")
	for _, md := range m.MachineDeployments {
		if !core.TopologyOwned(md) || !md.DeletionTimestamp.IsZero() {
			continue
		}
		own := core.MachinesWithLabel(workerMachines, clusterv1.MachineDeploymentNameLabel, md.Name)
		op.Machines = append(op.Machines, planUpgradeMachines(objectName(md), to, own, wStep)...)
	}
	op.Counts = countMachines(op.Machines)
	nCP, nW := countReplaced(op.Machines, objectName(kcp)), op.Counts.Replace-countReplaced(op.Machines, objectName(kcp))
	if len(cpPlan) > 0 && nCP == 0 {
		nCP = len(cpMachines)
	}
	op.Steps = upgradeSteps(cpVersion, cpPlan, workersPlan, etcdImageTagOf(kcp), objectName(kcp), workerObjects, nCP, nW)
	if nCP > 0 {
		op.Strategy = controlPlaneStrategy(kcp)
	}

	f := holdFacts{cli: c.Name(), cluster: live, controlPlane: kcp, cpMachines: cpMachines}
	op.Holds = append(op.Holds, topologyUpgradeHolds(live, f)...)
	op.Duration = c.upgradeDuration(ctx, cl, kcp, cpMachines, op.Steps)
	return op, nil
}

// lowerVersion reports whether version a is lower than b (both parsed).
func lowerVersion(a, b string) bool {
	av, err1 := skew.ParseVersion(a)
	bv, err2 := skew.ParseVersion(b)
	return err1 == nil && err2 == nil && av.LT(bv)
}

// countReplaced counts the machines of object that are replaced.
func countReplaced(ms []v1alpha1.PlanMachine, object string) int {
	n := 0
	for _, m := range ms {
		if m.Object == object && m.Action == v1alpha1.ActionReplace {
			n++
		}
	}
	return n
}

// upgradeDuration estimates a topology upgrade from the control plane's
// last recorded rollout: its time per machine times every machine every
// step replaces.
func (c planSession) upgradeDuration(ctx context.Context, cl *core.Clients, kcp *controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine, steps []v1alpha1.PlanStep) v1alpha1.PlanDuration {
	total := 0
	for _, st := range steps {
		total += st.Machines
	}
	d := c.durationOf(ctx, cl, kcp, machines, total)
	if d.Known {
		d.Basis += fmt.Sprintf("; %d machine replacements over %d steps, the workers' assumed as long as the control plane's", total, len(steps))
	}
	return d
}

// planClusterRestart plans `restart cluster/NAME`: the control plane, then
// every worker pool; a ClusterClass cluster's through its topology, with
// one write to the Cluster.
func (o *PlanOptions) planClusterRestart(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster) ([]v1alpha1.ObjectPlan, error) {
	id := "Cluster " + cluster.Namespace + "/" + cluster.Name
	purpose := "plan the restart of " + id
	m, err := o.c.ClusterMembers(ctx, cl, cluster, purpose)
	if err != nil {
		return nil, err
	}
	if m.Other != nil {
		o.c.Warnf("the control plane of %s is a %s.%s; rollout plans KubeadmControlPlanes only, so it is left out", id, m.Other.Kind, m.Other.APIGroup)
	}
	var out []v1alpha1.ObjectPlan
	at := o.now()
	if cluster.Spec.Topology.IsDefined() {
		verdict, err := o.c.dryRunTopologyRestart(ctx, cl, cluster.Namespace, core.TopologyRestart{Cluster: cluster.Name, ControlPlane: true, AllWorkers: true}, at, purpose)
		if err != nil {
			return nil, err
		}
		through := refOf(cluster)
		for _, obj := range m.Objects() {
			if !core.TopologyOwned(obj) {
				continue
			}
			op, err := o.restartPlan(ctx, cl, obj, at)
			if err != nil {
				return nil, err
			}
			op.EditedThrough, op.Verdict = &through, verdict
			out = append(out, op)
		}
	}
	for _, obj := range m.Objects() {
		if cluster.Spec.Topology.IsDefined() && core.TopologyOwned(obj) {
			continue
		}
		op, err := o.planObjectChange(ctx, cl, obj)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// planTopologyRestart plans the restart of a topology-managed object,
// which is made through its Cluster.
func (o *PlanOptions) planTopologyRestart(ctx context.Context, cl *core.Clients, obj client.Object) (v1alpha1.ObjectPlan, error) {
	r, err := core.TopologyRestartOf(obj, "plan the restart of")
	if err != nil {
		return v1alpha1.ObjectPlan{}, err
	}
	id, cluster := core.Describe(obj, core.KindOf(obj)), r.Cluster
	at := o.now()
	verdict, err := o.c.dryRunTopologyRestart(ctx, cl, obj.GetNamespace(), r, at, "plan the restart of "+id)
	if err != nil {
		return v1alpha1.ObjectPlan{}, err
	}
	op, err := o.restartPlan(ctx, cl, obj, at)
	if err != nil {
		return v1alpha1.ObjectPlan{}, err
	}
	op.EditedThrough = &v1alpha1.PlanObjectRef{Kind: core.Cluster.GVK.Kind, Namespace: obj.GetNamespace(), Name: cluster}
	op.Verdict = verdict
	return op, nil
}

// restartPlan is what a restart at at does to obj (everything but the
// verdict), the topology controller passing rollout.after on.
func (o *PlanOptions) restartPlan(ctx context.Context, cl *core.Clients, obj client.Object, at time.Time) (v1alpha1.ObjectPlan, error) {
	patch, err := core.PatchOf("", nil, map[string]any{"rollout": map[string]any{"after": metav1.NewTime(at)}})
	if err != nil {
		return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot plan the restart of %s: %w", core.Describe(obj, core.KindOf(obj)), err)
	}
	planned, err := core.ApplyMergePatch(obj, patch)
	if err != nil {
		return v1alpha1.ObjectPlan{}, fmt.Errorf("cannot plan the restart of %s: %w", core.Describe(obj, core.KindOf(obj)), err)
	}
	op, err := o.c.objectPlan(ctx, cl, obj, planned, at)
	if err != nil {
		return op, err
	}
	// The topology controller owns the object: its hold says a direct
	// edit is reverted, which this one is not.
	var holds []v1alpha1.PlanHold
	for _, h := range op.Holds {
		if h.Check != clusterv1.ClusterTopologyOwnedLabel {
			holds = append(holds, h)
		}
	}
	op.Holds = holds
	if op.Holds == nil {
		op.Holds = []v1alpha1.PlanHold{}
	}
	return op, nil
}

// dryRunTopologyRestart sends a topology restart (rollout.after in the
// Cluster's topology) as a server-side dry run.
func (c planSession) dryRunTopologyRestart(ctx context.Context, cl *core.Clients, namespace string, r core.TopologyRestart, at time.Time, purpose string) (v1alpha1.PlanVerdict, error) {
	var v v1alpha1.PlanVerdict
	err, _ := core.RetryConflicts(func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(core.Cluster.GVK)
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.Cluster}, u); err != nil {
			return core.Call{Verb: "get", GR: core.Cluster.GroupResource(), Kind: "Cluster", Namespace: namespace, Name: r.Cluster, Purpose: purpose}.Explain(err)
		}
		ops, _, err := core.TopologyRestartOps(u, r, at.UTC().Format(time.RFC3339), "")
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		data, err := json.Marshal(ops)
		if err != nil {
			return fmt.Errorf("cannot %s: encoding the patch: %w", purpose, err)
		}
		v, _, err = c.verdictFor(ctx, cl, u, types.JSONPatchType, data, purpose)
		return err
	}, func() error { return nil })
	return v, err
}
