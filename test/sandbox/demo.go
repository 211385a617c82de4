package sandbox

import (
	"context"
	"fmt"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
)

// ClusterSpec describes a demo cluster. Its objects, all in Namespace:
//
//   - Cluster Name with DevCluster Name (in-memory backend);
//   - KubeadmControlPlane Name-control-plane with ControlPlaneMachines
//     machines from DevMachineTemplate Name-control-plane;
//   - MachineDeployment Name-md-0 with WorkerMachines machines from
//     DevMachineTemplate Name-md-0 and KubeadmConfigTemplate Name-md-0;
//   - spare DevMachineTemplates Name-control-plane-v2 and Name-md-0-v2 to
//     switch to (a template change rolls every machine).
type ClusterSpec struct {
	// Name of the Cluster; the other objects' names start with it.
	Name string
	// Namespace of every object.
	Namespace string
	// ControlPlaneMachines is the KubeadmControlPlane's replicas.
	ControlPlaneMachines int32
	// WorkerMachines is the MachineDeployment's replicas.
	WorkerMachines int32
	// KubernetesVersion of the control plane and the workers.
	KubernetesVersion string
	// MachineStartup is how long each simulated start-up step of a machine
	// takes (VM, node, API server, etcd member).
	MachineStartup time.Duration
	// Port is the local port of the workload cluster's fake API server and
	// etcd. 0: CreateCluster picks a free one.
	Port int32
	// ControlPlaneMaxSurge is the KubeadmControlPlane's
	// rollout.strategy.rollingUpdate.maxSurge; nil is 1. With 0, Cluster
	// API's InPlaceUpdates offer every control-plane machine to be rolled
	// out to the Runtime Extensions for an in-place update; with 1 it first
	// adds a new machine, which replaces one of them. Cluster API refuses
	// 0 with fewer than 3 (minReplicasForMaxSurge0) control-plane machines.
	ControlPlaneMaxSurge *int32
}

// minReplicasForMaxSurge0 is the fewest control-plane machines Cluster API's
// KubeadmControlPlane webhook accepts with maxSurge 0 ("when
// KubeadmControlPlane is configured to scale-in, replica count needs to be
// at least 3").
const minReplicasForMaxSurge0 = 3

// ControlPlaneName is the name of the cluster's KubeadmControlPlane.
func (c ClusterSpec) ControlPlaneName() string { return c.Name + "-control-plane" }

// MachineDeploymentName is the name of the cluster's MachineDeployment.
func (c ClusterSpec) MachineDeploymentName() string { return c.Name + "-md-0" }

// SpareControlPlaneTemplate is the name of the spare DevMachineTemplate of
// the control plane.
func (c ClusterSpec) SpareControlPlaneTemplate() string { return c.ControlPlaneName() + "-v2" }

// SpareWorkerTemplate is the name of the spare DevMachineTemplate of the workers.
func (c ClusterSpec) SpareWorkerTemplate() string { return c.MachineDeploymentName() + "-v2" }

// CreateCluster creates the objects of a demo cluster (see ClusterSpec)
// and records it in s.Clusters; it does not wait for its machines (see
// WaitClusterReady).
func (s *Sandbox) CreateCluster(ctx context.Context, spec ClusterSpec) error {
	if spec.Port == 0 {
		port, err := freeWorkloadPort()
		if err != nil {
			return fmt.Errorf("creating cluster %s: %w", spec.Name, err)
		}
		spec.Port = port
	}
	for _, obj := range ClusterObjects(spec) {
		if err := s.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating cluster %s: %T %s: %w", spec.Name, obj, obj.GetName(), err)
		}
	}
	s.Clusters = append(s.Clusters, spec)
	return nil
}

// ClusterObjects returns the objects of a demo cluster, in the order to
// create them, fully specified: the fields Cluster API's defaulting
// webhooks would set are set.
func ClusterObjects(spec ClusterSpec) []client.Object {
	ns, name, cp, pool := spec.Namespace, spec.Name, spec.ControlPlaneName(), spec.MachineDeploymentName()
	clusterLabel := map[string]string{clusterv1.ClusterNameLabel: name}
	machineTemplate := func(template string) client.Object {
		return builder.DevMachineTemplate(ns, template).WithLabels(clusterLabel).WithInMemoryBackend(spec.MachineStartup).Build()
	}
	maxSurge := int32(1)
	if spec.ControlPlaneMaxSurge != nil {
		maxSurge = *spec.ControlPlaneMaxSurge
	}
	// Templates first, then the objects that reference them, the Cluster
	// last but one and the MachineDeployment last: the guard judges a
	// worker pool against its control plane.
	return []client.Object{
		machineTemplate(cp),
		machineTemplate(spec.SpareControlPlaneTemplate()),
		machineTemplate(pool),
		machineTemplate(spec.SpareWorkerTemplate()),
		builder.KubeadmConfigTemplate(ns, pool).WithLabels(clusterLabel).WithKubeadmConfigSpec(workerConfig()).Build(),
		builder.DevCluster(ns, name).WithLabels(clusterLabel).WithAnnotations(inMemoryAnnotations()).
			WithControlPlaneEndpoint(workloadHost, spec.Port).Build(),
		builder.KubeadmControlPlane(ns, cp).WithClusterName(name).WithReplicas(spec.ControlPlaneMachines).
			WithVersion(spec.KubernetesVersion).WithKubeadmConfigSpec(controlPlaneConfig()).WithRollingUpdate(maxSurge).
			WithInfrastructureTemplate(cp).WithNodeDeletionTimeout(nodeDeletionTimeoutSeconds).Build(),
		builder.Cluster(ns, name).WithLabels(clusterLabel).WithClusterNetwork([]string{podCIDR}, []string{serviceCIDR}, serviceDomain).
			WithControlPlane(cp).WithInfrastructure(name).Build(),
		builder.MachineDeployment(ns, pool).WithLabels(clusterLabel).WithClusterName(name).WithReplicas(spec.WorkerMachines).
			WithSelector(map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.MachineDeploymentNameLabel: pool}).
			WithRollingUpdate(1, 0).WithVersion(spec.KubernetesVersion).WithBootstrapTemplate(pool).
			WithInfrastructureTemplate(pool).WithNodeDeletionTimeout(nodeDeletionTimeoutSeconds).Build(),
	}
}
