package plan

import (
	"context"
	"slices"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// ClusterSwitch plans the switch of the ClusterClass cluster to version
// (spec.topology.version) or to the ClusterClass class (spec.topology.classRef,
// "NAME" or "NAMESPACE/NAME"), one of the two, as `rollout plan cluster/NAME
// --version` or `--class` computes it, and returns the cluster's line of a
// fleet's plan without printing anything: what a staged rollout previews
// and checks, cluster by cluster, before its first edit. The change is
// judged by a server-side dry run (the guard and Cluster API's webhooks);
// a refusal is the plan's Result PlanClusterRefused with the refusal as its
// Reason, not an error.
func ClusterSwitch(ctx context.Context, c *core.Session, cl *core.Clients, cluster *clusterv1.Cluster, version, class string) (v1alpha1.ClusterPlan, error) {
	o := &PlanOptions{c: planSession{Session: c}, Version: version, Class: class}
	if class != "" {
		objs, cps, err := o.planClusterEdit(ctx, cl, cluster.DeepCopy())
		if err != nil {
			return v1alpha1.ClusterPlan{}, err
		}
		if len(cps) == 1 {
			return cps[0], nil
		}
		// The edit of the Cluster itself would be refused.
		return refusedClusterPlan(cluster, objs[0].Verdict), nil
	}
	objs, err := o.planClusterRef(ctx, cl, cluster.DeepCopy())
	if err != nil {
		return v1alpha1.ClusterPlan{}, err
	}
	op := objs[0]
	if !op.Verdict.Admitted {
		return refusedClusterPlan(cluster, op.Verdict), nil
	}
	key := cluster.GetClassKey()
	cp := v1alpha1.ClusterPlan{Cluster: refOf(cluster), Class: key.Namespace + "/" + key.Name, Result: v1alpha1.PlanClusterChanged, Objects: []string{}, TemplatesRotated: []string{}, Counts: op.Counts}
	if op.Effect == v1alpha1.EffectNone {
		cp.Result = v1alpha1.PlanClusterUnchanged
	}
	for _, m := range op.Machines {
		if !slices.Contains(cp.Objects, m.Object) {
			cp.Objects = append(cp.Objects, m.Object)
		}
		if m.Action != v1alpha1.ActionReplace {
			continue
		}
		if strings.HasPrefix(m.Object, "kubeadmcontrolplane/") {
			cp.ControlPlaneReplace++
		} else {
			cp.WorkerReplace++
		}
	}
	return cp, nil
}

// refusedClusterPlan is the plan of a Cluster whose own edit would be
// refused.
func refusedClusterPlan(cluster *clusterv1.Cluster, v v1alpha1.PlanVerdict) v1alpha1.ClusterPlan {
	key := cluster.GetClassKey()
	by := v.RefusedBy
	if by == "" {
		by = "the API server"
	}
	return v1alpha1.ClusterPlan{Cluster: refOf(cluster), Class: key.Namespace + "/" + key.Name, Result: v1alpha1.PlanClusterRefused,
		Reason: "its edit would be refused by " + by + ": " + core.ConditionLine(v.Message), Objects: []string{}, TemplatesRotated: []string{}}
}

// FleetTotalsOf sums the plans of a fleet's clusters; nil for none.
func FleetTotalsOf(cps []v1alpha1.ClusterPlan) *v1alpha1.FleetTotals { return fleetTotals(cps) }
