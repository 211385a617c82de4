package sandbox

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// infrastructureGroup is the API group of the development infrastructure kinds.
	infrastructureGroup = "infrastructure.cluster.x-k8s.io"
	// nodeDeletionTimeoutSeconds is Cluster API's default, which its
	// Machine defaulting webhook would set.
	nodeDeletionTimeoutSeconds = 10
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
}

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
	ns := spec.Namespace
	labels := func() map[string]string { return map[string]string{clusterv1.ClusterNameLabel: spec.Name} }
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels()}
	}
	workerLabels := func() map[string]string {
		return map[string]string{
			clusterv1.ClusterNameLabel:           spec.Name,
			clusterv1.MachineDeploymentNameLabel: spec.MachineDeploymentName(),
		}
	}
	nodeRegistration := bootstrapv1.NodeRegistrationOptions{
		CRISocket: "unix:///var/run/containerd/containerd.sock",
		KubeletExtraArgs: []bootstrapv1.Arg{
			{Name: "eviction-hard", Value: ptr.To("nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%")},
		},
	}

	devCluster := &infrav1.DevCluster{
		ObjectMeta: meta(spec.Name),
		Spec: infrav1.DevClusterSpec{
			ControlPlaneEndpoint: infrav1.APIEndpoint{Host: workloadHost, Port: spec.Port},
			Backend:              infrav1.DevClusterBackendSpec{InMemory: &infrav1.InMemoryClusterBackendSpec{}},
		},
	}
	// The in-memory backend writes an annotation and panics on a nil map.
	devCluster.Annotations = map[string]string{"rollout-guard.io/sandbox": "true"}

	cluster := &clusterv1.Cluster{
		ObjectMeta: meta(spec.Name),
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{"10.128.0.0/12"}},
				ServiceDomain: "cluster.local",
			},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: spec.ControlPlaneName(),
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrastructureGroup, Kind: "DevCluster", Name: spec.Name,
			},
		},
	}

	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: meta(spec.ControlPlaneName()),
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(spec.ControlPlaneMachines),
			Version:  spec.KubernetesVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrastructureGroup, Kind: "DevMachineTemplate", Name: spec.ControlPlaneName(),
					},
					Deletion: controlplanev1.KubeadmControlPlaneMachineTemplateDeletionSpec{
						NodeDeletionTimeoutSeconds: ptr.To[int32](nodeDeletionTimeoutSeconds),
					},
				},
			},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{
					APIServer: bootstrapv1.APIServer{CertSANs: []string{"localhost", "127.0.0.1", "0.0.0.0"}},
				},
				InitConfiguration: bootstrapv1.InitConfiguration{NodeRegistration: nodeRegistration},
				JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration},
			},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{
				Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
					Type: controlplanev1.RollingUpdateStrategyType,
					RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{
						MaxSurge: ptr.To(intstr.FromInt32(1)),
					},
				},
			},
		},
	}

	workerConfig := &bootstrapv1.KubeadmConfigTemplate{
		ObjectMeta: meta(spec.MachineDeploymentName()),
		Spec: bootstrapv1.KubeadmConfigTemplateSpec{
			Template: bootstrapv1.KubeadmConfigTemplateResource{
				Spec: bootstrapv1.KubeadmConfigSpec{
					JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration},
				},
			},
		},
	}

	md := &clusterv1.MachineDeployment{
		ObjectMeta: meta(spec.MachineDeploymentName()),
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: spec.Name,
			Replicas:    ptr.To(spec.WorkerMachines),
			Selector:    metav1.LabelSelector{MatchLabels: workerLabels()},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{
				Strategy: clusterv1.MachineDeploymentRolloutStrategy{
					Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
					RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
						MaxSurge:       ptr.To(intstr.FromInt32(1)),
						MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					},
				},
			},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: workerLabels()},
				Spec: clusterv1.MachineSpec{
					ClusterName: spec.Name,
					Version:     spec.KubernetesVersion,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: spec.MachineDeploymentName(),
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrastructureGroup, Kind: "DevMachineTemplate", Name: spec.MachineDeploymentName(),
					},
					Deletion: clusterv1.MachineDeletionSpec{
						NodeDeletionTimeoutSeconds: ptr.To[int32](nodeDeletionTimeoutSeconds),
					},
				},
			},
		},
	}

	machineTemplate := func(name string) *infrav1.DevMachineTemplate {
		provisioning := infrav1.CommonProvisioningSettings{StartupDuration: metav1.Duration{Duration: spec.MachineStartup}}
		return &infrav1.DevMachineTemplate{
			ObjectMeta: meta(name),
			Spec: infrav1.DevMachineTemplateSpec{
				Template: infrav1.DevMachineTemplateResource{
					Spec: infrav1.DevMachineSpec{
						Backend: infrav1.DevMachineBackendSpec{
							InMemory: &infrav1.InMemoryMachineBackendSpec{
								VM:        &infrav1.InMemoryVMSpec{Provisioning: provisioning},
								Node:      &infrav1.InMemoryNodeSpec{Provisioning: provisioning},
								APIServer: &infrav1.InMemoryAPIServerSpec{Provisioning: provisioning},
								Etcd:      &infrav1.InMemoryEtcdSpec{Provisioning: provisioning},
							},
						},
					},
				},
			},
		}
	}

	// Templates first, then the objects that reference them, the Cluster
	// last but one and the MachineDeployment last: the guard judges a
	// worker pool against its control plane.
	return []client.Object{
		machineTemplate(spec.ControlPlaneName()),
		machineTemplate(spec.SpareControlPlaneTemplate()),
		machineTemplate(spec.MachineDeploymentName()),
		machineTemplate(spec.SpareWorkerTemplate()),
		workerConfig,
		devCluster,
		kcp,
		cluster,
		md,
	}
}
