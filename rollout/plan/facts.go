package plan

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// listPlanMachines reads the Machines of a MachineDeployment or
// KubeadmControlPlane.
func (c planSession) listPlanMachines(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) ([]clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := cl.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), core.MachineLabels(obj)); err != nil {
		return nil, core.Call{Verb: "list", GR: clusterv1.GroupVersion.WithResource("machines").GroupResource(), Kind: "Machine", Namespace: obj.GetNamespace(), Purpose: purpose}.Explain(err)
	}
	return list.Items, nil
}

// listPlanMachineSets reads the MachineSets of a MachineDeployment.
func (c planSession) listPlanMachineSets(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) ([]clusterv1.MachineSet, error) {
	list := &clusterv1.MachineSetList{}
	if err := cl.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), core.MachineSetLabels(obj)); err != nil {
		return nil, core.Call{Verb: "list", GR: clusterv1.GroupVersion.WithResource("machinesets").GroupResource(), Kind: "MachineSet", Namespace: obj.GetNamespace(), Purpose: purpose}.Explain(err)
	}
	return list.Items, nil
}

// holdFactsOf reads what the holds of a change of obj depend on: its
// Cluster and the Cluster's KubeadmControlPlane. A Cluster or control
// plane that cannot be found leaves them out (the holds they would show are
// then not checked); other errors are returned.
func (c planSession) holdFactsOf(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) (holdFacts, error) {
	f := holdFacts{cli: c.Name()}
	name := core.ClusterNameOf(obj)
	if name == "" {
		return f, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			c.Warnf("Cluster %s/%s of %s not found: holds of the Cluster and its control plane are not checked", obj.GetNamespace(), name, core.Describe(obj, core.KindOf(obj)))
			return f, nil
		}
		return f, core.Call{Verb: "get", GR: core.Cluster.GroupResource(), Kind: "Cluster", Namespace: obj.GetNamespace(), Name: name, Purpose: purpose}.Explain(err)
	}
	f.cluster = cluster
	if kcp, ok := obj.(*controlplanev1.KubeadmControlPlane); ok {
		f.controlPlane = kcp
		return f, nil
	}
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() || ref.Kind != core.KubeadmControlPlane.GVK.Kind || ref.APIGroup != core.KubeadmControlPlane.GVK.Group {
		return f, nil
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			return f, nil
		}
		return f, core.Call{Verb: "get", GR: core.KubeadmControlPlane.GroupResource(), Kind: "KubeadmControlPlane", Namespace: cluster.Namespace, Name: ref.Name, Purpose: purpose}.Explain(err)
	}
	f.controlPlane = kcp
	return f, nil
}

// templateAnnotation reads one annotation of a referenced template, ""
// when it cannot be read.
func (c planSession) templateAnnotation(ctx context.Context, cl *core.Clients, namespace string, ref clusterv1.ContractVersionedObjectReference, key string) string {
	mapping, err := cl.Mapper.RESTMapping(ref.GroupKind())
	if err != nil {
		return ""
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, meta); err != nil {
		return ""
	}
	return meta.GetAnnotations()[key]
}

// durationOf estimates how long replacing n machines of obj takes, from its
// recorded history (see EstimateDuration). A history that cannot be read
// leaves it unknown, saying why.
func (c planSession) durationOf(ctx context.Context, cl *core.Clients, obj client.Object, machines []clusterv1.Machine, n int) v1alpha1.PlanDuration {
	if n == 0 {
		return v1alpha1.PlanDuration{Basis: "no machine is replaced"}
	}
	set, err := c.LoadHistory(ctx, cl, obj, "read the history of "+core.Describe(obj, core.KindOf(obj)))
	if err != nil {
		return v1alpha1.PlanDuration{Basis: "unknown: " + err.Error()}
	}
	if !set.Recorded() {
		return v1alpha1.PlanDuration{Basis: fmt.Sprintf("unknown: rollout-guard has recorded no revision of %s", objectName(obj))}
	}
	records := make([]revisions.Record, 0, len(set.Revs))
	for _, r := range set.Revs {
		records = append(records, r.Record)
	}
	return estimateDuration(objectName(obj), records, machines, n)
}
