package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

func init() {
	// controller-runtime prints a stack trace to stderr when a webhook logs
	// before a logger is set; in a benchmark run it lands in the middle of
	// a result line, which benchstat then cannot read.
	ctrllog.SetLogger(logr.Discard())
}

// TestKubeadmControlPlaneHandlerMatchesFullDecoding drives the lean handler
// and controller-runtime's typed validator (which decodes the whole objects)
// with the same requests: every answer must be the same, refusal messages,
// status codes and warnings included.
func TestKubeadmControlPlaneHandlerMatchesFullDecoding(t *testing.T) {
	etcd := func(k *controlplanev1.KubeadmControlPlane, tag string) *controlplanev1.KubeadmControlPlane {
		k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = tag
		return k
	}
	annotate := func(k *controlplanev1.KubeadmControlPlane, kv ...string) *controlplanev1.KubeadmControlPlane {
		if k.Annotations == nil {
			k.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			k.Annotations[kv[i]] = kv[i+1]
		}
		return k
	}
	unlabelled := func(k *controlplanev1.KubeadmControlPlane) *controlplanev1.KubeadmControlPlane {
		k.Labels = nil
		return k
	}
	managed := func(k *controlplanev1.KubeadmControlPlane) *controlplanev1.KubeadmControlPlane {
		k.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "controlplane.cluster.x-k8s.io/v1beta2",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:version":{}}}`)}}}
		return k
	}
	highest := `{"kubernetes":"v1.35.1","kubernetesRevision":4,"etcd":"3.6.5-0","etcdRevision":4}`
	cases := []struct {
		name     string
		world    []string // MachineDeployment versions; nil: no cluster at all
		old, new *controlplanev1.KubeadmControlPlane
		user     string
		groups   []string
		allowed  bool
	}{
		{name: "minor upgrade", world: []string{"v1.34.2", "v1.33.1"}, old: managed(kcp("v1.34.2")), new: managed(kcp("v1.35.0")), allowed: true},
		{name: "create", world: []string{"v1.34.2"}, new: kcp("v1.34.2"), allowed: true},
		{name: "downgrade", world: []string{"v1.34.2"}, old: kcp("v1.35.2"), new: kcp("v1.34.2")},
		{name: "upgrade leaving a pool too old", world: []string{"v1.31.0"}, old: kcp("v1.34.2"), new: kcp("v1.35.0")},
		{name: "invalid version", world: []string{"v1.34.2"}, old: kcp("v1.34.2"), new: kcp("1.35")},
		{name: "etcd downgrade", world: []string{"v1.34.2"}, old: etcd(kcp("v1.34.2"), "3.6.5-0"), new: etcd(kcp("v1.34.2"), "3.5.21-0")},
		{name: "undo below the highest version run (from the stamps)", world: []string{"v1.34.2"},
			old: annotate(kcp("v1.35.1"), revisions.AnnotationHighestRun, highest), new: annotate(kcp("v1.34.2"), revisions.AnnotationHighestRun, highest)},
		{name: "no cluster label: warning", old: unlabelled(kcp("v1.34.2")), new: unlabelled(kcp("v1.35.0")), allowed: true},
		{name: "override honoured", world: []string{"v1.34.2"}, old: kcp("v1.35.2"), new: annotate(kcp("v1.34.2"), revisions.AnnotationOverride, "restore"),
			user: "root", groups: []string{"breakglass"}, allowed: true},
		{name: "override not honoured", world: []string{"v1.34.2"}, old: kcp("v1.35.2"), new: annotate(kcp("v1.34.2"), revisions.AnnotationOverride, "restore"),
			user: "bob", groups: []string{"dev"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var facts policy.Policy
			if tc.world != nil {
				facts = testFacts(t, cluster("v1.34.2", tc.world...)...)
			} else {
				facts = testFacts(t)
			}
			_, v, _ := NewValidators(facts, policy.OverrideGroups{"breakglass"}, nil)
			full := admission.WithValidator(testScheme(t), v)
			lean := &admission.Webhook{Handler: NewKubeadmControlPlaneHandler(testScheme(t), v)}

			req := leanReview(t, tc.old, tc.new)
			req.UserInfo = authenticationv1.UserInfo{Username: tc.user, Groups: tc.groups}
			want := full.Handle(context.Background(), req)
			got := lean.Handle(context.Background(), req)
			assert.Equal(t, want.AdmissionResponse, got.AdmissionResponse)
			require.Equal(t, tc.allowed, got.Allowed, "result: %+v", got.Result)
			if !tc.allowed {
				require.NotNil(t, got.Result)
				assert.NotEmpty(t, got.Result.Message)
			}
		})
	}
}

// TestKubeadmControlPlaneHandlerAnswersBadInputLikeFullDecoding: requests
// the API server never sends (other operations, kinds and versions, objects
// that do not decode) get the very answer of controller-runtime's typed
// handler, which the lean handler hands them to.
func TestKubeadmControlPlaneHandlerAnswersBadInputLikeFullDecoding(t *testing.T) {
	good := func() []byte {
		raw, err := json.Marshal(kcp("v1.34.2"))
		require.NoError(t, err)
		return raw
	}()
	cases := []struct {
		name     string
		op       admissionv1.Operation
		old, obj string
	}{
		{name: "empty objects", op: admissionv1.Update},
		{name: "update without the old object", op: admissionv1.Update, obj: string(good)},
		{name: "not JSON", op: admissionv1.Update, old: "{", obj: "{"},
		{name: "YAML", op: admissionv1.Update, old: "#0", obj: "#0"},
		{name: "null", op: admissionv1.Create, obj: "null"},
		{name: "array", op: admissionv1.Update, old: string(good), obj: "[]"},
		{name: "version of the wrong type", op: admissionv1.Update, old: string(good), obj: `{"spec":{"version":1.33}}`},
		{name: "wrong kind", op: admissionv1.Update, old: string(good), obj: `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","spec":{}}`},
		{name: "unknown version", op: admissionv1.Update, old: string(good), obj: `{"apiVersion":"controlplane.cluster.x-k8s.io/v1alpha3","kind":"KubeadmControlPlane"}`},
		{name: "no apiVersion nor kind: the endpoint's kind", op: admissionv1.Update, old: string(good), obj: `{"metadata":{"name":"c1-cp","namespace":"ns","labels":{"cluster.x-k8s.io/cluster-name":"c1"}},"spec":{"version":"v1.33.0"}}`},
		{name: "delete", op: admissionv1.Delete, old: string(good)},
		{name: "connect", op: admissionv1.Connect},
		{name: "unknown operation", op: "PATCH", old: string(good), obj: string(good)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, v, _ := NewValidators(testFacts(t, cluster("v1.34.2", "v1.34.2")...), nil, nil)
			full := admission.WithValidator(testScheme(t), v)
			lean := &admission.Webhook{Handler: NewKubeadmControlPlaneHandler(testScheme(t), v)}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Operation: tc.op, Namespace: "ns", Name: "c1-cp",
				Object: runtime.RawExtension{Raw: []byte(tc.obj)}, OldObject: runtime.RawExtension{Raw: []byte(tc.old)}}}
			if tc.obj == "" {
				req.Object.Raw = nil
			}
			if tc.old == "" {
				req.OldObject.Raw = nil
			}
			want := full.Handle(context.Background(), req)
			got := lean.Handle(context.Background(), req)
			assert.Equal(t, want.AdmissionResponse, got.AdmissionResponse)
		})
	}
}

// leanReview builds the request the API server sends; old nil is a create.
func leanReview(t testing.TB, old, new *controlplanev1.KubeadmControlPlane) admission.Request {
	if old == nil {
		req := review(t, "KubeadmControlPlane", new, new)
		req.Operation = admissionv1.Create
		req.OldObject = runtime.RawExtension{}
		return req
	}
	return review(t, "KubeadmControlPlane", old, new)
}

// BenchmarkKubeadmControlPlaneLeanHandler measures the same admission as
// BenchmarkKubeadmControlPlaneHandler through the handler the guard serves,
// which decodes only what the policy reads.
func BenchmarkKubeadmControlPlaneLeanHandler(b *testing.B) {
	_, v, _ := NewValidators(testFacts(b, cluster("v1.34.2", "v1.34.2", "v1.34.2", "v1.33.5")...), nil, nil)
	h := NewKubeadmControlPlaneHandler(testScheme(b), v)
	req := review(b, "KubeadmControlPlane", kcp("v1.34.2"), kcp("v1.35.0"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(ctx, req); !resp.Allowed {
			b.Fatalf("refused: %v", resp.Result)
		}
	}
}
