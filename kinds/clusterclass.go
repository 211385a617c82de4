package kinds

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// ClusterClass is the kind of ClusterClasses: its revisions are its spec
// (every Cluster of the class is rolled as the topology controller carries
// a change of it out), it has no restarts and belongs to no Cluster. It is
// not judged by the policy: what a class change does is judged object by
// object, as the topology controller writes each Cluster's control plane
// and worker pools. The cache keeps spec.kubernetesVersions and the
// upgrade-plan extension (how Cluster API plans a chained upgrade, which
// the policy reads) and notes the hash of the whole spec.
var ClusterClass = Kind{
	GVK:          clusterv1.GroupVersion.WithKind("ClusterClass"),
	New:          func() client.Object { return &clusterv1.ClusterClass{} },
	Snapshot:     snapshotAs("ClusterClass", revisions.ForClusterClass),
	RolloutAfter: func(client.Object) string { return "" },
	ClusterName:  func(client.Object) string { return "" },
	Trim: trimAs(func(cc *clusterv1.ClusterClass) {
		spec := clusterv1.ClusterClassSpec{KubernetesVersions: cc.Spec.KubernetesVersions}
		spec.Upgrade.External.GenerateUpgradePlanExtension = cc.Spec.Upgrade.External.GenerateUpgradePlanExtension
		cc.Spec = spec
		cc.Status = clusterv1.ClusterClassStatus{}
	}),
}
