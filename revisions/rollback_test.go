package revisions_test

import (
	"encoding/json"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// applyPatch applies a merge patch to obj's JSON, as the API server does,
// and decodes the result into out.
func applyPatch(t *testing.T, obj any, patch []byte, out any) {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	patched, err := jsonpatch.MergePatch(raw, patch)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(patched, out))
}

func TestRollbackPatchMachineDeployment(t *testing.T) {
	target := mdSnap(t, newMD())
	tests := []struct {
		name string
		edit func(*clusterv1.MachineDeployment)
	}{
		{"already at target", func(*clusterv1.MachineDeployment) {}},
		{"upgrade and new template", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Version = "v1.35.0"
			md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "AWSMachineTemplate", Name: "md-2"}
		}},
		{"fields added since", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Labels["tier"] = "gold"
			md.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways}}
			md.Spec.Template.Spec.Deletion.NodeDeletionTimeoutSeconds = new(int32(30))
			md.Spec.Template.Spec.Bootstrap.DataSecretName = new("extra")
		}},
		{"fields removed since", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Annotations = nil
			md.Spec.Template.Spec.ReadinessGates = nil
			md.Spec.Template.Spec.Deletion = clusterv1.MachineDeletionSpec{}
			md.Spec.Template.Spec.FailureDomain = ""
			md.Spec.Template.Spec.MinReadySeconds = nil
		}},
		{"data secret instead of a config", func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: new("boot")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := newMD()
			tt.edit(live)
			// What a rollback must not touch.
			live.Spec.Replicas = new(int32(7))
			live.Spec.Rollout.After = metav1.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
			live.Spec.Paused = new(true)
			live.Labels["keep"] = "me"
			live.Spec.Template.Annotations = mergeMaps(live.Spec.Template.Annotations, map[string]string{revisions.Prefix + "x": "kept"})
			live.ResourceVersion = "999"

			patch, err := revisions.RollbackPatch(live, target)
			require.NoError(t, err)

			var got clusterv1.MachineDeployment
			applyPatch(t, live, patch, &got)
			assert.Equal(t, target, mdSnap(t, &got), "the revision content equals the target's")
			assert.Equal(t, "999", got.ResourceVersion, "resourceVersion is the precondition")
			assert.Equal(t, int32(7), *got.Spec.Replicas)
			sameJSON(t, live.Spec.Rollout, got.Spec.Rollout)
			sameJSON(t, live.Spec.Paused, got.Spec.Paused)
			sameJSON(t, live.Spec.Selector, got.Spec.Selector)
			sameJSON(t, live.ObjectMeta, got.ObjectMeta)
			sameJSON(t, live.Status, got.Status)
			assert.Equal(t, "kept", got.Spec.Template.Annotations[revisions.Prefix+"x"], "the template's own stamps are left alone")

			var p map[string]any
			require.NoError(t, json.Unmarshal(patch, &p))
			assert.Equal(t, map[string]any{"resourceVersion": "999"}, p["metadata"])
			if spec, ok := p["spec"].(map[string]any); ok {
				assert.Equal(t, []string{"template"}, keys(spec), "only spec.template is touched")
			}
		})
	}
}

func TestRollbackPatchKubeadmControlPlane(t *testing.T) {
	target := kcpSnap(t, newKCP())
	tests := []struct {
		name string
		edit func(*controlplanev1.KubeadmControlPlane)
	}{
		{"downgrade etcd and version back", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Version = "v1.35.0"
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.6-0"
		}},
		{"defaults and new fields", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.KubeadmConfigSpec.Format = bootstrapv1.CloudConfig
			k.Spec.KubeadmConfigSpec.Files = append(k.Spec.KubeadmConfigSpec.Files, bootstrapv1.File{Path: "/x", Content: "y"})
			k.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.Taints = &[]corev1.Taint{}
			k.Spec.MachineTemplate.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "x"}}
			k.Spec.MachineTemplate.ObjectMeta.Annotations = map[string]string{revisions.AnnotationRevision: "5"}
		}},
		{"fields removed since", func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.MachineTemplate.ObjectMeta = clusterv1.ObjectMeta{}
			k.Spec.KubeadmConfigSpec.Users = nil
			k.Spec.KubeadmConfigSpec.ClusterConfiguration = bootstrapv1.ClusterConfiguration{}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := newKCP()
			tt.edit(live)
			live.Spec.Replicas = new(int32(5))
			live.Spec.Rollout.After = metav1.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
			live.Status.Version = "v1.35.0"

			patch, err := revisions.RollbackPatch(live, target)
			require.NoError(t, err)

			var got controlplanev1.KubeadmControlPlane
			applyPatch(t, live, patch, &got)
			assert.Equal(t, target, kcpSnap(t, &got))
			assert.Equal(t, int32(5), *got.Spec.Replicas)
			sameJSON(t, live.Spec.Rollout, got.Spec.Rollout)
			sameJSON(t, live.Spec.Remediation, got.Spec.Remediation)
			sameJSON(t, live.ObjectMeta, got.ObjectMeta)
			sameJSON(t, live.Status, got.Status)
			assert.Equal(t, live.Spec.MachineTemplate.ObjectMeta.Annotations[revisions.AnnotationRevision],
				got.Spec.MachineTemplate.ObjectMeta.Annotations[revisions.AnnotationRevision])

			var p map[string]any
			require.NoError(t, json.Unmarshal(patch, &p))
			if spec, ok := p["spec"].(map[string]any); ok {
				for _, k := range keys(spec) {
					assert.Contains(t, []string{"version", "machineTemplate", "kubeadmConfigSpec"}, k)
				}
			}
		})
	}
}

func TestRollbackPatchErrors(t *testing.T) {
	md, kcp := newMD(), newKCP()
	mdTarget, kcpTarget := mdSnap(t, md), kcpSnap(t, kcp)
	noRV := newMD()
	noRV.ResourceVersion = ""
	tampered := mdTarget
	tampered.Data = []byte(`{"spec":{"version":"v1.20.0"}}`)

	tests := []struct {
		name   string
		live   runtime.Object
		target revisions.Snapshot
		want   string
	}{
		{"kind mismatch", md, kcpTarget, "KubeadmControlPlane revision"},
		{"kind mismatch the other way", kcp, mdTarget, "MachineDeployment revision"},
		{"no resourceVersion", noRV, mdTarget, "resourceVersion"},
		{"not a revisioned kind", &appsv1.Deployment{}, mdTarget, "has no revisions"},
		{"target data does not match its hash", md, tampered, "hashes to"},
		{"target data not JSON", md, revisions.Snapshot{Kind: revisions.KindMachineDeployment, Data: []byte("{")}, "not JSON"},
		{"nil machine deployment", (*clusterv1.MachineDeployment)(nil), mdTarget, "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := revisions.RollbackPatch(tt.live, tt.target)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// sameJSON asserts a and b encode the same (times decode in Local).
func sameJSON(t *testing.T, a, b any) {
	t.Helper()
	ja, err := json.Marshal(a)
	require.NoError(t, err)
	jb, err := json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, string(ja), string(jb))
}
