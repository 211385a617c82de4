package kinds

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var machineSetGVK = clusterv1.GroupVersion.WithKind("MachineSet")

// MachineSet is the kind of MachineSets. It has no revisions: a
// MachineDeployment's are recorded on the MachineDeployment. Its version
// and its preflight-skip annotation are judged as a MachineDeployment's
// are, but where they are its MachineDeployment's own — the MachineSets
// the MachineDeployment controller makes and keeps in step, which the
// guard judged on the MachineDeployment (PoolChange.Owned). The cache
// keeps, for the Machines it owns, its UID, spec.clusterName and
// spec.template.spec.version only.
var MachineSet = Kind{
	GVK: machineSetGVK,
	New: func() client.Object { return &clusterv1.MachineSet{} },
	ClusterName: readAs(func(ms *clusterv1.MachineSet) string {
		return clusterName(ms, ms.Spec.ClusterName)
	}),
	DecodeLean: decodeLeanAs(machineSetGVK, func(l leanObject[clusterv1.MachineSetSpec, skipped], ms *clusterv1.MachineSet) {
		*ms = clusterv1.MachineSet{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
	}),
	Decide: decideWorkers("MachineSet", "", true, true, func(ms *clusterv1.MachineSet) (string, string) {
		return ms.Spec.ClusterName, ms.Spec.Template.Spec.Version
	}),
	Trim: trimAs(func(ms *clusterv1.MachineSet) {
		version := ms.Spec.Template.Spec.Version
		ms.Spec = clusterv1.MachineSetSpec{ClusterName: ms.Spec.ClusterName}
		ms.Spec.Template.Spec.Version = version
		ms.Status = clusterv1.MachineSetStatus{}
	}),
}
