package builder

import (
	"slices"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ClusterClassBuilder builds a ClusterClass.
type ClusterClassBuilder struct {
	base[*ClusterClassBuilder, *clusterv1.ClusterClass]
}

// ClusterClass starts a ClusterClass namespace/name.
func ClusterClass(namespace, name string) *ClusterClassBuilder {
	return start(&ClusterClassBuilder{}, &clusterv1.ClusterClass{}, namespace, name)
}

// TemplateRef names template name of kind in apiVersion, as a ClusterClass does.
func TemplateRef(apiVersion, kind, name string) clusterv1.ClusterClassTemplateReference {
	return clusterv1.ClusterClassTemplateReference{APIVersion: apiVersion, Kind: kind, Name: name}
}

// WithInfrastructureClusterTemplate sets the template of the clusters'
// infrastructure and how it names what it makes from it.
func (b *ClusterClassBuilder) WithInfrastructureClusterTemplate(ref clusterv1.ClusterClassTemplateReference, naming string) *ClusterClassBuilder {
	b.obj.Spec.Infrastructure = clusterv1.InfrastructureClass{TemplateRef: ref, Naming: clusterv1.InfrastructureClassNamingSpec{Template: naming}}
	return b
}

// WithControlPlaneTemplate sets the template of the clusters' control
// planes, that of their machines' infrastructure, and how it names the
// control planes.
func (b *ClusterClassBuilder) WithControlPlaneTemplate(ref, machineInfrastructure clusterv1.ClusterClassTemplateReference, naming string) *ClusterClassBuilder {
	b.obj.Spec.ControlPlane = clusterv1.ControlPlaneClass{
		TemplateRef:           ref,
		MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{TemplateRef: machineInfrastructure},
		Naming:                clusterv1.ControlPlaneClassNamingSpec{Template: naming},
	}
	return b
}

// WithWorkerMachineDeploymentClasses adds MachineDeployment classes.
func (b *ClusterClassBuilder) WithWorkerMachineDeploymentClasses(classes ...clusterv1.MachineDeploymentClass) *ClusterClassBuilder {
	w := &b.obj.Spec.Workers
	w.MachineDeployments = append(w.MachineDeployments, classes...)
	return b
}

// WithVariables adds variables.
func (b *ClusterClassBuilder) WithVariables(vars ...clusterv1.ClusterClassVariable) *ClusterClassBuilder {
	b.obj.Spec.Variables = append(b.obj.Spec.Variables, vars...)
	return b
}

// WithPatches adds patches.
func (b *ClusterClassBuilder) WithPatches(patches ...clusterv1.ClusterClassPatch) *ClusterClassBuilder {
	b.obj.Spec.Patches = append(b.obj.Spec.Patches, patches...)
	return b
}

// WithKubernetesVersions sets the versions a topology of the class may be
// at (a copy of versions; none: any, one minor at a time).
func (b *ClusterClassBuilder) WithKubernetesVersions(versions []string) *ClusterClassBuilder {
	b.obj.Spec.KubernetesVersions = slices.Clone(versions)
	return b
}

// MachineDeploymentClassBuilder builds a ClusterClass's MachineDeployment class.
type MachineDeploymentClassBuilder struct {
	obj clusterv1.MachineDeploymentClass
}

// MachineDeploymentClass starts MachineDeployment class name.
func MachineDeploymentClass(name string) *MachineDeploymentClassBuilder {
	return &MachineDeploymentClassBuilder{obj: clusterv1.MachineDeploymentClass{Class: name}}
}

// WithBootstrapTemplate sets the template of the machines' bootstrap configuration.
func (b *MachineDeploymentClassBuilder) WithBootstrapTemplate(ref clusterv1.ClusterClassTemplateReference) *MachineDeploymentClassBuilder {
	b.obj.Bootstrap = clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref}
	return b
}

// WithInfrastructureTemplate sets the template of the machines' infrastructure.
func (b *MachineDeploymentClassBuilder) WithInfrastructureTemplate(ref clusterv1.ClusterClassTemplateReference) *MachineDeploymentClassBuilder {
	b.obj.Infrastructure = clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref}
	return b
}

// WithNamingTemplate sets how the class names the MachineDeployments it makes.
func (b *MachineDeploymentClassBuilder) WithNamingTemplate(template string) *MachineDeploymentClassBuilder {
	b.obj.Naming = clusterv1.MachineDeploymentClassNamingSpec{Template: template}
	return b
}

// Build returns the MachineDeployment class.
func (b *MachineDeploymentClassBuilder) Build() clusterv1.MachineDeploymentClass {
	return *b.obj.DeepCopy()
}
