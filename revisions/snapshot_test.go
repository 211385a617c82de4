package revisions_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// The hash is stored in RolloutRevisions (the digest annotation), and its
// short form in their names and labels: changing the canonical form
// orphans every recorded history. These literals catch an accidental
// change; change them only with a migration. The short forms are the
// hashes earlier releases stored.
func TestGoldenHash(t *testing.T) {
	md := mdSnap(t, newMD())
	assert.Equal(t, revisions.KindMachineDeployment, md.Kind)
	assert.Equal(t, `{"metadata":{"annotations":{"example.com/owner":"platform"},"labels":{"cluster.x-k8s.io/cluster-name":"dev","cluster.x-k8s.io/deployment-name":"md-0","team":"a"}},`+
		`"spec":{"bootstrap":{"configRef":{"apiGroup":"bootstrap.cluster.x-k8s.io","kind":"KubeadmConfigTemplate","name":"md-0"}},"clusterName":"dev",`+
		`"deletion":{"nodeDrainTimeoutSeconds":300},"failureDomain":"fd-1","infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"DevMachineTemplate","name":"md-1"},`+
		`"minReadySeconds":10,"readinessGates":[{"conditionType":"example.com/NetworkReady"}],"version":"v1.34.2"}}`, string(md.Data))
	assert.Equal(t, "51839ff4a71eb7bada92cb54e22bf96d145ff54aa0d722ee72bba717d56df550", md.Hash)
	assert.Equal(t, "51839ff4a7", revisions.ShortHash(md.Hash))

	kcp := kcpSnap(t, newKCP())
	assert.Equal(t, revisions.KindKubeadmControlPlane, kcp.Kind)
	assert.Equal(t, "25ad1169d1a6244ddf73ffdd3a4deb24b339ba0f58d8798355828dc91534b4f3", kcp.Hash)
	assert.Equal(t, "25ad1169d1", revisions.ShortHash(kcp.Hash))
}

func TestSnapshotHashFormat(t *testing.T) {
	for _, s := range []revisions.Snapshot{mdSnap(t, newMD()), kcpSnap(t, newKCP())} {
		assert.Regexp(t, `^[0-9a-f]{64}$`, s.Hash, "the whole SHA-256 digest")
		assert.True(t, revisions.IsDigest(s.Hash))
		assert.Regexp(t, `^[0-9a-f]{10}$`, revisions.ShortHash(s.Hash))
	}
}

// Equivalent objects hash equal: what is not revision content, map order,
// empty or defaulted values Cluster API treats as absent.
func TestMachineDeploymentEquivalent(t *testing.T) {
	base := mdSnap(t, newMD())
	tests := []struct {
		name string
		edit func(*clusterv1.MachineDeployment)
	}{
		{"replicas", func(md *clusterv1.MachineDeployment) { md.Spec.Replicas = new(int32(10)) }},
		{"rollout.after", func(md *clusterv1.MachineDeployment) {
			md.Spec.Rollout.After = metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		}},
		{"rollout strategy", func(md *clusterv1.MachineDeployment) {
			md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
		}},
		{"paused", func(md *clusterv1.MachineDeployment) { md.Spec.Paused = new(true) }},
		{"status", func(md *clusterv1.MachineDeployment) {
			md.Status = clusterv1.MachineDeploymentStatus{Phase: "ScalingUp"}
		}},
		{"object metadata", func(md *clusterv1.MachineDeployment) {
			md.ResourceVersion, md.Generation = "9999", 99
			md.Labels["x"] = "y"
			md.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
		}},
		{"template rollout-guard.io annotations", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Annotations[revisions.AnnotationChangeCause] = "whatever"
			md.Spec.Template.Annotations[revisions.Prefix+"anything"] = "x"
		}},
		{"only rollout-guard.io annotations is no annotations", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Annotations = map[string]string{"example.com/owner": "platform", revisions.AnnotationRevision: "4"}
		}},
		{"maps rebuilt in another order", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Labels = map[string]string{"team": "a", "cluster.x-k8s.io/deployment-name": "md-0", "cluster.x-k8s.io/cluster-name": "dev"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, base, editMD(t, tt.edit))
		})
	}

	// Empty and nil lists, maps and structs are the same.
	bare := func(md *clusterv1.MachineDeployment) {
		md.Spec.Template.Annotations = nil
		md.Spec.Template.Spec.ReadinessGates = nil
		md.Spec.Template.Spec.Deletion = clusterv1.MachineDeletionSpec{}
	}
	empty := func(md *clusterv1.MachineDeployment) {
		md.Spec.Template.Annotations = map[string]string{}
		md.Spec.Template.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{}
		md.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{}
		md.Spec.Template.Spec.Deletion = clusterv1.MachineDeletionSpec{}
	}
	assert.Equal(t, editMD(t, bare), editMD(t, empty))
}

// The same object decoded from JSON written in another key order, with
// explicit nulls and empty values, hashes the same.
func TestSnapshotIndependentOfJSONForm(t *testing.T) {
	a := `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","metadata":{"name":"md-0","namespace":"default"},
	 "spec":{"clusterName":"dev","template":{"metadata":{"labels":{"b":"2","a":"1"}},"spec":{"version":"v1.34.2","clusterName":"dev",
	 "infrastructureRef":{"name":"md-1","kind":"DevMachineTemplate","apiGroup":"infrastructure.cluster.x-k8s.io"},
	 "bootstrap":{"dataSecretName":"s"}}}}}`
	b := `{"kind":"MachineDeployment","apiVersion":"cluster.x-k8s.io/v1beta2","metadata":{"namespace":"default","name":"md-0"},
	 "spec":{"template":{"spec":{"bootstrap":{"dataSecretName":"s"},"readinessGates":[],"deletion":{},
	 "infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"DevMachineTemplate","name":"md-1"},
	 "clusterName":"dev","version":"v1.34.2","minReadySeconds":null},"metadata":{"annotations":{},"labels":{"a":"1","b":"2"}}},"clusterName":"dev"}}`
	var mdA, mdB clusterv1.MachineDeployment
	require.NoError(t, json.Unmarshal([]byte(a), &mdA))
	require.NoError(t, json.Unmarshal([]byte(b), &mdB))
	assert.Equal(t, mdSnap(t, &mdA), mdSnap(t, &mdB))
}

// Every meaningful field change hashes differently.
func TestMachineDeploymentDifferent(t *testing.T) {
	tests := []struct {
		name string
		edit func(*clusterv1.MachineDeployment)
	}{
		{"version", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.Version = "v1.34.3" }},
		{"infrastructureRef name", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "md-2" }},
		{"infrastructureRef apiGroup", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.InfrastructureRef.APIGroup = "infrastructure.example.com"
		}},
		{"bootstrap configRef", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.Bootstrap.ConfigRef.Name = "md-1" }},
		{"bootstrap data secret", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: new("bootstrap-data")}
		}},
		{"failureDomain", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.FailureDomain = "fd-2" }},
		{"failureDomain unset", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.FailureDomain = "" }},
		{"minReadySeconds", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.MinReadySeconds = new(int32(11)) }},
		{"minReadySeconds 0 is kept", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.MinReadySeconds = new(int32(0)) }},
		{"minReadySeconds unset", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.MinReadySeconds = nil }},
		{"readinessGates", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.ReadinessGates[0].Polarity = clusterv1.NegativePolarityCondition
		}},
		{"readinessGates removed", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.ReadinessGates = nil }},
		{"deletion drain", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Deletion.NodeDrainTimeoutSeconds = new(int32(0))
		}},
		{"deletion volume detach", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Deletion.NodeVolumeDetachTimeoutSeconds = new(int32(60))
		}},
		{"deletion node", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Deletion.NodeDeletionTimeoutSeconds = new(int32(60))
		}},
		{"taints", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways}}
		}},
		{"label value", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Labels["team"] = "b" }},
		{"label value empty is kept", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Labels["team"] = "" }},
		{"label added", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Labels["tier"] = "gold" }},
		{"label removed", func(md *clusterv1.MachineDeployment) { delete(md.Spec.Template.Labels, "team") }},
		{"annotation", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Annotations["example.com/owner"] = "apps" }},
		{"annotation that only looks like ours", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Annotations["x.rollout-guard.io/y"] = "z"
		}},
		{"clusterName", func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.ClusterName = "other" }},
	}
	base := mdSnap(t, newMD())
	seen := map[string]string{base.Hash: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := editMD(t, tt.edit)
			assert.NotEqual(t, base.Hash, s.Hash)
			if other, dup := seen[s.Hash]; dup {
				t.Errorf("same hash as %q", other)
			}
			seen[s.Hash] = tt.name
		})
	}
}

func TestKubeadmControlPlaneEquivalent(t *testing.T) {
	base := kcpSnap(t, newKCP())
	tests := []struct {
		name string
		edit func(*controlplanev1.KubeadmControlPlane)
	}{
		{"replicas", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Replicas = new(int32(5)) }},
		{"rollout", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Rollout.After = metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
			k.Spec.Rollout.Before.CertificatesExpiryDays = 30
		}},
		{"remediation and naming", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Remediation.MaxRetry = new(int32(3))
			k.Spec.MachineNaming.Template = "{{ .kubeadmControlPlane.name }}-{{ .random }}"
		}},
		{"object metadata and status", func(k *controlplanev1.KubeadmControlPlane) {
			k.Annotations = map[string]string{"cluster.x-k8s.io/paused": ""}
			k.Status.Version = "v1.33.0"
		}},
		{"template rollout-guard.io annotation", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.ObjectMeta.Annotations = map[string]string{revisions.AnnotationRevision: "2"}
		}},
		{"format cloud-config is the default", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.Format = bootstrapv1.CloudConfig
		}},
		{"imagePullPolicy IfNotPresent is the default", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.ImagePullPolicy = corev1.PullIfNotPresent
			k.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.ImagePullPolicy = corev1.PullIfNotPresent
		}},
		{"empty extraEnvs are absent", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraEnvs = &[]bootstrapv1.EnvVar{}
		}},
		{"empty lists are absent", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.Mounts = []bootstrapv1.MountPoints{}
			k.Spec.KubeadmConfigSpec.BootCommands = []string{}
			k.Spec.MachineTemplate.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{}
		}},
		{"empty joinConfiguration.controlPlane is absent", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.JoinConfiguration.ControlPlane = nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, base, editKCP(t, tt.edit))
		})
	}
}

func TestKubeadmControlPlaneDifferent(t *testing.T) {
	tests := []struct {
		name string
		edit func(*controlplanev1.KubeadmControlPlane)
	}{
		{"version", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Version = "v1.35.0" }},
		{"infrastructureRef", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.InfrastructureRef.Name = "cp-2"
		}},
		{"template label", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.MachineTemplate.ObjectMeta.Labels["team"] = "core" }},
		{"readinessGates", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "example.com/Ready"}}
		}},
		{"deletion", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.Spec.Deletion.NodeDrainTimeoutSeconds = new(int32(0))
		}},
		{"etcd image tag", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.5-0"
		}},
		{"apiServer extraArg value", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs[0].Value = new("60")
		}},
		{"apiServer extraArg empty value is kept", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs[0].Value = new("")
		}},
		{"certSANs order", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.CertSANs = []string{"127.0.0.1", "localhost", "dev.example.com"}
		}},
		{"feature gate false is kept", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.FeatureGates["ControlPlaneKubeletLocalMode"] = false
		}},
		{"no taints differs from kubeadm's default taints", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.Taints = &[]corev1.Taint{}
		}},
		{"imagePullSerial false differs from the default true", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.ImagePullSerial = new(false)
		}},
		{"imagePullPolicy Always", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.ImagePullPolicy = corev1.PullAlways
		}},
		{"format ignition", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.KubeadmConfigSpec.Format = bootstrapv1.Ignition }},
		{"file content", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.Files[0].Content += "- level: None\n"
		}},
		{"file append false is kept", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.Files[0].Append = new(false)
		}},
		{"preKubeadmCommands", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.PreKubeadmCommands = append(k.Spec.KubeadmConfigSpec.PreKubeadmCommands, "true")
		}},
		{"dns", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag = "v1.12.0"
		}},
		{"ntp disabled", func(k *controlplanev1.KubeadmControlPlane) { k.Spec.KubeadmConfigSpec.NTP.Enabled = new(false) }},
	}
	base := kcpSnap(t, newKCP())
	seen := map[string]string{base.Hash: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := editKCP(t, tt.edit)
			assert.NotEqual(t, base.Hash, s.Hash)
			if other, dup := seen[s.Hash]; dup {
				t.Errorf("same hash as %q", other)
			}
			seen[s.Hash] = tt.name
		})
	}
}

// The same content under the two kinds hashes differently.
func TestHashIncludesKind(t *testing.T) {
	md := mdSnap(t, newMD())
	cr := revisions.RolloutRevision(newKCP(), controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"), md, revisions.Record{Revision: 1})
	cr.Labels[revisions.LabelOwnerKind] = revisions.KindKubeadmControlPlane
	_, err := revisions.FromRolloutRevision(cr)
	require.Error(t, err)
}

func TestSnapshotNil(t *testing.T) {
	_, err := revisions.ForMachineDeployment(nil)
	require.Error(t, err)
	_, err = revisions.ForKubeadmControlPlane(nil)
	require.Error(t, err)
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		snap revisions.Snapshot
		want revisions.Summary
	}{
		{"machine deployment", mdSnap(t, newMD()), revisions.Summary{
			Version: "v1.34.2", Infrastructure: "DevMachineTemplate/md-1", Bootstrap: "KubeadmConfigTemplate/md-0",
		}},
		{"machine deployment with a data secret", editMD(t, func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: new("md-0-bootstrap")}
		}), revisions.Summary{Version: "v1.34.2", Infrastructure: "DevMachineTemplate/md-1", Bootstrap: "secret:md-0-bootstrap"}},
		{"control plane, kubeadm's etcd", kcpSnap(t, newKCP()), revisions.Summary{
			Version: "v1.34.2", Infrastructure: "DevMachineTemplate/cp-1",
		}},
		{"control plane, explicit etcd", editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.5-0"
		}), revisions.Summary{Version: "v1.34.2", Infrastructure: "DevMachineTemplate/cp-1", EtcdImageTag: "3.6.5-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.snap.Summary()
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := revisions.Snapshot{Kind: "Deployment", Data: []byte(`{}`)}.Summary()
	require.Error(t, err)
	_, err = revisions.Snapshot{Kind: revisions.KindMachineDeployment, Data: []byte(`[`)}.Summary()
	require.Error(t, err)
}

// TestFingerprints: a fingerprint follows the revision content and nothing
// else of the object.
func TestFingerprints(t *testing.T) {
	md := newMD()
	scaled := newMD()
	scaled.Spec.Replicas = new(int32(9))
	scaled.Labels = map[string]string{"x": "y"}
	edited := newMD()
	edited.Spec.Template.Spec.Version = "v1.35.0"
	mdPrint := func(m *clusterv1.MachineDeployment) uint64 {
		p, err := revisions.FingerprintMachineDeployment(m)
		require.NoError(t, err)
		return p
	}
	assert.Equal(t, mdPrint(md), mdPrint(scaled), "replicas and labels are not content")
	assert.NotEqual(t, mdPrint(md), mdPrint(edited), "a template edit")

	kcp := newKCP()
	kcpScaled := newKCP()
	kcpScaled.Spec.Replicas = new(int32(5))
	kcpEdited := newKCP()
	kcpEdited.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{"echo"}
	kcpPrint := func(k *controlplanev1.KubeadmControlPlane) uint64 {
		p, err := revisions.FingerprintKubeadmControlPlane(k)
		require.NoError(t, err)
		return p
	}
	assert.Equal(t, kcpPrint(kcp), kcpPrint(kcpScaled), "replicas are not content")
	assert.NotEqual(t, kcpPrint(kcp), kcpPrint(kcpEdited), "kubeadmConfigSpec is content")
}
