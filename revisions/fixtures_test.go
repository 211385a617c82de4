package revisions_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// newMD returns a realistic MachineDeployment, as stored by the API server.
func newMD() *clusterv1.MachineDeployment {
	return &clusterv1.MachineDeployment{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "md-0",
			Namespace:       "default",
			UID:             "5f0c2a1e-7d7b-4c55-9a8e-1b2c3d4e5f60",
			ResourceVersion: "4711",
			Generation:      3,
			Labels:          map[string]string{"cluster.x-k8s.io/cluster-name": "dev"},
			Annotations:     map[string]string{revisions.AnnotationRevision: "3", "machinedeployment.clusters.x-k8s.io/revision": "3"},
		},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "dev",
			Replicas:    new(int32(3)),
			Rollout: clusterv1.MachineDeploymentRolloutSpec{
				After: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
				Strategy: clusterv1.MachineDeploymentRolloutStrategy{
					Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
					RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
						MaxSurge:       new(intstr.FromInt32(1)),
						MaxUnavailable: new(intstr.FromInt32(0)),
					},
				},
			},
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"cluster.x-k8s.io/cluster-name": "dev", "cluster.x-k8s.io/deployment-name": "md-0"}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{
					Labels: map[string]string{
						"cluster.x-k8s.io/cluster-name":    "dev",
						"cluster.x-k8s.io/deployment-name": "md-0",
						"team":                             "a",
					},
					Annotations: map[string]string{"example.com/owner": "platform"},
				},
				Spec: clusterv1.MachineSpec{
					ClusterName: "dev",
					Version:     "v1.34.2",
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: "md-0",
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "md-1",
					},
					FailureDomain:   "fd-1",
					MinReadySeconds: new(int32(10)),
					ReadinessGates:  []clusterv1.MachineReadinessGate{{ConditionType: "example.com/NetworkReady"}},
					Deletion: clusterv1.MachineDeletionSpec{
						NodeDrainTimeoutSeconds: new(int32(300)),
					},
				},
			},
		},
		Status: clusterv1.MachineDeploymentStatus{Replicas: new(int32(3)), ObservedGeneration: 3},
	}
}

// newKCP returns a realistic KubeadmControlPlane with a filled kubeadmConfigSpec.
func newKCP() *controlplanev1.KubeadmControlPlane {
	val := func(s string) *string { return &s }
	return &controlplanev1.KubeadmControlPlane{
		TypeMeta: metav1.TypeMeta{APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlane"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "dev-control-plane",
			Namespace:       "default",
			UID:             "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
			ResourceVersion: "815",
			Labels:          map[string]string{"cluster.x-k8s.io/cluster-name": "dev"},
		},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: new(int32(3)),
			Version:  "v1.34.2",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"team": "platform"}},
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "cp-1",
					},
					Deletion: controlplanev1.KubeadmControlPlaneMachineTemplateDeletionSpec{NodeDrainTimeoutSeconds: new(int32(120))},
				},
			},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{
					Etcd: bootstrapv1.Etcd{Local: bootstrapv1.LocalEtcd{
						ExtraArgs: []bootstrapv1.Arg{{Name: "quota-backend-bytes", Value: val("8589934592")}},
					}},
					APIServer: bootstrapv1.APIServer{
						ExtraArgs: []bootstrapv1.Arg{
							{Name: "audit-log-maxage", Value: val("30")},
							{Name: "audit-log-path", Value: val("/var/log/kubernetes/audit.log")},
							{Name: "profiling", Value: val("false")},
						},
						CertSANs: []string{"localhost", "127.0.0.1", "dev.example.com"},
					},
					ControllerManager: bootstrapv1.ControllerManager{ExtraArgs: []bootstrapv1.Arg{{Name: "bind-address", Value: val("0.0.0.0")}}},
					Scheduler:         bootstrapv1.Scheduler{ExtraArgs: []bootstrapv1.Arg{{Name: "bind-address", Value: val("0.0.0.0")}}},
					FeatureGates:      map[string]bool{"ControlPlaneKubeletLocalMode": true},
				},
				InitConfiguration: bootstrapv1.InitConfiguration{
					NodeRegistration: bootstrapv1.NodeRegistrationOptions{
						CRISocket:        "unix:///var/run/containerd/containerd.sock",
						KubeletExtraArgs: []bootstrapv1.Arg{{Name: "eviction-hard", Value: val("nodefs.available<0%,imagefs.available<0%")}},
					},
				},
				JoinConfiguration: bootstrapv1.JoinConfiguration{
					NodeRegistration: bootstrapv1.NodeRegistrationOptions{
						CRISocket:        "unix:///var/run/containerd/containerd.sock",
						KubeletExtraArgs: []bootstrapv1.Arg{{Name: "eviction-hard", Value: val("nodefs.available<0%,imagefs.available<0%")}},
					},
					ControlPlane: &bootstrapv1.JoinControlPlane{},
				},
				Files: []bootstrapv1.File{{
					Path:        "/etc/kubernetes/audit-policy.yaml",
					Owner:       "root:root",
					Permissions: "0600",
					Content:     "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
				}},
				PreKubeadmCommands:  []string{"systemctl restart containerd", "sysctl --system"},
				PostKubeadmCommands: []string{"echo done > /var/log/kubeadm.done"},
				Users:               []bootstrapv1.User{{Name: "capi", Sudo: "ALL=(ALL) NOPASSWD:ALL", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDev capi@dev"}}},
				NTP:                 bootstrapv1.NTP{Servers: []string{"time.example.com"}, Enabled: new(true)},
			},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{
				Before: controlplanev1.KubeadmControlPlaneRolloutBeforeSpec{CertificatesExpiryDays: 21},
				Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
					Type:          controlplanev1.RollingUpdateStrategyType,
					RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{MaxSurge: new(intstr.FromInt32(1))},
				},
			},
		},
	}
}

func mdSnap(t testing.TB, md *clusterv1.MachineDeployment) revisions.Snapshot {
	t.Helper()
	s, err := revisions.ForMachineDeployment(md)
	require.NoError(t, err)
	return s
}

func kcpSnap(t testing.TB, kcp *controlplanev1.KubeadmControlPlane) revisions.Snapshot {
	t.Helper()
	s, err := revisions.ForKubeadmControlPlane(kcp)
	require.NoError(t, err)
	return s
}

// editMD returns the Snapshot of newMD() after edit.
func editMD(t testing.TB, edit func(*clusterv1.MachineDeployment)) revisions.Snapshot {
	t.Helper()
	md := newMD()
	edit(md)
	return mdSnap(t, md)
}

// editKCP returns the Snapshot of newKCP() after edit.
func editKCP(t testing.TB, edit func(*controlplanev1.KubeadmControlPlane)) revisions.Snapshot {
	t.Helper()
	kcp := newKCP()
	edit(kcp)
	return kcpSnap(t, kcp)
}
