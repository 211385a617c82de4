package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// pool is what the builders of MachineDeployments, MachineSets and
// MachinePools have in common: a Cluster, a number of replicas, a machine
// template and (but for a MachinePool) a selector.
type pool[B any, T object[T]] struct {
	base[B, T]
	machineSpec[B]
	clusterName *string
	replicas    **int32
	selector    *metav1.LabelSelector // nil for a MachinePool
	template    *clusterv1.MachineTemplateSpec
}

// startPool binds builder b to obj (see start) and to the fields of obj's
// spec it has in common with the other pools.
func startPool[B interface {
	bind(B, T, string, string)
	bindPool(B, *string, **int32, *metav1.LabelSelector, *clusterv1.MachineTemplateSpec)
}, T object[T]](b B, obj T, namespace, name string, clusterName *string, replicas **int32, selector *metav1.LabelSelector, template *clusterv1.MachineTemplateSpec) B {
	b.bindPool(b, clusterName, replicas, selector, template)
	return start(b, obj, namespace, name)
}

func (p *pool[B, T]) bindPool(self B, clusterName *string, replicas **int32, selector *metav1.LabelSelector, template *clusterv1.MachineTemplateSpec) {
	p.machineSpec = machineSpec[B]{self: self, spec: &template.Spec}
	p.clusterName, p.replicas, p.selector, p.template = clusterName, replicas, selector, template
}

// WithClusterName sets the Cluster of the object and of its machines.
func (p pool[B, T]) WithClusterName(name string) B {
	*p.clusterName = name
	p.template.Spec.ClusterName = name
	return p.base.self
}

// WithReplicas sets the number of machines.
func (p pool[B, T]) WithReplicas(n int32) B {
	*p.replicas = ptr.To(n)
	return p.base.self
}

// WithSelector replaces the selector (matchLabels only) and the labels of
// the machine template with labels (a MachinePool has only the latter).
func (p pool[B, T]) WithSelector(labels map[string]string) B {
	if p.selector != nil {
		*p.selector = metav1.LabelSelector{MatchLabels: copied(labels)}
	}
	p.template.Labels = copied(labels)
	return p.base.self
}

// WithTemplateLabels adds labels to the machine template's only.
func (p pool[B, T]) WithTemplateLabels(labels map[string]string) B {
	p.template.Labels = merged(p.template.Labels, labels)
	return p.base.self
}

// MachineDeploymentBuilder builds a MachineDeployment.
type MachineDeploymentBuilder struct {
	pool[*MachineDeploymentBuilder, *clusterv1.MachineDeployment]
}

// MachineDeployment starts a MachineDeployment namespace/name.
func MachineDeployment(namespace, name string) *MachineDeploymentBuilder {
	md := &clusterv1.MachineDeployment{}
	return startPool(&MachineDeploymentBuilder{}, md, namespace, name, &md.Spec.ClusterName, &md.Spec.Replicas, &md.Spec.Selector, &md.Spec.Template)
}

// WithSpecOf starts from a copy of the spec of md (another pool's, to make
// one like it); the methods called after it change the copy.
func (b *MachineDeploymentBuilder) WithSpecOf(md *clusterv1.MachineDeployment) *MachineDeploymentBuilder {
	b.obj.Spec = *md.Spec.DeepCopy()
	return b
}

// WithRollingUpdate sets a rolling update strategy of at most maxSurge
// machines above and maxUnavailable below the replicas.
func (b *MachineDeploymentBuilder) WithRollingUpdate(maxSurge, maxUnavailable int32) *MachineDeploymentBuilder {
	b.obj.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{
		Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
			MaxSurge:       ptr.To(intstr.FromInt32(maxSurge)),
			MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
		},
	}
	return b
}

// MachineSetBuilder builds a MachineSet.
type MachineSetBuilder struct {
	pool[*MachineSetBuilder, *clusterv1.MachineSet]
}

// MachineSet starts a MachineSet namespace/name.
func MachineSet(namespace, name string) *MachineSetBuilder {
	ms := &clusterv1.MachineSet{}
	return startPool(&MachineSetBuilder{}, ms, namespace, name, &ms.Spec.ClusterName, &ms.Spec.Replicas, &ms.Spec.Selector, &ms.Spec.Template)
}

// OwnedBy makes md the MachineSet's controller, labels the MachineSet with
// md's name and records it as md's revision, as the MachineDeployment
// controller does.
func (b *MachineSetBuilder) OwnedBy(md *clusterv1.MachineDeployment, revision string) *MachineSetBuilder {
	return b.WithOwnerReferences(metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: md.Name, UID: md.UID, Controller: ptr.To(true),
	}).WithLabels(map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name}).
		WithAnnotations(map[string]string{clusterv1.RevisionAnnotation: revision})
}

// MachinePoolBuilder builds a MachinePool.
type MachinePoolBuilder struct {
	pool[*MachinePoolBuilder, *clusterv1.MachinePool]
}

// MachinePool starts a MachinePool namespace/name.
func MachinePool(namespace, name string) *MachinePoolBuilder {
	mp := &clusterv1.MachinePool{}
	return startPool(&MachinePoolBuilder{}, mp, namespace, name, &mp.Spec.ClusterName, &mp.Spec.Replicas, nil, &mp.Spec.Template)
}
