package webhooks

import (
	"context"
	"fmt"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetupWithManager registers the cache indexes the guard reads through and
// the validating webhooks, at the paths config/webhook/manifests.yaml names:
//
//	/validate-cluster-x-k8s-io-v1beta2-machinedeployment
//	/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane
//	/validate-cluster-x-k8s-io-v1beta2-cluster
func SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := AddIndexes(ctx, mgr); err != nil {
		return err
	}
	facts := factReader{reader: mgr.GetCache(), mapper: mgr.GetRESTMapper()}

	if err := ctrl.NewWebhookManagedBy(mgr, &clusterv1.MachineDeployment{}).
		WithValidator(&MachineDeploymentValidator{facts: facts}).
		Complete(); err != nil {
		return fmt.Errorf("registering the MachineDeployment webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &controlplanev1.KubeadmControlPlane{}).
		WithValidator(&KubeadmControlPlaneValidator{facts: facts}).
		Complete(); err != nil {
		return fmt.Errorf("registering the KubeadmControlPlane webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &clusterv1.Cluster{}).
		WithValidator(&ClusterValidator{facts: facts}).
		Complete(); err != nil {
		return fmt.Errorf("registering the Cluster webhook: %w", err)
	}
	return nil
}

// AddIndexes indexes MachineDeployments, MachinePools and Machines by
// spec.clusterName, so one cached List finds a cluster's workers. Registering
// the indexes also starts the informers with the manager, so the first
// admission request does not wait for a cache to fill.
func AddIndexes(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	byCluster := []struct {
		obj  client.Object
		name func(client.Object) []string
	}{
		{&clusterv1.MachineDeployment{}, func(o client.Object) []string { return []string{o.(*clusterv1.MachineDeployment).Spec.ClusterName} }},
		{&clusterv1.MachinePool{}, func(o client.Object) []string { return []string{o.(*clusterv1.MachinePool).Spec.ClusterName} }},
		{&clusterv1.Machine{}, func(o client.Object) []string { return []string{o.(*clusterv1.Machine).Spec.ClusterName} }},
	}
	for _, ix := range byCluster {
		if err := indexer.IndexField(ctx, ix.obj, ClusterNameField, ix.name); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ClusterNameField, err)
		}
	}
	// Clusters and control planes are read by name; ask for their informers now.
	for _, obj := range []client.Object{&clusterv1.Cluster{}, &controlplanev1.KubeadmControlPlane{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting the %T informer: %w", obj, err)
		}
	}
	return nil
}
