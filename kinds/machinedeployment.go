package kinds

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

var machineDeploymentGVK = clusterv1.GroupVersion.WithKind("MachineDeployment")

// MachineDeployment is the kind of MachineDeployments: its revisions are
// its spec.template, its restarts spec.rollout.after. The cache keeps
// spec.clusterName and spec.template.spec.version (what the policy reads),
// no status, and of its labels and owner references only what
// trimClusterMeta keeps; the history reconciler reads the rest of the template
// from the API server when it is not recorded yet.
var MachineDeployment = Kind{
	GVK:         machineDeploymentGVK,
	New:         func() client.Object { return &clusterv1.MachineDeployment{} },
	Snapshot:    snapshotAs("MachineDeployment", revisions.ForMachineDeployment),
	Fingerprint: fingerprintAs("MachineDeployment", revisions.FingerprintMachineDeployment),
	RolloutAfter: readAs(func(md *clusterv1.MachineDeployment) string {
		return rolloutAfter(md.Spec.Rollout.After.Time)
	}),
	ClusterName: readAs(func(md *clusterv1.MachineDeployment) string {
		return clusterName(md, md.Spec.ClusterName)
	}),
	DecodeLean: decodeLeanAs(machineDeploymentGVK, func(l leanObject[clusterv1.MachineDeploymentSpec, skipped], md *clusterv1.MachineDeployment) {
		*md = clusterv1.MachineDeployment{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
	}),
	// The preflight-skip annotation of a MachineDeployment is copied onto
	// its MachineSets, so it is judged here.
	Decide: decideWorkers("MachineDeployment", "", true, false, func(md *clusterv1.MachineDeployment) (string, string) {
		return md.Spec.ClusterName, md.Spec.Template.Spec.Version
	}),
	Trim: trimAs(func(md *clusterv1.MachineDeployment) {
		version := md.Spec.Template.Spec.Version
		md.Spec = clusterv1.MachineDeploymentSpec{ClusterName: md.Spec.ClusterName}
		md.Spec.Template.Spec.Version = version
		md.Status = clusterv1.MachineDeploymentStatus{}
		trimClusterMeta(md, func(o client.Object) string { return clusterName(o, md.Spec.ClusterName) })
	}),
}
