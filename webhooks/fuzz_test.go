package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// FuzzKubeadmControlPlaneAdmission sends arbitrary old and new objects
// through the whole validating handler, as the API server would: it must
// never panic or hang, and an object it cannot decode is never allowed.
func FuzzKubeadmControlPlaneAdmission(f *testing.F) {
	seed := func(oldV, newV string) {
		o, _ := json.Marshal(kcp(oldV))
		n, _ := json.Marshal(kcp(newV))
		f.Add(o, n)
	}
	seed("v1.34.2", "v1.35.0")
	seed("v1.35.2", "v1.34.2")
	seed("v1.34.2", "latest")
	f.Add([]byte(`{}`), []byte(`{"spec":{"version":12}}`))
	f.Add([]byte(`{"apiVersion":"controlplane.cluster.x-k8s.io/v1beta2","kind":"KubeadmControlPlane"}`), []byte(`not json`))

	h := validatingWebhook(kcpValidator(testFacts(f, cluster("v1.34.2", "v1.34.2", "v1.31.0")...)), newLeanDecoder(testScheme(f)))
	f.Fuzz(func(t *testing.T, oldRaw, newRaw []byte) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Update, Namespace: "ns", Name: "c1-cp",
			Kind:      metav1.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"},
			Object:    runtime.RawExtension{Raw: newRaw},
			OldObject: runtime.RawExtension{Raw: oldRaw},
		}}
		resp := h.Handle(context.Background(), req)
		if !resp.Allowed {
			return
		}
		// Allowed: both objects must have decoded.
		var o, n controlplanev1.KubeadmControlPlane
		if json.Unmarshal(oldRaw, &o) != nil || json.Unmarshal(newRaw, &n) != nil {
			t.Fatalf("allowed a request whose objects do not decode: old %q new %q", oldRaw, newRaw)
		}
	})
}

// FuzzStamper sends arbitrary objects through the mutating handler: no
// panic, and a request it cannot decode gets an error, never a patch.
func FuzzStamper(f *testing.F) {
	o, _ := json.Marshal(machineDeployment("tmpl-a", nil))
	n, _ := json.Marshal(machineDeployment("tmpl-b", map[string]string{"rollout-guard.io/revision": "x"}))
	f.Add(o, n)
	f.Add([]byte(`{}`), []byte(`{"metadata":{"annotations":{"rollout-guard.io/highest-run":"{"}}}`))
	f.Add([]byte(`[]`), []byte(`null`))
	s, _ := stamper(f)
	f.Fuzz(func(t *testing.T, oldRaw, newRaw []byte) {
		req := updateRequest(t, machineDeployment("x", nil), machineDeployment("y", nil), "fuzz", true)
		req.Object.Raw, req.OldObject.Raw = newRaw, oldRaw
		resp := s.Handle(context.Background(), req)
		if resp.Allowed && len(newRaw) > 0 && !json.Valid(newRaw) {
			t.Fatalf("patched an object that is not JSON: %q", newRaw)
		}
	})
}
