package kinds

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster is the kind of Clusters: policed (a topology's version) but
// without revisions of its own. The cache keeps spec.controlPlaneRef (the
// policy finds the control plane through it) and spec.paused (a paused
// cluster gets no first control-plane Machine); topology, variables,
// status, labels, owners and others' annotations are dropped.
var Cluster = Kind{
	GVK:          clusterv1.GroupVersion.WithKind("Cluster"),
	New:          func() client.Object { return &clusterv1.Cluster{} },
	RolloutAfter: func(client.Object) string { return "" },
	ClusterName:  func(o client.Object) string { return o.GetName() },
	Decide:       decideAs("Cluster", Judge.DecideCluster),
	Trim: trimAs(func(c *clusterv1.Cluster) {
		c.Spec = clusterv1.ClusterSpec{ControlPlaneRef: c.Spec.ControlPlaneRef, Paused: c.Spec.Paused}
		c.Status = clusterv1.ClusterStatus{}
	}),
	ContentCached: true,
}
