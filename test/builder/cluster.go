package builder

import (
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ClusterBuilder builds a Cluster.
type ClusterBuilder struct {
	base[*ClusterBuilder, *clusterv1.Cluster]
}

// Cluster starts a Cluster namespace/name.
func Cluster(namespace, name string) *ClusterBuilder {
	return start(&ClusterBuilder{}, &clusterv1.Cluster{}, namespace, name)
}

// WithControlPlane makes KubeadmControlPlane name the Cluster's control plane.
func (b *ClusterBuilder) WithControlPlane(name string) *ClusterBuilder {
	return b.WithControlPlaneRef(controlplanev1.GroupVersion.Group, "KubeadmControlPlane", name)
}

// WithControlPlaneRef makes object name of group and kind the Cluster's
// control plane (another provider's, or a kind that is not one).
func (b *ClusterBuilder) WithControlPlaneRef(group, kind, name string) *ClusterBuilder {
	b.obj.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: name}
	return b
}

// WithInfrastructure makes DevCluster name the Cluster's infrastructure.
func (b *ClusterBuilder) WithInfrastructure(name string) *ClusterBuilder {
	b.obj.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: InfrastructureGroup, Kind: "DevCluster", Name: name}
	return b
}

// WithClusterNetwork sets the Cluster's pod and service ranges and its
// service domain.
func (b *ClusterBuilder) WithClusterNetwork(pods, services []string, serviceDomain string) *ClusterBuilder {
	b.obj.Spec.ClusterNetwork = clusterv1.ClusterNetwork{
		Pods:          clusterv1.NetworkRanges{CIDRBlocks: pods},
		Services:      clusterv1.NetworkRanges{CIDRBlocks: services},
		ServiceDomain: serviceDomain,
	}
	return b
}

// WithTopology makes the Cluster a topology of ClusterClass class at
// version.
func (b *ClusterBuilder) WithTopology(class, version string) *ClusterBuilder {
	b.obj.Spec.Topology.ClassRef = clusterv1.ClusterClassRef{Name: class}
	b.obj.Spec.Topology.Version = version
	return b
}

// WithTopologyControlPlaneReplicas sets the topology's control-plane replicas.
func (b *ClusterBuilder) WithTopologyControlPlaneReplicas(n int32) *ClusterBuilder {
	b.obj.Spec.Topology.ControlPlane.Replicas = ptr.To(n)
	return b
}

// WithTopologyMachineDeployments adds MachineDeployment topologies.
func (b *ClusterBuilder) WithTopologyMachineDeployments(mds ...clusterv1.MachineDeploymentTopology) *ClusterBuilder {
	w := &b.obj.Spec.Topology.Workers
	w.MachineDeployments = append(w.MachineDeployments, mds...)
	return b
}

// WithTopologyVariables adds topology variables.
func (b *ClusterBuilder) WithTopologyVariables(vars ...clusterv1.ClusterVariable) *ClusterBuilder {
	b.obj.Spec.Topology.Variables = append(b.obj.Spec.Topology.Variables, vars...)
	return b
}
