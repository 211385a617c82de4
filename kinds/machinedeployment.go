package kinds

import (
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// MachineDeployment is the kind of MachineDeployments: its revisions are
// its spec.template, its restarts spec.rollout.after. The cache keeps
// spec.clusterName and spec.template.spec.version (what the policy reads)
// and no status; the history reconciler reads the rest of the template
// from the API server when it is not recorded yet.
var MachineDeployment = Kind{
	GVK: clusterv1.GroupVersion.WithKind("MachineDeployment"),
	New: func() client.Object { return &clusterv1.MachineDeployment{} },
	Snapshot: func(o client.Object) (revisions.Snapshot, error) {
		md, ok := o.(*clusterv1.MachineDeployment)
		if !ok {
			return revisions.Snapshot{}, fmt.Errorf("expected a MachineDeployment, got %T", o)
		}
		return revisions.ForMachineDeployment(md)
	},
	RolloutAfter: func(o client.Object) string {
		md, ok := o.(*clusterv1.MachineDeployment)
		if !ok {
			return ""
		}
		return rolloutAfter(md.Spec.Rollout.After.Time)
	},
	ClusterName: func(o client.Object) string {
		md, _ := o.(*clusterv1.MachineDeployment)
		if md == nil {
			return clusterName(o, "")
		}
		return clusterName(o, md.Spec.ClusterName)
	},
	DecodeLean: func(raw []byte, into client.Object) error {
		md, ok := into.(*clusterv1.MachineDeployment)
		if !ok {
			return fmt.Errorf("expected a MachineDeployment, got %T", into)
		}
		return decodeLean(raw, clusterv1.GroupVersion.WithKind("MachineDeployment"), into, func(l leanObject[clusterv1.MachineDeploymentSpec, skipped]) {
			*md = clusterv1.MachineDeployment{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
		})
	},
	Decide: decidePool("MachineDeployment", func(o client.Object) (string, string, bool) {
		md, ok := o.(*clusterv1.MachineDeployment)
		if !ok || md == nil {
			return "", "", false
		}
		return md.Spec.ClusterName, md.Spec.Template.Spec.Version, true
	}),
	Trim: func(o client.Object) {
		md, ok := o.(*clusterv1.MachineDeployment)
		if !ok {
			return
		}
		version := md.Spec.Template.Spec.Version
		md.Spec = clusterv1.MachineDeploymentSpec{ClusterName: md.Spec.ClusterName}
		md.Spec.Template.Spec.Version = version
		md.Status = clusterv1.MachineDeploymentStatus{}
	},
}
