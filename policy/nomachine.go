package policy

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// A control plane that has never had a Machine has run nothing: no etcd
// member was ever started and no API server served, so its version may go
// either way. "Never" must be a fact, not the absence of Machines from a
// cache at one instant, so the policy asks for all of:
//
//   - the KubeadmControlPlane reports that it was never initialized, has no
//     replica, runs no version and never remediated a Machine (its status,
//     which only its controller writes, and keeps once true);
//   - its stamps were made on this object, not carried from where it was
//     created before (carriesHistory: a control plane `clusterctl move`
//     has just created, whose Machines come after it);
//   - no control-plane Machine of its Cluster is listed;
//   - its controller cannot create the first Machine while the change is
//     admitted: the KubeadmControlPlane or its Cluster is paused (Cluster
//     API's controllers do nothing for a paused cluster): the annotation
//     cluster.x-k8s.io/paused on the object judged (the KubeadmControlPlane,
//     or a topology Cluster), or the Cluster's spec.paused. What is read
//     rather than judged is known by its spec only: the guard's cache keeps
//     no annotation of others.
//
// An unpaused control plane without Machines is about to get its first one
// (Cluster API creates it as soon as the Cluster's infrastructure is
// provisioned, which the guard would see only through its cache): its bump
// counts as run, as for every other control plane.

// neverHadMachine reports whether kcp has never had a control-plane Machine
// and cannot be given one while this change is admitted. clusters are the
// Clusters it may belong to (clusterIdentity), each of which must agree.
// cluster is the stored Cluster when the caller has it (a topology change),
// else nil and each is read.
func (f factReader) neverHadMachine(ctx context.Context, kcp *kcpRead, cluster *clusterv1.Cluster, clusters []string) (bool, error) {
	if len(clusters) == 0 || !kcpReportsNoMachine(kcp) || carriesHistory(kcp.obj) {
		return false, nil
	}
	machines, err := f.controlPlaneMachinesOf(ctx, kcp.obj.Namespace, clusters)
	if err != nil || len(machines) > 0 {
		return false, err
	}
	if cluster != nil {
		// A topology change: the Cluster is judged, its control plane read.
		return cannotCreateMachines(cluster), nil
	}
	if _, paused := kcp.obj.Annotations[clusterv1.PausedAnnotation]; paused {
		return true, nil
	}
	for _, name := range clusters {
		got := &clusterv1.Cluster{}
		err = f.reader.Get(ctx, types.NamespacedName{Namespace: kcp.obj.Namespace, Name: name}, got, f.getOptions()...)
		switch {
		case apierrors.IsNotFound(err):
			// The controller creates no Machine without its owning Cluster.
			continue
		case err != nil:
			return false, fmt.Errorf("reading Cluster %s/%s: %w", kcp.obj.Namespace, name, err)
		}
		if !specPaused(got) {
			return false, nil
		}
	}
	return true, nil
}

// carriedHistorySlack is how much earlier than its object's creation a
// revision stamp must be to have been carried from elsewhere: stamps and
// creation times have second precision, and a create the guard stamps
// itself is stored within the second after it was stamped.
const carriedHistorySlack = time.Second

// carriesHistory reports whether obj carries the stamps of a revision made
// before obj was created: it was created with the history it had elsewhere
// (`clusterctl move`, a restore from a backup; the guard keeps such stamps
// only from users who may write RolloutRevisions, see webhooks.Restorers),
// so it may well have had Machines there — they come after it — and its
// status, which a create cannot carry, says nothing of what it ran. Its
// recorded highest run then counts, as for any other control plane.
// Stamps only ever make the policy stricter here: a forged past refuses
// more of its forger's own changes, never fewer.
func carriesHistory(obj client.Object) bool {
	at := revisions.StampsOf(obj).ChangedAt
	created := obj.GetCreationTimestamp().Time
	return !at.IsZero() && !created.IsZero() && at.Add(carriedHistorySlack).Before(created)
}

// kcpReportsNoMachine reports whether the status of a KubeadmControlPlane
// says it never had a Machine: never initialized, no replica, no version
// run, no remediation.
func kcpReportsNoMachine(kcp *kcpRead) bool {
	st := kcp.obj.Status
	initialized := st.Initialization.ControlPlaneInitialized != nil && *st.Initialization.ControlPlaneInitialized
	replicas := st.Replicas != nil && *st.Replicas > 0
	return !initialized && !replicas && len(kcp.running) == 0 && st.LastRemediation.Machine == ""
}

// cannotCreateMachines reports whether Cluster API's control-plane
// controller creates no Machine for cluster, the object judged: it is
// paused.
func cannotCreateMachines(cluster *clusterv1.Cluster) bool {
	if _, paused := cluster.Annotations[clusterv1.PausedAnnotation]; paused {
		return true
	}
	return specPaused(cluster)
}

// specPaused reports whether cluster's spec.paused is true.
func specPaused(cluster *clusterv1.Cluster) bool {
	return cluster.Spec.Paused != nil && *cluster.Spec.Paused
}
