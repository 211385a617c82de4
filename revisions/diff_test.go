package revisions_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

func TestDiff(t *testing.T) {
	md := mdSnap(t, newMD())
	kcp := kcpSnap(t, newKCP())
	tests := []struct {
		name     string
		from, to revisions.Snapshot
		want     []revisions.Change
	}{
		{"no change", md, md, nil},
		{"upgrade with a new template", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.Version = "v1.35.0"
			m.Spec.Template.Spec.InfrastructureRef.Name = "md-2"
		}), []revisions.Change{
			{Path: "infrastructureRef", From: "DevMachineTemplate/md-1", To: "DevMachineTemplate/md-2"},
			{Path: "version", From: "v1.34.2", To: "v1.35.0"},
		}},
		{"only the API group of a reference", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.InfrastructureRef.APIGroup = "infrastructure.example.com"
		}), []revisions.Change{{Path: "infrastructureRef",
			From: "DevMachineTemplate.infrastructure.cluster.x-k8s.io/md-1", To: "DevMachineTemplate.infrastructure.example.com/md-1"}}},
		{"bootstrap switch to a data secret", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: new("boot")}
		}), []revisions.Change{
			{Path: "bootstrap.configRef", From: "KubeadmConfigTemplate/md-0"},
			{Path: "bootstrap.dataSecretName", To: "boot"},
		}},
		{"labels and annotations", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Labels["team"] = "b"
			m.Spec.Template.Labels["tier"] = ""
			delete(m.Spec.Template.Annotations, "example.com/owner")
		}), []revisions.Change{
			{Path: "metadata.annotations[example.com/owner]", From: "platform"},
			{Path: "metadata.labels.team", From: "a", To: "b"},
			{Path: "metadata.labels.tier", To: `""`},
		}},
		{"in-place fields", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.MinReadySeconds = nil
			m.Spec.Template.Spec.ReadinessGates = append(m.Spec.Template.Spec.ReadinessGates,
				clusterv1.MachineReadinessGate{ConditionType: "example.com/StorageReady", Polarity: clusterv1.NegativePolarityCondition})
			m.Spec.Template.Spec.Deletion.NodeDrainTimeoutSeconds = new(int32(600))
		}), []revisions.Change{
			{Path: "deletion.nodeDrainTimeoutSeconds", From: "300", To: "600"},
			{Path: "minReadySeconds", From: "10"},
			{Path: "readinessGates[example.com/StorageReady].conditionType", To: "example.com/StorageReady"},
			{Path: "readinessGates[example.com/StorageReady].polarity", To: "Negative"},
		}},
		{"control plane upgrade with etcd", kcp, editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Version = "v1.35.0"
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.6-0"
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs[0].Value = new("60")
			k.Spec.KubeadmConfigSpec.PreKubeadmCommands = append(k.Spec.KubeadmConfigSpec.PreKubeadmCommands, "true")
			k.Spec.MachineTemplate.ObjectMeta.Labels["team"] = "core"
		}), []revisions.Change{
			{Path: "kubeadmConfigSpec.clusterConfiguration.apiServer.extraArgs[audit-log-maxage].value", From: "30", To: "60"},
			{Path: "kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag", To: "3.6.6-0"},
			{Path: "kubeadmConfigSpec.preKubeadmCommands", From: `["systemctl restart containerd","sysctl --system"]`, To: `["systemctl restart containerd","sysctl --system","true"]`},
			{Path: "metadata.labels.team", From: "platform", To: "core"},
			{Path: "version", From: "v1.34.2", To: "v1.35.0"},
		}},
		{"a command with shell operators reads as typed", kcp, editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{"echo x > f && sh f < /dev/null"}
		}), []revisions.Change{
			{Path: "kubeadmConfigSpec.preKubeadmCommands", From: `["systemctl restart containerd","sysctl --system"]`, To: `["echo x > f && sh f < /dev/null"]`},
		}},
		{"control plane template reference", kcp, editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.InfrastructureRef.Name = "cp-2"
		}), []revisions.Change{{Path: "infrastructureRef", From: "DevMachineTemplate/cp-1", To: "DevMachineTemplate/cp-2"}}},
		{"creation", revisions.Snapshot{}, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template = clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "dev", Version: "v1.34.2"}}
		}), []revisions.Change{{Path: "clusterName", To: "dev"}, {Path: "version", To: "v1.34.2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := revisions.Diff(tt.from, tt.to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	_, err := revisions.Diff(md, kcp)
	require.Error(t, err)
	_, err = revisions.Diff(md, revisions.Snapshot{Kind: revisions.KindMachineDeployment, Data: []byte("nope")})
	require.Error(t, err)
}

func TestChangeCause(t *testing.T) {
	md := mdSnap(t, newMD())
	kcp := kcpSnap(t, newKCP())
	tests := []struct {
		name     string
		from, to revisions.Snapshot
		want     string
	}{
		{"no change", md, md, ""},
		{"upgrade", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.Version = "v1.35.0"
			m.Spec.Template.Spec.InfrastructureRef.Name = "md-2"
		}), "version v1.34.2 → v1.35.0; infrastructureRef md-1 → md-2"},
		{"new kind of template", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.InfrastructureRef.Kind = "AWSMachineTemplate"
		}), "infrastructureRef DevMachineTemplate/md-1 → AWSMachineTemplate/md-1"},
		{"label", md, editMD(t, func(m *clusterv1.MachineDeployment) { m.Spec.Template.Labels["team"] = "b" }),
			"labels team=a → team=b"},
		{"labels grouped", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Labels = map[string]string{"team": "b", "x": "1", "y": "2", "z": "3"}
		}), "labels team=a → team=b, +x=1, +y=2 (+3 more)"},
		{"failure domain cleared", md, editMD(t, func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.FailureDomain = "" }),
			"failureDomain fd-1 → (none)"},
		{"etcd pinned", kcp, editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.6-0"
			k.Spec.Version = "v1.35.0"
		}), "version v1.34.2 → v1.35.0; etcd (kubeadm default) → 3.6.6-0"},
		{"many changes", kcp, editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Version = "v1.35.0"
			k.Spec.MachineTemplate.Spec.InfrastructureRef.Name = "cp-2"
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.6-0"
			k.Spec.MachineTemplate.ObjectMeta.Labels["team"] = "core"
			k.Spec.MachineTemplate.ObjectMeta.Annotations = map[string]string{"a": "b"}
			k.Spec.KubeadmConfigSpec.Files[0].Content = "x"
			k.Spec.KubeadmConfigSpec.NTP.Enabled = new(false)
		}), "version v1.34.2 → v1.35.0; infrastructureRef cp-1 → cp-2; etcd (kubeadm default) → 3.6.6-0; kubeadmConfigSpec.files[/etc/kubernetes/audit-policy.yaml].content apiVersion: audit.k8s.io/v1 kind: Polic… → x; and 3 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := revisions.ChangeCause(tt.from, tt.to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			d, err := revisions.Describe(tt.from, tt.to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.Cause, "Describe's cause")
			inPlace, err := revisions.IsInPlace(tt.from, tt.to)
			require.NoError(t, err)
			assert.Equal(t, inPlace, d.InPlace, "Describe's in-place")
		})
	}
	_, err := revisions.ChangeCause(md, kcp)
	require.Error(t, err)
	_, err = revisions.Describe(md, kcp)
	require.Error(t, err)
	created, err := revisions.Describe(revisions.Snapshot{}, md)
	require.NoError(t, err)
	assert.False(t, created.InPlace, "a creation is not in place")
}

func TestIsInPlace(t *testing.T) {
	md := mdSnap(t, newMD())
	kcp := kcpSnap(t, newKCP())
	mdTests := []struct {
		name string
		edit func(*clusterv1.MachineDeployment)
		want bool
	}{
		{"no change", func(*clusterv1.MachineDeployment) {}, false},
		{"version", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.Version = "v1.35.0" }, false},
		{"bootstrap", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.Bootstrap.ConfigRef.Name = "md-1" }, false},
		{"infrastructureRef", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.InfrastructureRef.Name = "md-2" }, false},
		{"failureDomain", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.FailureDomain = "fd-2" }, false},
		{"labels", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Labels["team"] = "b" }, true},
		{"annotations", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Annotations = nil }, true},
		{"minReadySeconds", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.MinReadySeconds = new(int32(0)) }, true},
		{"readinessGates", func(m *clusterv1.MachineDeployment) { m.Spec.Template.Spec.ReadinessGates = nil }, true},
		{"deletion", func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.Deletion.NodeVolumeDetachTimeoutSeconds = new(int32(5))
		}, true},
		{"taints", func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways}}
		}, true},
		{"labels and version", func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Labels["team"] = "b"
			m.Spec.Template.Spec.Version = "v1.35.0"
		}, false},
	}
	for _, tt := range mdTests {
		t.Run("MachineDeployment "+tt.name, func(t *testing.T) {
			to := editMD(t, tt.edit)
			got, err := revisions.IsInPlace(md, to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			d, err := revisions.Describe(md, to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.InPlace, "Describe")
		})
	}
	kcpTests := []struct {
		name string
		edit func(*controlplanev1.KubeadmControlPlane)
		want bool
	}{
		{"version", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Version = "v1.35.0" }, false},
		{"infrastructureRef", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.InfrastructureRef.Name = "cp-2"
		}, false},
		{"kubeadm config", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.PreKubeadmCommands = nil
		}, false},
		{"etcd image tag", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.5-0"
		}, false},
		{"init configuration", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.Taints = &[]corev1.Taint{}
		}, false},
		{"template labels", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.MachineTemplate.ObjectMeta.Labels = nil }, true},
		{"readinessGates", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "x"}}
		}, true},
		{"deletion", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.Deletion.NodeDeletionTimeoutSeconds = new(int32(1))
		}, true},
		{"taints", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways}}
		}, true},
		{"CoreDNS image", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS = bootstrapv1.DNS{ImageTag: "v1.12.1"}
		}, true},
		{"discovery", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.JoinConfiguration.Discovery.TLSBootstrapToken = "abcdef.0123456789abcdef"
		}, true},
		{"component health check timeout", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.JoinConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds = new(int32(300))
		}, true},
		{"other timeouts", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.JoinConfiguration.Timeouts.KubeletHealthCheckSeconds = new(int32(300))
		}, false},
		{"CoreDNS and labels", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS = bootstrapv1.DNS{ImageTag: "v1.12.1"}
			k.Spec.MachineTemplate.ObjectMeta.Labels["x"] = "y"
		}, true},
	}
	for _, tt := range kcpTests {
		t.Run("KubeadmControlPlane "+tt.name, func(t *testing.T) {
			to := editKCP(t, tt.edit)
			got, err := revisions.IsInPlace(kcp, to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			d, err := revisions.Describe(kcp, to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.InPlace, "Describe")
		})
	}

	got, err := revisions.IsInPlace(revisions.Snapshot{}, md)
	require.NoError(t, err)
	assert.False(t, got, "a creation is not in place")
	_, err = revisions.IsInPlace(md, kcp)
	require.Error(t, err)
}

// TestRolloutChanges: only the differences that replace machines, with the
// split of IsInPlace.
func TestRolloutChanges(t *testing.T) {
	md := mdSnap(t, newMD())
	kcp := kcpSnap(t, newKCP())
	tests := []struct {
		name     string
		from, to revisions.Snapshot
		want     []revisions.Change
	}{
		{"no change", md, md, nil},
		{"labels only", md, editMD(t, func(m *clusterv1.MachineDeployment) { m.Spec.Template.Labels["team"] = "b" }), nil},
		{"template and labels", md, editMD(t, func(m *clusterv1.MachineDeployment) {
			m.Spec.Template.Labels["team"] = "b"
			m.Spec.Template.Spec.InfrastructureRef.Name = "md-2"
		}), []revisions.Change{{Path: "infrastructureRef", From: "DevMachineTemplate/md-1", To: "DevMachineTemplate/md-2"}}},
		{"control plane version and CoreDNS", kcp, editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Version = "v1.35.0"
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS = bootstrapv1.DNS{ImageTag: "v1.12.1"}
		}), []revisions.Change{{Path: "version", From: "v1.34.2", To: "v1.35.0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := revisions.RolloutChanges(tt.from, tt.to)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := revisions.RolloutChanges(md, kcp)
	require.Error(t, err)
}
