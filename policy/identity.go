package policy

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/skew"
)

// The Cluster a control plane belongs to is what Cluster API follows, not
// what a request says. Cluster API's control-plane controller finds it by
// the control plane's owner reference, and the Cluster controller by its
// spec.controlPlaneRef; the cluster-name label is only a copy, which the
// Cluster controller writes back. A label the edit itself changes, or one
// changed by an earlier edit the guard had no reason to look at (a label is
// not what the guard polices), names whatever the editor likes: judged from
// it alone, a control-plane upgrade against a pool three minors behind was
// admitted by setting the label to a Cluster that does not exist, and
// Cluster API upgraded the real cluster anyway.
//
// So a control plane's change is judged against every Cluster it may belong
// to: its owner Cluster and its label as stored (the request's old object,
// which the API server sends), the Cluster whose spec.controlPlaneRef names
// it, and the owner and label the edit gives it. Cluster API makes a worker
// pool's spec.clusterName immutable (its MachineDeployment and MachinePool
// webhooks), but the pool is judged against the stored one too.

// clusterIdentity names the Clusters a control plane's change is judged
// against, the one Cluster API follows first (the stored owner, else the
// Cluster naming it, else the stored label), and says whether the edit
// re-points the control plane.
type clusterIdentity struct {
	// names are the Clusters, each once; empty when none is named.
	names []string
	// moved is true when the edit changes the owner Cluster or the
	// cluster-name label of a stored object.
	moved bool
}

// controlPlaneClusters returns the identity of a control plane of group
// and kind being changed from oldObj (nil on create) into newObj: see
// clusterIdentity. It lists the namespace's Clusters to find the one whose
// spec.controlPlaneRef names the control plane.
func (f factReader) controlPlaneClusters(ctx context.Context, oldObj, newObj client.Object, group, kind string) (clusterIdentity, error) {
	naming, err := f.clusterNaming(ctx, newObj.GetNamespace(), kind, group, newObj.GetName())
	if err != nil {
		return clusterIdentity{}, err
	}
	return identityOf(oldObj, newObj, naming), nil
}

// identityOf is controlPlaneClusters once the Cluster naming the control
// plane is known ("" when none does). oldObj is nil on create.
func identityOf(oldObj, newObj client.Object, naming string) clusterIdentity {
	var id clusterIdentity
	add := func(name string) {
		if name != "" && !slices.Contains(id.names, name) {
			id.names = append(id.names, name)
		}
	}
	if oldObj != nil {
		add(kinds.OwnerCluster(oldObj))
	}
	add(naming)
	if oldObj != nil {
		add(oldObj.GetLabels()[clusterNameLabel])
		id.moved = kinds.OwnerCluster(oldObj) != kinds.OwnerCluster(newObj) || oldObj.GetLabels()[clusterNameLabel] != newObj.GetLabels()[clusterNameLabel]
	}
	add(kinds.OwnerCluster(newObj))
	add(newObj.GetLabels()[clusterNameLabel])
	return id
}

// workersOfAll lists the workers of every Cluster of id (workersOf), one
// Cluster's after the other's.
func (f factReader) workersOfAll(ctx context.Context, namespace string, id clusterIdentity, which workerFilter) ([]skew.Worker, error) {
	var out []skew.Worker
	for _, name := range id.names {
		workers, err := f.workersOf(ctx, namespace, name, which)
		if err != nil {
			return nil, err
		}
		out = append(out, workers...)
	}
	return out, nil
}

// identityWarning is the warning of a change that re-points a control
// plane at another Cluster: it is judged against both.
func identityWarning(obj string, id clusterIdentity) string {
	if !id.moved || len(id.names) < 2 {
		return ""
	}
	return fmt.Sprintf("rollout-guard: %s changes the Cluster it names (owner reference or %s label); judged against Clusters %v, and Cluster API follows its owner reference, not the label", obj, clusterNameLabel, id.names)
}
