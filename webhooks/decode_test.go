package webhooks

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/policy"
)

// asWritten reads a testdata object as Cluster API's controllers write it
// (managed fields and status included), taken from the sandbox.
func asWritten(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return raw
}

// TestLeanDecoder: a worker pool and a control plane as Cluster API writes
// them decode as they decode whole, less their managed fields and their
// status — but for the versions a control plane's machines run, which the
// policy reads; what is not one of them, or not what it says, is decoded
// (or refused) by the scheme's decoder.
func TestLeanDecoder(t *testing.T) {
	s := testScheme(t)
	whole, lean := admission.NewDecoder(s), newLeanDecoder(s)

	t.Run("KubeadmControlPlane", func(t *testing.T) {
		raw := runtime.RawExtension{Raw: asWritten(t, "kubeadmcontrolplane-as-written.json")}
		want := &controlplanev1.KubeadmControlPlane{}
		require.NoError(t, whole.DecodeRaw(raw, want))
		require.NotEmpty(t, want.ManagedFields, "the fixture is as written, managed fields included")
		require.NotEmpty(t, want.Status.Conditions, "the fixture is as written, status included")
		require.NotEmpty(t, want.Status.Versions)
		got := &controlplanev1.KubeadmControlPlane{}
		require.NoError(t, lean.DecodeRaw(raw, got))
		want.ManagedFields = nil
		want.Status = controlplanev1.KubeadmControlPlaneStatus{Version: want.Status.Version, Versions: want.Status.Versions, //nolint:staticcheck // read by the policy
			Initialization: want.Status.Initialization, Replicas: want.Status.Replicas, LastRemediation: want.Status.LastRemediation}
		assert.Equal(t, want, got)
		assert.Equal(t, policy.HighestRunOf(want), policy.HighestRunOf(got))
	})
	t.Run("MachineDeployment", func(t *testing.T) {
		raw := runtime.RawExtension{Raw: asWritten(t, "machinedeployment-as-written.json")}
		want := &clusterv1.MachineDeployment{}
		require.NoError(t, whole.DecodeRaw(raw, want))
		require.NotEmpty(t, want.ManagedFields)
		require.NotEmpty(t, want.Status.Conditions)
		got := &clusterv1.MachineDeployment{}
		require.NoError(t, lean.DecodeRaw(raw, got))
		want.ManagedFields, want.Status = nil, clusterv1.MachineDeploymentStatus{}
		assert.Equal(t, want, got)
	})
	t.Run("MachinePool", func(t *testing.T) {
		mp := &clusterv1.MachinePool{TypeMeta: metaOf(clusterv1.GroupVersion.WithKind("MachinePool"))}
		mp.Name, mp.Namespace, mp.Annotations = "mp-0", "ns", map[string]string{"rollout-guard.io/revision": "3"}
		mp.Spec.ClusterName = "c1"
		mp.Spec.Template.Spec.Version = "v1.35.0"
		mp.Status.Phase = "Running"
		raw := runtime.RawExtension{Object: mp}
		raw.Raw = mustJSON(t, mp)
		got := &clusterv1.MachinePool{}
		require.NoError(t, lean.DecodeRaw(raw, got))
		want := mp.DeepCopy()
		want.Status = clusterv1.MachinePoolStatus{}
		assert.Equal(t, want, got)
	})
	t.Run("another kind than the object's: the scheme's decoder says so", func(t *testing.T) {
		raw := runtime.RawExtension{Raw: asWritten(t, "machinedeployment-as-written.json")}
		wantErr := whole.DecodeRaw(raw, &controlplanev1.KubeadmControlPlane{})
		require.Error(t, wantErr)
		err := lean.DecodeRaw(raw, &controlplanev1.KubeadmControlPlane{})
		assert.Equal(t, wantErr, err)
	})
	t.Run("not JSON", func(t *testing.T) {
		err := lean.DecodeRaw(runtime.RawExtension{Raw: []byte(`{"apiVersion":`)}, &clusterv1.MachineDeployment{})
		assert.ErrorContains(t, err, "decoding *v1beta2.MachineDeployment")
	})
	t.Run("nothing to decode: the scheme's decoder says so", func(t *testing.T) {
		assert.Equal(t, whole.DecodeRaw(runtime.RawExtension{}, &clusterv1.MachineDeployment{}), lean.DecodeRaw(runtime.RawExtension{}, &clusterv1.MachineDeployment{}))
	})
	t.Run("other objects decoded whole", func(t *testing.T) {
		c := &clusterv1.Cluster{TypeMeta: metaOf(clusterv1.GroupVersion.WithKind("Cluster"))}
		c.Name = "c1"
		c.Status.Phase = "Provisioned"
		got := &clusterv1.Cluster{}
		require.NoError(t, lean.DecodeRaw(runtime.RawExtension{Raw: mustJSON(t, c)}, got))
		assert.Equal(t, c, got)
		u := &unstructured.Unstructured{}
		require.NoError(t, lean.DecodeRaw(runtime.RawExtension{Raw: mustJSON(t, c)}, u))
		assert.Equal(t, "Provisioned", u.Object["status"].(map[string]any)["phase"])
	})
}

// BenchmarkDecodeControlPlane prices decoding a control plane as Cluster
// API writes it, whole (the scheme's decoder) and lean.
func BenchmarkDecodeControlPlane(b *testing.B) {
	s := testScheme(b)
	raw := runtime.RawExtension{Raw: asWritten(b, "kubeadmcontrolplane-as-written.json")}
	for name, d := range map[string]admission.Decoder{"decoder=whole": admission.NewDecoder(s), "decoder=lean": newLeanDecoder(s)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := d.DecodeRaw(raw, &controlplanev1.KubeadmControlPlane{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func metaOf(gvk schema.GroupVersionKind) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

func mustJSON(t testing.TB, obj any) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	return raw
}

// BenchmarkValidatingDecoders prices a validating call of a control plane
// as Cluster API writes it (a version bump), through controller-runtime's
// handler (decoding both objects whole) and through the guard's
// (validating, decoding them lean), in a world without its Cluster: the
// policy's part is the same small one in both.
func BenchmarkValidatingDecoders(b *testing.B) {
	s := testScheme(b)
	oldRaw := asWritten(b, "kubeadmcontrolplane-as-written.json")
	var obj map[string]any
	require.NoError(b, json.Unmarshal(oldRaw, &obj))
	obj["spec"].(map[string]any)["version"] = "v1.35.3"
	newRaw, err := json.Marshal(obj)
	require.NoError(b, err)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Update, Namespace: "default", Name: "demo-control-plane",
		Kind:   metav1.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"},
		Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw},
	}}
	_, v, _ := NewValidators(testFacts(b), nil, nil)
	handlers := map[string]admission.Handler{
		"handler=controller-runtime": admission.WithValidator(s, v),
		"handler=lean": &admission.Webhook{Handler: validating[*controlplanev1.KubeadmControlPlane]{
			validator: v, new: func() *controlplanev1.KubeadmControlPlane { return &controlplanev1.KubeadmControlPlane{} }, decoder: newLeanDecoder(s),
		}},
	}
	for name, h := range handlers {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if resp := h.Handle(context.Background(), req); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			}
		})
	}
}
