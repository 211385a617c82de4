package kinds

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Cluster is the kind of Clusters: policed (a topology's version), and
// with revisions of its spec.topology when it has one (a ClusterClass
// cluster: what its operators asked, beside what the topology controller
// then did to its control plane and worker pools, which are theirs). A
// Cluster has no restarts of its own: a rollout.after in its topology is
// part of a topology revision. The cache keeps spec.controlPlaneRef (the
// policy finds the control plane through it), spec.paused (a paused
// cluster gets no first control-plane Machine) and the topology's class
// and version (which say it has one, so revisions), and notes the hash of
// the whole topology; the rest of it (variables, worker and control-plane
// topologies), status, others' annotations, and its labels and owner
// references but what trimClusterMeta keeps are dropped.
var Cluster = Kind{
	GVK:          clusterv1.GroupVersion.WithKind("Cluster"),
	New:          func() client.Object { return &clusterv1.Cluster{} },
	Snapshot:     snapshotAs("Cluster", revisions.ForClusterTopology),
	Tracks:       func(o client.Object) bool { c, ok := o.(*clusterv1.Cluster); return ok && c.Spec.Topology.IsDefined() },
	RolloutAfter: func(client.Object) string { return "" },
	ClusterName:  func(o client.Object) string { return o.GetName() },
	Decide:       decideAs("Cluster", Judge.DecideCluster),
	Trim: trimAs(func(c *clusterv1.Cluster) {
		c.Spec = clusterv1.ClusterSpec{ControlPlaneRef: c.Spec.ControlPlaneRef, Paused: c.Spec.Paused,
			Topology: clusterv1.Topology{ClassRef: c.Spec.Topology.ClassRef, Version: c.Spec.Topology.Version}}
		c.Status = clusterv1.ClusterStatus{}
		trimClusterMeta(c, func(o client.Object) string { return o.GetName() })
	}),
}
