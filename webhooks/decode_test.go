package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// asWritten reads a testdata object as Cluster API's controllers write it
// (managed fields and status included), taken from the sandbox.
func asWritten(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return raw
}

func leanScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	return s
}

// TestLeanDecoder: a worker pool and a control plane as Cluster API writes
// them decode as they decode whole, less their managed fields and their
// status — but for the versions a control plane's machines run, which the
// policy reads; what is not one of them, or not what it says, is decoded
// (or refused) by the scheme's decoder.
func TestLeanDecoder(t *testing.T) {
	s := leanScheme(t)
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
		want.Status = controlplanev1.KubeadmControlPlaneStatus{Version: want.Status.Version, Versions: want.Status.Versions} //nolint:staticcheck // read by the policy
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

// TestValidatingAnswers: the validating handler answers as
// controller-runtime's handler of a CustomValidator does.
func TestValidatingAnswers(t *testing.T) {
	s := leanScheme(t)
	raw := asWritten(t, "machinedeployment-as-written.json")
	for _, tc := range []struct {
		name    string
		decide  func() error
		allowed bool
		code    int32
		message string
	}{
		{"allowed", func() error { return nil }, true, http.StatusOK, ""},
		{"a refusal carrying an API status keeps it", func() error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}, "md", errors.New("no"))
		}, false, http.StatusForbidden, `machinedeployments.cluster.x-k8s.io "md" is forbidden: no`},
		{"any other error denies with its message", func() error { return errors.New("cache not ready") }, false, http.StatusForbidden, "cache not ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Validator[*clusterv1.MachineDeployment]{Policy: decideWith(tc.decide), GroupKind: clusterv1.GroupVersion.WithKind("MachineDeployment").GroupKind()}
			h := validating[*clusterv1.MachineDeployment]{validator: v, new: func() *clusterv1.MachineDeployment { return &clusterv1.MachineDeployment{} }, decoder: newLeanDecoder(s)}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
				Kind:   metaKind(clusterv1.GroupVersion.WithKind("MachineDeployment")),
				Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw}}}
			resp := h.Handle(context.Background(), req)
			assert.Equal(t, tc.allowed, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tc.code, resp.Result.Code)
			if tc.message != "" {
				assert.Contains(t, resp.Result.Message, tc.message)
			}
		})
	}
	t.Run("undecodable", func(t *testing.T) {
		v := &Validator[*clusterv1.MachineDeployment]{Policy: decideWith(func() error { return nil })}
		h := validating[*clusterv1.MachineDeployment]{validator: v, new: func() *clusterv1.MachineDeployment { return &clusterv1.MachineDeployment{} }, decoder: newLeanDecoder(s)}
		resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: []byte(`{`)}, OldObject: runtime.RawExtension{Raw: raw}}})
		assert.False(t, resp.Allowed)
		assert.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
	})
}

// BenchmarkDecodeControlPlane prices decoding a control plane as Cluster
// API writes it, whole (the scheme's decoder) and lean.
func BenchmarkDecodeControlPlane(b *testing.B) {
	s := leanScheme(b)
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

// decideWith is a Decider whose decision is decide's error, or allowed.
type decideWith func() error

func (d decideWith) Decide(context.Context, client.Object, client.Object) (skew.Decision, []string, error) {
	return skew.Decision{}, nil, d()
}

func (decideWith) RevertedRun(context.Context, *controlplanev1.KubeadmControlPlane, *controlplanev1.KubeadmControlPlane) (*revisions.HighestRun, error) {
	return nil, nil
}

func metaOf(gvk schema.GroupVersionKind) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

func metaKind(gvk schema.GroupVersionKind) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}

func mustJSON(t testing.TB, obj any) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	return raw
}
