package kinds

import (
	"encoding/base64"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

var machinePoolGVK = clusterv1.GroupVersion.WithKind("MachinePool")

// MachinePool is the kind of MachinePools: its revisions are its
// spec.template. A MachinePool has no rollout.after (Cluster API gives it
// none), so it is never restarted. The cache keeps spec.clusterName and
// spec.template (its whole revision content) and no status, nor
// spec.providerIDList, which holds one entry per instance (up to 10,000).
var MachinePool = Kind{
	GVK:          machinePoolGVK,
	New:          func() client.Object { return &clusterv1.MachinePool{} },
	Snapshot:     snapshotAs("MachinePool", revisions.ForMachinePool),
	RolloutAfter: func(client.Object) string { return "" },
	ClusterName: readAs(func(mp *clusterv1.MachinePool) string {
		return clusterName(mp, mp.Spec.ClusterName)
	}),
	DecodeLean: decodeLeanAs(machinePoolGVK, func(l leanObject[clusterv1.MachinePoolSpec, skipped], mp *clusterv1.MachinePool) {
		*mp = clusterv1.MachinePool{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
	}),
	// Judged exactly as a MachineDeployment: both run kubelets of
	// spec.template.spec.version against their Cluster's control plane.
	Decide: decidePool("MachinePool", func(mp *clusterv1.MachinePool) (string, string) {
		return mp.Spec.ClusterName, mp.Spec.Template.Spec.Version
	}),
	Trim: trimAs(func(mp *clusterv1.MachinePool) {
		mp.Spec = clusterv1.MachinePoolSpec{ClusterName: mp.Spec.ClusterName, Template: mp.Spec.Template}
		mp.Status = clusterv1.MachinePoolStatus{}
	}),
	ContentCached: true,
}

// MachinePoolLabelValue is the value Cluster API writes into the
// cluster.x-k8s.io/pool-name label of the Machines of the MachinePool named
// name, so a client can select them: the name when it is a valid label
// value, else "hash_" + the unpadded URL-safe base64 of its 32-bit FNV-1a
// hash + "_z" (format.MustFormatValue of
// sigs.k8s.io/cluster-api/util/labels/format, which the product does not
// import: it lives in Cluster API's controller module).
func MachinePoolLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name)) // never fails
	return "hash_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)) + "_z"
}
