package core

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The registry's field readers and conversions (kinds.go): each takes an
// object of its own kind only.

func machineDeploymentPaused(o client.Object) bool {
	return ptr.Deref(o.(*clusterv1.MachineDeployment).Spec.Paused, false)
}

func clusterPaused(o client.Object) bool {
	return ptr.Deref(o.(*clusterv1.Cluster).Spec.Paused, false)
}

// rolloutCounts are what a rollout's state is read from: spec.replicas,
// the status counts (nil when absent), the generation the controller
// observed and the object's conditions.
type rolloutCounts struct {
	// Desired, Current, UpToDate, Available and Ready are the replica
	// counts; Observed the observed generation; Conditions the object's.
	Desired, Current, UpToDate, Available, Ready *int32
	Observed                                     int64
	Conditions                                   []metav1.Condition
}

func machineDeploymentCounts(o client.Object) rolloutCounts {
	md := o.(*clusterv1.MachineDeployment)
	return rolloutCounts{md.Spec.Replicas, md.Status.Replicas, md.Status.UpToDateReplicas, md.Status.AvailableReplicas, md.Status.ReadyReplicas,
		md.Status.ObservedGeneration, md.Status.Conditions}
}

func machinePoolCounts(o client.Object) rolloutCounts {
	mp := o.(*clusterv1.MachinePool)
	return rolloutCounts{mp.Spec.Replicas, mp.Status.Replicas, mp.Status.UpToDateReplicas, mp.Status.AvailableReplicas, mp.Status.ReadyReplicas,
		mp.Status.ObservedGeneration, mp.Status.Conditions}
}

func kubeadmControlPlaneCounts(o client.Object) rolloutCounts {
	kcp := o.(*controlplanev1.KubeadmControlPlane)
	return rolloutCounts{kcp.Spec.Replicas, kcp.Status.Replicas, kcp.Status.UpToDateReplicas, kcp.Status.AvailableReplicas, kcp.Status.ReadyReplicas,
		kcp.Status.ObservedGeneration, kcp.Status.Conditions}
}

// contractCounts reads the contract's replica fields of another provider's
// control plane.
func contractCounts(o client.Object) rolloutCounts {
	u := o.(*unstructured.Unstructured)
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return rolloutCounts{contractInt32(u, "spec", "replicas"), contractInt32(u, "status", "replicas"), contractInt32(u, "status", "upToDateReplicas"),
		contractInt32(u, "status", "availableReplicas"), contractInt32(u, "status", "readyReplicas"), observed, contractConditions(u)}
}

// contractInt32 reads an integer field of a contract control plane, nil
// when absent.
func contractInt32(u *unstructured.Unstructured, path ...string) *int32 {
	v, ok, err := unstructured.NestedInt64(u.Object, path...)
	if !ok || err != nil {
		return nil
	}
	return ptr.To(int32(v))
}

// contractConditions reads a contract control plane's status.conditions;
// conditions that do not decode are left out.
func contractConditions(u *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []metav1.Condition
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func machineDeploymentTemplates(o client.Object) []templateRef {
	spec := o.(*clusterv1.MachineDeployment).Spec.Template.Spec
	return definedRefs(
		templateRef{"spec.template.spec.infrastructureRef", "infrastructure template", spec.InfrastructureRef},
		templateRef{"spec.template.spec.bootstrap.configRef", "bootstrap template", spec.Bootstrap.ConfigRef})
}

func machinePoolTemplates(o client.Object) []templateRef {
	spec := o.(*clusterv1.MachinePool).Spec.Template.Spec
	return definedRefs(
		templateRef{"spec.template.spec.infrastructureRef", "infrastructure machine pool", spec.InfrastructureRef},
		templateRef{"spec.template.spec.bootstrap.configRef", "bootstrap config", spec.Bootstrap.ConfigRef})
}

func kubeadmControlPlaneTemplates(o client.Object) []templateRef {
	kcp := o.(*controlplanev1.KubeadmControlPlane)
	return definedRefs(templateRef{"spec.machineTemplate.spec.infrastructureRef", "infrastructure template", kcp.Spec.MachineTemplate.Spec.InfrastructureRef})
}

// contractTemplates reads the contract's
// spec.machineTemplate.spec.infrastructureRef.
func contractTemplates(o client.Object) []templateRef {
	ref, _, _ := unstructured.NestedStringMap(o.(*unstructured.Unstructured).Object, "spec", "machineTemplate", "spec", "infrastructureRef")
	return definedRefs(templateRef{"spec.machineTemplate.spec.infrastructureRef", "infrastructure template",
		clusterv1.ContractVersionedObjectReference{APIGroup: ref["apiGroup"], Kind: ref["kind"], Name: ref["name"]}})
}

// definedRefs keeps the references that are set.
func definedRefs(refs ...templateRef) []templateRef {
	var out []templateRef
	for _, r := range refs {
		if r.ref.IsDefined() {
			out = append(out, r)
		}
	}
	return out
}

// The v1beta1 conversions of plan -f: Cluster API's generated conversion
// to v1beta2, which leaves the references to Cluster API's hand-written
// one (v1beta1's apiVersion becomes v1beta2's apiGroup).

func machineDeploymentFromV1beta1(u *unstructured.Unstructured, out client.Object) error {
	in, o := &clusterv1beta1.MachineDeployment{}, out.(*clusterv1.MachineDeployment)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, in); err != nil {
		return err
	}
	if err := clusterv1beta1.Convert_v1beta1_MachineDeployment_To_v1beta2_MachineDeployment(in, o, nil); err != nil {
		return err
	}
	o.Spec.Template.Spec.InfrastructureRef = contractRef(u, "spec", "template", "spec", "infrastructureRef")
	o.Spec.Template.Spec.Bootstrap.ConfigRef = contractRef(u, "spec", "template", "spec", "bootstrap", "configRef")
	return nil
}

func kubeadmControlPlaneFromV1beta1(u *unstructured.Unstructured, out client.Object) error {
	in, o := &controlplanev1beta1.KubeadmControlPlane{}, out.(*controlplanev1.KubeadmControlPlane)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, in); err != nil {
		return err
	}
	if err := controlplanev1beta1.Convert_v1beta1_KubeadmControlPlane_To_v1beta2_KubeadmControlPlane(in, o, nil); err != nil {
		return err
	}
	o.Spec.MachineTemplate.Spec.InfrastructureRef = contractRef(u, "spec", "machineTemplate", "infrastructureRef")
	return nil
}

func clusterFromV1beta1(u *unstructured.Unstructured, out client.Object) error {
	in, o := &clusterv1beta1.Cluster{}, out.(*clusterv1.Cluster)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, in); err != nil {
		return err
	}
	if err := clusterv1beta1.Convert_v1beta1_Cluster_To_v1beta2_Cluster(in, o, nil); err != nil {
		return err
	}
	o.Spec.ControlPlaneRef = contractRef(u, "spec", "controlPlaneRef")
	o.Spec.InfrastructureRef = contractRef(u, "spec", "infrastructureRef")
	return nil
}

// contractRef reads a v1beta1 object reference (apiVersion, kind, name) as
// a v1beta2 contract reference (apiGroup, kind, name).
func contractRef(u *unstructured.Unstructured, path ...string) clusterv1.ContractVersionedObjectReference {
	ref, _, _ := unstructured.NestedStringMap(u.Object, path...)
	if ref == nil {
		return clusterv1.ContractVersionedObjectReference{}
	}
	gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
	return clusterv1.ContractVersionedObjectReference{APIGroup: gv.Group, Kind: ref["kind"], Name: ref["name"]}
}
