package sandbox

import (
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// What the demo clusters and the classes' templates have in common.
const (
	// podCIDR, serviceCIDR and serviceDomain are a demo cluster's network,
	// as in Cluster API's quick start.
	podCIDR       = "192.168.0.0/16"
	serviceCIDR   = "10.128.0.0/12"
	serviceDomain = "cluster.local"
	// nodeDeletionTimeoutSeconds is Cluster API's default, which its
	// Machine defaulting webhook would set.
	nodeDeletionTimeoutSeconds = 10
)

// inMemoryAnnotations are the annotations of a DevCluster of the in-memory
// backend, which writes one and panics on a nil map.
func inMemoryAnnotations() map[string]string {
	return map[string]string{"rollout-guard.io/sandbox": "true"}
}

// nodeRegistration is how a simulated machine joins: containerd's socket,
// and a kubelet that evicts nothing for want of disk.
func nodeRegistration() bootstrapv1.NodeRegistrationOptions {
	return bootstrapv1.NodeRegistrationOptions{
		CRISocket: "unix:///var/run/containerd/containerd.sock",
		KubeletExtraArgs: []bootstrapv1.Arg{
			{Name: "eviction-hard", Value: ptr.To("nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%")},
		},
	}
}

// controlPlaneConfig is the kubeadm configuration of a control plane's
// machines: an API server certificate valid locally.
func controlPlaneConfig() bootstrapv1.KubeadmConfigSpec {
	return bootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: bootstrapv1.ClusterConfiguration{
			APIServer: bootstrapv1.APIServer{CertSANs: []string{"localhost", "127.0.0.1", "0.0.0.0"}},
		},
		InitConfiguration: bootstrapv1.InitConfiguration{NodeRegistration: nodeRegistration()},
		JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration()},
	}
}

// workerConfig is the kubeadm configuration of a worker machine.
func workerConfig() bootstrapv1.KubeadmConfigSpec {
	return bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration()}}
}
