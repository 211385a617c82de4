package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// pollInterval is how often WaitClusterReady reads the cluster.
	pollInterval = time.Second
	// readyReads is how many consecutive reads must find a cluster ready:
	// Cluster API counts a new machine as up to date only some seconds
	// after creating it, so one early read may look complete.
	readyReads = 3
)

// RolloutState is what a KubeadmControlPlane or MachineDeployment reports
// about its machines.
type RolloutState struct {
	// Kind and Name of the object.
	Kind, Name string
	// Version is the object's Kubernetes version.
	Version string
	// Desired is spec.replicas; Replicas, Ready, Available and UpToDate
	// are the status counts.
	Desired, Replicas, Ready, Available, UpToDate int32
	// Observed reports that status.observedGeneration has caught up with
	// metadata.generation.
	Observed bool
}

// Complete reports whether every desired machine exists, is ready,
// available and up to date, and nothing more exists, for the object's
// latest generation.
func (r RolloutState) Complete() bool {
	return r.Observed && r.Replicas == r.Desired && r.Ready == r.Desired &&
		r.Available == r.Desired && r.UpToDate == r.Desired
}

// String renders the state on one line, e.g.
// "KubeadmControlPlane demo-control-plane v1.35.2: 3/3 ready, 3/3 available, 3/3 up to date".
func (r RolloutState) String() string {
	s := fmt.Sprintf("%s %s %s: %d/%d ready, %d/%d available, %d/%d up to date",
		r.Kind, r.Name, r.Version, r.Ready, r.Desired, r.Available, r.Desired, r.UpToDate, r.Desired)
	if r.Replicas != r.Desired {
		s += fmt.Sprintf(", %d machines", r.Replicas)
	}
	if !r.Observed {
		s += ", new generation not observed yet"
	}
	return s
}

// ClusterState is the state of a demo cluster's control plane, worker
// pools and machines.
type ClusterState struct {
	// Namespace and Name of the Cluster.
	Namespace, Name string
	// ControlPlane is the state of its KubeadmControlPlane.
	ControlPlane RolloutState
	// Workers are the states of its MachineDeployments, by name.
	Workers []RolloutState
	// Machines is the number of its Machines; ReadyMachines the number of
	// them whose Ready condition is true and that are not being deleted.
	Machines, ReadyMachines int
	// Topology is what the Cluster's managed topology asks for; nil for a
	// Cluster without one.
	Topology *TopologyState
}

// TopologyState is what a Cluster's managed topology asks for and whether
// the topology controller has carried it out.
type TopologyState struct {
	// Class is the name of the Cluster's ClusterClass.
	Class string
	// Version is spec.topology.version.
	Version string
	// MachineDeployments is the number of MachineDeployment topologies.
	MachineDeployments int
	// Reconciled reports that the Cluster's TopologyReconciled condition is
	// true for its latest generation: no upgrade step or object creation is
	// pending.
	Reconciled bool
}

// Ready reports whether the control plane and every worker pool are
// complete and the cluster has exactly the desired machines, all ready.
//
// For a Cluster with a managed topology it also requires the topology to be
// carried out: its TopologyReconciled condition true, one MachineDeployment
// per MachineDeployment topology, and the control plane and every worker
// pool at the topology's version (a chained upgrade passes intermediate
// versions, each of them complete for a while).
func (s ClusterState) Ready() bool {
	if t := s.Topology; t != nil {
		if !t.Reconciled || len(s.Workers) != t.MachineDeployments || s.ControlPlane.Version != t.Version {
			return false
		}
		for _, w := range s.Workers {
			if w.Version != t.Version {
				return false
			}
		}
	}
	want := int(s.ControlPlane.Desired)
	if !s.ControlPlane.Complete() {
		return false
	}
	for _, w := range s.Workers {
		if !w.Complete() {
			return false
		}
		want += int(w.Desired)
	}
	return s.Machines == want && s.ReadyMachines == want
}

// String renders the state on one line.
func (s ClusterState) String() string {
	parts := []string{s.ControlPlane.String()}
	for _, w := range s.Workers {
		parts = append(parts, w.String())
	}
	parts = append(parts, fmt.Sprintf("machines %d/%d ready", s.ReadyMachines, s.Machines))
	if t := s.Topology; t != nil {
		parts = append(parts, t.String())
	}
	return fmt.Sprintf("cluster %s: %s", s.Name, strings.Join(parts, "; "))
}

// Summary renders the state briefly, e.g. "control plane 2/3 ready, 3/3 up
// to date; demo-md-0 3/3 ready, 3/3 up to date; machines 5/6 ready".
func (s ClusterState) Summary() string {
	brief := func(r RolloutState) string {
		text := fmt.Sprintf("%d/%d ready, %d/%d up to date", r.Ready, r.Desired, r.UpToDate, r.Desired)
		if r.Replicas != r.Desired {
			text += fmt.Sprintf(" (%d machines)", r.Replicas)
		}
		return text
	}
	parts := []string{"control plane " + brief(s.ControlPlane)}
	for _, w := range s.Workers {
		parts = append(parts, w.Name+" "+brief(w))
	}
	parts = append(parts, fmt.Sprintf("machines %d/%d ready", s.ReadyMachines, s.Machines))
	if t := s.Topology; t != nil && !t.Reconciled {
		parts = append(parts, "topology "+t.Version+" not reconciled yet")
	}
	return strings.Join(parts, "; ")
}

// String renders the topology on one line, e.g. "topology demo-class
// v1.33.5, 1 MachineDeployment topology, reconciled".
func (t TopologyState) String() string {
	state := "reconciled"
	if !t.Reconciled {
		state = "not reconciled yet"
	}
	return fmt.Sprintf("topology %s %s, %d MachineDeployment topology(ies), %s", t.Class, t.Version, t.MachineDeployments, state)
}

// ReadClusterState reads the state of Cluster namespace/name through c: its
// KubeadmControlPlane (the Cluster's controlPlaneRef), its
// MachineDeployments and Machines (by the cluster-name label) and, for a
// Cluster with a managed topology, what the topology asks for. A topology
// Cluster whose control plane the topology controller has not created yet
// is an error.
func ReadClusterState(ctx context.Context, c client.Reader, namespace, name string) (ClusterState, error) {
	state := ClusterState{Namespace: namespace, Name: name}
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return state, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	if topology := cluster.Spec.Topology; topology.IsDefined() {
		reconciled := conditions.Get(cluster, clusterv1.ClusterTopologyReconciledCondition)
		state.Topology = &TopologyState{
			Class:              topology.ClassRef.Name,
			Version:            topology.Version,
			MachineDeployments: len(topology.Workers.MachineDeployments),
			Reconciled: reconciled != nil && reconciled.Status == metav1.ConditionTrue &&
				reconciled.ObservedGeneration == cluster.Generation,
		}
	}
	if !cluster.Spec.ControlPlaneRef.IsDefined() {
		return state, fmt.Errorf("cluster %s/%s has no control plane yet", namespace, name)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	key := client.ObjectKey{Namespace: namespace, Name: cluster.Spec.ControlPlaneRef.Name}
	if err := c.Get(ctx, key, kcp); err != nil {
		return state, fmt.Errorf("reading the control plane of Cluster %s/%s: %w", namespace, name, err)
	}
	state.ControlPlane = ControlPlaneState(kcp)

	inCluster := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}}
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, inCluster...); err != nil {
		return state, fmt.Errorf("listing the MachineDeployments of Cluster %s/%s: %w", namespace, name, err)
	}
	sort.Slice(mds.Items, func(i, j int) bool { return mds.Items[i].Name < mds.Items[j].Name })
	for i := range mds.Items {
		state.Workers = append(state.Workers, MachineDeploymentState(&mds.Items[i]))
	}

	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, inCluster...); err != nil {
		return state, fmt.Errorf("listing the Machines of Cluster %s/%s: %w", namespace, name, err)
	}
	state.Machines = len(machines.Items)
	for i := range machines.Items {
		if MachineReady(&machines.Items[i]) {
			state.ReadyMachines++
		}
	}
	return state, nil
}

// ControlPlaneState returns what kcp reports about its machines.
func ControlPlaneState(kcp *controlplanev1.KubeadmControlPlane) RolloutState {
	return RolloutState{
		Kind: "KubeadmControlPlane", Name: kcp.Name, Version: kcp.Spec.Version,
		Desired:   ptr.Deref(kcp.Spec.Replicas, 1),
		Replicas:  ptr.Deref(kcp.Status.Replicas, 0),
		Ready:     ptr.Deref(kcp.Status.ReadyReplicas, 0),
		Available: ptr.Deref(kcp.Status.AvailableReplicas, 0),
		UpToDate:  ptr.Deref(kcp.Status.UpToDateReplicas, 0),
		Observed:  kcp.Status.ObservedGeneration >= kcp.Generation,
	}
}

// MachineDeploymentState returns what md reports about its machines.
func MachineDeploymentState(md *clusterv1.MachineDeployment) RolloutState {
	return RolloutState{
		Kind: "MachineDeployment", Name: md.Name, Version: md.Spec.Template.Spec.Version,
		Desired:   ptr.Deref(md.Spec.Replicas, 1),
		Replicas:  ptr.Deref(md.Status.Replicas, 0),
		Ready:     ptr.Deref(md.Status.ReadyReplicas, 0),
		Available: ptr.Deref(md.Status.AvailableReplicas, 0),
		UpToDate:  ptr.Deref(md.Status.UpToDateReplicas, 0),
		Observed:  md.Status.ObservedGeneration >= md.Generation,
	}
}

// MachineReady reports whether m is not being deleted and its Ready
// condition is true.
func MachineReady(m *clusterv1.Machine) bool {
	return m.DeletionTimestamp.IsZero() && conditions.IsTrue(m, clusterv1.MachineReadyCondition)
}

// ClusterState reads the state of the Cluster namespace/name.
func (s *Sandbox) ClusterState(ctx context.Context, namespace, name string) (ClusterState, error) {
	return ReadClusterState(ctx, s.Client, namespace, name)
}

// WaitClusterReady waits until the Cluster namespace/name is ready (see
// ClusterState.Ready) on several consecutive reads, calling progress (if
// not nil) each time its state changes. On timeout the error holds the
// last state.
func (s *Sandbox) WaitClusterReady(ctx context.Context, namespace, name string, progress func(ClusterState)) (ClusterState, error) {
	var (
		last      ClusterState
		haveState bool
		lastErr   error
		seen      string
		inARow    int
	)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		state, err := s.ClusterState(ctx, namespace, name)
		switch {
		case err != nil:
			lastErr = err
		default:
			last, haveState = state, true
			if text := state.String(); text != seen {
				seen = text
				if progress != nil {
					progress(state)
				}
			}
			if !state.Ready() {
				inARow = 0
				break
			}
			if inARow++; inARow >= readyReads {
				return state, nil
			}
		}
		select {
		case <-ctx.Done():
			if !haveState {
				return last, fmt.Errorf("waiting for cluster %s/%s to be ready: %w (last error: %w)", namespace, name, ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("waiting for cluster %s/%s to be ready: %w; last state: %s", namespace, name, ctx.Err(), last)
		case <-ticker.C:
		}
	}
}

// RolledOutAt is when the last Machine of the Cluster namespace/name became
// ready, as the API server stored it (the Machines' Ready condition's
// lastTransitionTime, to the second): the end of its last rollout. It is an
// error while a Machine of the cluster is not ready or is being deleted.
func (s *Sandbox) RolledOutAt(ctx context.Context, namespace, name string) (time.Time, error) {
	list := &clusterv1.MachineList{}
	if err := s.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return time.Time{}, fmt.Errorf("listing the Machines of cluster %s/%s: %w", namespace, name, err)
	}
	var last time.Time
	for i := range list.Items {
		m := &list.Items[i]
		if !MachineReady(m) {
			return time.Time{}, fmt.Errorf("cluster %s/%s is not rolled out: machine %s is not ready or is being deleted", namespace, name, m.Name)
		}
		if c := conditions.Get(m, clusterv1.MachineReadyCondition); c.LastTransitionTime.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	return last, nil
}
