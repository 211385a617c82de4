package kinds

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var machineGVK = clusterv1.GroupVersion.WithKind("Machine")

// Machine is the kind of Machines, judged by the guard's validating
// webhook only: its spec.version is judged as a worker pool's, but where
// it is the version of the owner its controller reference names — a
// MachineSet, a MachinePool or its Cluster's control plane, whose
// controllers make it and whose own version the guard judged
// (PoolChange.Owned). It has no revisions and no entry in the guard's
// cache of its own (the Machine store keeps what the policy reads).
var Machine = Kind{
	GVK: machineGVK,
	New: func() client.Object { return &clusterv1.Machine{} },
	ClusterName: readAs(func(m *clusterv1.Machine) string {
		return clusterName(m, m.Spec.ClusterName)
	}),
	DecodeLean: decodeLeanAs(machineGVK, func(l leanObject[clusterv1.MachineSpec, skipped], m *clusterv1.Machine) {
		*m = clusterv1.Machine{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
	}),
	// Cluster API reads the preflight-skip annotation on MachineSets (and
	// their MachineDeployments) only: a Machine's is not judged.
	Decide: decideWorkers("Machine", "spec.version", false, true, func(m *clusterv1.Machine) (string, string) {
		return m.Spec.ClusterName, m.Spec.Version
	}),
}
