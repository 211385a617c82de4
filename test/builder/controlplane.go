package builder

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// kubeadm gives a builder the methods that set a kubeadm configuration: a
// KubeadmControlPlane's, or that of the machines of a template.
type kubeadm[B any] struct {
	self   B
	config *bootstrapv1.KubeadmConfigSpec
}

// startKubeadm binds builder b to obj (see start) and to config, obj's
// kubeadm configuration.
func startKubeadm[B interface {
	bind(B, T, string, string)
	bindKubeadm(B, *bootstrapv1.KubeadmConfigSpec)
}, T object[T]](b B, obj T, namespace, name string, config *bootstrapv1.KubeadmConfigSpec) B {
	b.bindKubeadm(b, config)
	return start(b, obj, namespace, name)
}

func (k *kubeadm[B]) bindKubeadm(self B, config *bootstrapv1.KubeadmConfigSpec) {
	k.self, k.config = self, config
}

// WithKubeadmConfigSpec replaces the kubeadm configuration with spec.
func (k kubeadm[B]) WithKubeadmConfigSpec(spec bootstrapv1.KubeadmConfigSpec) B {
	*k.config = spec
	return k.self
}

// WithEtcdImageTag sets the local etcd's image tag ("" for kubeadm's
// default of the version).
func (k kubeadm[B]) WithEtcdImageTag(tag string) B {
	k.config.ClusterConfiguration.Etcd.Local.ImageTag = tag
	return k.self
}

// KubeadmControlPlaneBuilder builds a KubeadmControlPlane.
type KubeadmControlPlaneBuilder struct {
	base[*KubeadmControlPlaneBuilder, *controlplanev1.KubeadmControlPlane]
	kubeadm[*KubeadmControlPlaneBuilder]
}

// KubeadmControlPlane starts a KubeadmControlPlane namespace/name.
func KubeadmControlPlane(namespace, name string) *KubeadmControlPlaneBuilder {
	kcp := &controlplanev1.KubeadmControlPlane{}
	return startKubeadm(&KubeadmControlPlaneBuilder{}, kcp, namespace, name, &kcp.Spec.KubeadmConfigSpec)
}

// WithReplicas sets the number of control-plane machines.
func (b *KubeadmControlPlaneBuilder) WithReplicas(n int32) *KubeadmControlPlaneBuilder {
	b.obj.Spec.Replicas = ptr.To(n)
	return b
}

// WithVersion sets the control plane's Kubernetes version.
func (b *KubeadmControlPlaneBuilder) WithVersion(version string) *KubeadmControlPlaneBuilder {
	b.obj.Spec.Version = version
	return b
}

// WithClusterName labels the control plane with its Cluster's name (a
// control plane names its Cluster only by this label).
func (b *KubeadmControlPlaneBuilder) WithClusterName(name string) *KubeadmControlPlaneBuilder {
	return b.WithLabels(map[string]string{clusterv1.ClusterNameLabel: name})
}

// WithInfrastructureTemplate makes the machines' infrastructure come from
// DevMachineTemplate name.
func (b *KubeadmControlPlaneBuilder) WithInfrastructureTemplate(name string) *KubeadmControlPlaneBuilder {
	b.obj.Spec.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: InfrastructureGroup, Kind: DevMachineTemplateKind, Name: name,
	}
	return b
}

// WithRollingUpdate sets a rolling update strategy of at most maxSurge
// machines above the replicas.
func (b *KubeadmControlPlaneBuilder) WithRollingUpdate(maxSurge int32) *KubeadmControlPlaneBuilder {
	b.obj.Spec.Rollout.Strategy = controlplanev1.KubeadmControlPlaneRolloutStrategy{
		Type: controlplanev1.RollingUpdateStrategyType,
		RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{
			MaxSurge: ptr.To(intstr.FromInt32(maxSurge)),
		},
	}
	return b
}

// WithNodeDeletionTimeout sets how long Cluster API tries to delete a
// machine's node, as its defaulting would.
func (b *KubeadmControlPlaneBuilder) WithNodeDeletionTimeout(seconds int32) *KubeadmControlPlaneBuilder {
	b.obj.Spec.MachineTemplate.Spec.Deletion.NodeDeletionTimeoutSeconds = ptr.To(seconds)
	return b
}

// WithStatusVersion reports in the status that replicas of the machines
// run version (written by a status update once the object exists).
func (b *KubeadmControlPlaneBuilder) WithStatusVersion(version string, replicas int32) *KubeadmControlPlaneBuilder {
	b.obj.Status.Versions = append(b.obj.Status.Versions, clusterv1.StatusVersion{Version: version, Replicas: replicas})
	return b
}

// KubeadmControlPlaneTemplateBuilder builds a KubeadmControlPlaneTemplate.
type KubeadmControlPlaneTemplateBuilder struct {
	base[*KubeadmControlPlaneTemplateBuilder, *controlplanev1.KubeadmControlPlaneTemplate]
	kubeadm[*KubeadmControlPlaneTemplateBuilder]
}

// KubeadmControlPlaneTemplate starts a KubeadmControlPlaneTemplate namespace/name.
func KubeadmControlPlaneTemplate(namespace, name string) *KubeadmControlPlaneTemplateBuilder {
	t := &controlplanev1.KubeadmControlPlaneTemplate{}
	return startKubeadm(&KubeadmControlPlaneTemplateBuilder{}, t, namespace, name, &t.Spec.Template.Spec.KubeadmConfigSpec)
}

// KubeadmConfigTemplateBuilder builds a KubeadmConfigTemplate.
type KubeadmConfigTemplateBuilder struct {
	base[*KubeadmConfigTemplateBuilder, *bootstrapv1.KubeadmConfigTemplate]
	kubeadm[*KubeadmConfigTemplateBuilder]
}

// KubeadmConfigTemplate starts a KubeadmConfigTemplate namespace/name.
func KubeadmConfigTemplate(namespace, name string) *KubeadmConfigTemplateBuilder {
	t := &bootstrapv1.KubeadmConfigTemplate{}
	return startKubeadm(&KubeadmConfigTemplateBuilder{}, t, namespace, name, &t.Spec.Template.Spec)
}
