package policy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A control plane that has never had a Machine has run nothing: no etcd
// member was ever started and no API server served, so its version may go
// either way. "Never" must be a fact, not the absence of Machines from a
// cache at one instant, so the policy asks for all of:
//
//   - the KubeadmControlPlane reports that it was never initialized, has no
//     replica, runs no version and never remediated a Machine (its status,
//     which only its controller writes, and keeps once true);
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
// and cannot be given one while this change is admitted. cluster is the
// stored Cluster when the caller has it (a topology change), else nil and
// it is read.
func (f factReader) neverHadMachine(ctx context.Context, kcp *kcpRead, cluster *clusterv1.Cluster, clusterName string) (bool, error) {
	if clusterName == "" || !kcpReportsNoMachine(kcp) {
		return false, nil
	}
	machines, err := f.controlPlaneMachines(ctx, kcp.obj.Namespace, clusterName)
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
	got := &clusterv1.Cluster{}
	err = f.reader.Get(ctx, types.NamespacedName{Namespace: kcp.obj.Namespace, Name: clusterName}, got, f.getOptions()...)
	switch {
	case apierrors.IsNotFound(err):
		// The controller creates no Machine without its owning Cluster.
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading Cluster %s/%s: %w", kcp.obj.Namespace, clusterName, err)
	}
	return specPaused(got), nil
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
