package builder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// machineSpec gives a builder the methods that set a Machine's spec: a
// Machine's own, or the template of the machines of a MachineDeployment,
// MachineSet or MachinePool.
type machineSpec[B any] struct {
	self B
	spec *clusterv1.MachineSpec
}

// WithVersion sets the machines' Kubernetes version.
func (m machineSpec[B]) WithVersion(version string) B {
	m.spec.Version = version
	return m.self
}

// WithBootstrapTemplate makes the machines' bootstrap configuration come
// from KubeadmConfigTemplate name.
func (m machineSpec[B]) WithBootstrapTemplate(name string) B {
	return m.withBootstrapRef("KubeadmConfigTemplate", name)
}

// WithBootstrapConfig makes the machines' bootstrap configuration
// KubeadmConfig name (as a MachinePool names it).
func (m machineSpec[B]) WithBootstrapConfig(name string) B {
	return m.withBootstrapRef("KubeadmConfig", name)
}

func (m machineSpec[B]) withBootstrapRef(kind, name string) B {
	m.spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: bootstrapv1.GroupVersion.Group, Kind: kind, Name: name,
	}
	return m.self
}

// WithBootstrapDataSecret gives the machines bootstrap data ready in
// Secret name, without a bootstrap configuration.
func (m machineSpec[B]) WithBootstrapDataSecret(name string) B {
	m.spec.Bootstrap.DataSecretName = ptr.To(name)
	return m.self
}

// WithInfrastructureRef makes the machines' infrastructure object name of
// kind, in InfrastructureGroup.
func (m machineSpec[B]) WithInfrastructureRef(kind, name string) B {
	m.spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: InfrastructureGroup, Kind: kind, Name: name,
	}
	return m.self
}

// WithInfrastructureTemplate makes the machines' infrastructure come from
// DevMachineTemplate name.
func (m machineSpec[B]) WithInfrastructureTemplate(name string) B {
	return m.WithInfrastructureRef(DevMachineTemplateKind, name)
}

// WithNodeDeletionTimeout sets how long Cluster API tries to delete a
// machine's node, as its defaulting would.
func (m machineSpec[B]) WithNodeDeletionTimeout(seconds int32) B {
	m.spec.Deletion.NodeDeletionTimeoutSeconds = ptr.To(seconds)
	return m.self
}

// MachineBuilder builds a Machine.
type MachineBuilder struct {
	base[*MachineBuilder, *clusterv1.Machine]
	machineSpec[*MachineBuilder]
}

// Machine starts a Machine namespace/name.
func Machine(namespace, name string) *MachineBuilder {
	b := start(&MachineBuilder{}, &clusterv1.Machine{}, namespace, name)
	b.machineSpec = machineSpec[*MachineBuilder]{self: b, spec: &b.obj.Spec}
	return b
}

// WithClusterName sets the Machine's Cluster.
func (b *MachineBuilder) WithClusterName(name string) *MachineBuilder {
	b.obj.Spec.ClusterName = name
	return b
}

// WithNodeVersion reports in the Machine's status that its node's kubelet
// runs version (written by a status update once the Machine exists).
func (b *MachineBuilder) WithNodeVersion(version string) *MachineBuilder {
	b.obj.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: version}
	return b
}
