package policy

import (
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
)

// workerVersionField is where a worker pool's (MachineDeployment's or
// MachinePool's) Kubernetes version lives.
const workerVersionField = "spec.template.spec.version"

// SkipTopologyVersionCheckAnnotation is Cluster API's bypass of its own
// topology version checks. The guard's rules still apply with it set.
const SkipTopologyVersionCheckAnnotation = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"

// etcdImageTag is the etcd version a KubeadmControlPlane pins, "" when kubeadm's default applies.
func etcdImageTag(kcp *controlplanev1.KubeadmControlPlane) string {
	if kcp == nil {
		return ""
	}
	return kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
}
