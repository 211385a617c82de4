package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// endpoint is one of the guard's five admission endpoints, served as the
// webhook server serves it: an http.Handler that reads the AdmissionReview
// from the request body.
type endpoint struct {
	name string
	// handler serves the endpoint; panics are not recovered, so that a
	// fuzzer or a test sees them (the guard's server turns them into a 500).
	handler http.Handler
	// newObj returns an empty object of the endpoint's kind.
	newObj func() client.Object
	// mutating says the endpoint is a Stamper.
	mutating bool
}

// endpoints returns the guard's endpoints over one cluster, built as
// SetupWithManager builds them: Cluster c1 at v1.34.2 with
// KubeadmControlPlane c1-cp and one worker pool at v1.34.2. There are no
// override groups.
func endpoints(t testing.TB) []endpoint {
	judge := testFacts(t, cluster("v1.34.2", "v1.34.2")...)
	mdV, kcpV, clusterV := NewValidators(judge, nil, nil)
	s := testScheme(t)
	stampMD, _ := stamper(t)
	stampMD.Policy = judge
	stampKCP, _ := stamper(t)
	stampKCP.Kind, stampKCP.Policy = kinds.KubeadmControlPlane, judge
	return []endpoint{
		{name: "validate MachineDeployment", handler: validatingWebhook(mdV, newLeanDecoder(s)).WithRecoverPanic(false), newObj: kinds.MachineDeployment.New},
		{name: "validate KubeadmControlPlane", handler: validatingWebhook(kcpV, newLeanDecoder(s)).WithRecoverPanic(false), newObj: kinds.KubeadmControlPlane.New},
		{name: "validate Cluster", handler: validatingWebhook(clusterV, newLeanDecoder(s)).WithRecoverPanic(false), newObj: func() client.Object { return &clusterv1.Cluster{} }},
		{name: "mutate MachineDeployment", handler: (&admission.Webhook{Handler: stampMD}).WithRecoverPanic(false), newObj: kinds.MachineDeployment.New, mutating: true},
		{name: "mutate KubeadmControlPlane", handler: (&admission.Webhook{Handler: stampKCP}).WithRecoverPanic(false), newObj: kinds.KubeadmControlPlane.New, mutating: true},
	}
}

// serve posts body to h as the API server does and returns the HTTP status
// and the decoded AdmissionReview of the answer.
func serve(t testing.TB, h http.Handler, contentType string, body []byte) (int, admissionv1.AdmissionReview) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/admit", bytes.NewReader(body))
	if body == nil {
		req = httptest.NewRequest(http.MethodPost, "/admit", nil)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := utiljson.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("the answer is not an AdmissionReview with a response (%v): %q", err, rec.Body.Bytes())
	}
	return rec.Code, out
}

// reviewBody encodes an AdmissionReview of kind gvk; oldObj and newObj are
// objects or raw JSON ([]byte), nil for none.
func reviewBody(t testing.TB, gvk metav1.GroupVersionKind, op admissionv1.Operation, user authenticationv1.UserInfo, oldObj, newObj any) []byte {
	t.Helper()
	raw := func(o any) runtime.RawExtension {
		switch o := o.(type) {
		case nil:
			return runtime.RawExtension{}
		case []byte:
			return runtime.RawExtension{Raw: o}
		default:
			b, err := utiljson.Marshal(o)
			if err != nil {
				t.Fatalf("encoding %T: %v", o, err)
			}
			return runtime.RawExtension{Raw: b}
		}
	}
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "review-1", Kind: gvk, Resource: metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version},
			Operation: op, Namespace: "ns", Name: "c1-cp", UserInfo: user,
			Object: raw(newObj), OldObject: raw(oldObj),
		},
	}
	b, err := utiljson.Marshal(ar)
	if err != nil {
		t.Fatalf("encoding the AdmissionReview: %v", err)
	}
	return b
}

var (
	mdGVK      = metav1.GroupVersionKind{Group: clusterv1.GroupVersion.Group, Version: "v1beta2", Kind: "MachineDeployment"}
	kcpGVK     = metav1.GroupVersionKind{Group: controlplanev1.GroupVersion.Group, Version: "v1beta2", Kind: "KubeadmControlPlane"}
	clusterGVK = metav1.GroupVersionKind{Group: clusterv1.GroupVersion.Group, Version: "v1beta2", Kind: "Cluster"}
)

// typed sets an object's apiVersion and kind, as the API server sends them.
func typed[T client.Object](obj T, gvk metav1.GroupVersionKind) T {
	obj.GetObjectKind().SetGroupVersionKind(clusterv1.GroupVersion.WithKind(gvk.Kind))
	if gvk.Group == controlplanev1.GroupVersion.Group {
		obj.GetObjectKind().SetGroupVersionKind(controlplanev1.GroupVersion.WithKind(gvk.Kind))
	}
	return obj
}

// fuzzSeeds are AdmissionReviews the API server could send to each endpoint
// (upgrades, downgrades, invalid versions, forged stamps, overrides), plus a
// few it never would.
func fuzzSeeds(t testing.TB) [][]byte {
	user := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	mdAt := func(v string, ann map[string]string) *clusterv1.MachineDeployment {
		md := machineDeployment("tmpl-a", ann)
		md.Spec.Template.Spec.Version = v
		return typed(md, mdGVK)
	}
	kcpAt := func(v string) *controlplanev1.KubeadmControlPlane { return typed(kcp(v), kcpGVK) }
	clusterAt := func(v string) *clusterv1.Cluster {
		c := cluster("v1.34.2")[0].(*clusterv1.Cluster)
		c.Spec.Topology.Version = v
		return typed(c, clusterGVK)
	}
	overridden := kcpAt("v1.33.5")
	overridden.Annotations = map[string]string{revisions.AnnotationOverride: "incident 42"}
	return [][]byte{
		reviewBody(t, mdGVK, admissionv1.Update, user, mdAt("v1.34.2", nil), mdAt("v1.35.0", nil)),
		reviewBody(t, mdGVK, admissionv1.Update, user, mdAt("v1.34.2", nil), mdAt("v1.33.0", map[string]string{revisions.AnnotationChangedBy: "forged"})),
		reviewBody(t, mdGVK, admissionv1.Create, user, nil, mdAt("latest", nil)),
		reviewBody(t, kcpGVK, admissionv1.Update, user, kcpAt("v1.34.2"), kcpAt("v1.35.0")),
		reviewBody(t, kcpGVK, admissionv1.Update, user, kcpAt("v1.34.2"), kcpAt("v1.33.5")),
		reviewBody(t, kcpGVK, admissionv1.Update, user, kcpAt("v1.34.2"), overridden),
		reviewBody(t, kcpGVK, admissionv1.Update, user, kcpAt("v1.34.2"), kcpAt("1.35")),
		reviewBody(t, clusterGVK, admissionv1.Update, user, clusterAt("v1.34.2"), clusterAt("v1.33.0")),
		reviewBody(t, clusterGVK, admissionv1.Update, user, clusterAt("v1.34.2"), clusterAt("v1.35.0")),
		reviewBody(t, mdGVK, admissionv1.Delete, user, mdAt("v1.34.2", nil), nil),
		[]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","operation":"UPDATE","object":{"spec":{"version":"v1.33.0"}},"oldObject":{"spec":{"version":"v1.34.2"}}}}`),
		[]byte(`{"request":{"operation":"UPDATE","object":{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"MachineDeployment"},"oldObject":{}}}`),
		[]byte(`{"request":{"operation":"CREATE","object":null}}`),
		[]byte(`{}`),
		[]byte(`not json`),
	}
}

// FuzzAdmissionReview posts arbitrary bytes, as an AdmissionReview body, to
// each of the guard's endpoints through the same http.Handler the webhook
// server runs, so decoding of the review and of its objects is fuzzed with
// the policy behind it. No input may panic or hang an endpoint, and:
//   - every answer is an AdmissionReview with a response;
//   - an allowed CREATE or UPDATE is one whose objects decode into the
//     endpoint's kind, and that the policy, asked directly about the decoded
//     objects, allows too (there are no override groups here);
//   - a stamp the mutating endpoint lets through names the request's user,
//     or is the one the stored object already had: never the client's own.
func FuzzAdmissionReview(f *testing.F) {
	eps := endpoints(f)
	for _, seed := range fuzzSeeds(f) {
		for i := range eps {
			f.Add(uint8(i), seed)
		}
	}
	decoder := admission.NewDecoder(testScheme(f))
	judge := testFacts(f, cluster("v1.34.2", "v1.34.2")...)

	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := eps[int(which)%len(eps)]
		_, answer := serve(t, ep.handler, "application/json", body)
		if !answer.Response.Allowed {
			if answer.Response.Result == nil || answer.Response.Result.Message == "" {
				t.Fatalf("%s: a refusal without a message: %+v", ep.name, answer.Response)
			}
			return
		}
		var review admissionv1.AdmissionReview
		if err := utiljson.Unmarshal(body, &review); err != nil || review.Request == nil {
			t.Fatalf("%s: allowed a body that is not an AdmissionReview (%v): %q", ep.name, err, body)
		}
		req := review.Request
		switch req.Operation {
		case admissionv1.Create, admissionv1.Update:
		case admissionv1.Delete, admissionv1.Connect:
			if ep.mutating && len(answer.Response.Patch) > 0 {
				t.Fatalf("%s: patched a %s request", ep.name, req.Operation)
			}
			return // deleting breaks no skew; the guard is not registered for either
		default:
			t.Fatalf("%s: allowed operation %q", ep.name, req.Operation)
		}
		decode := func(raw runtime.RawExtension) (client.Object, error) {
			obj := ep.newObj()
			err := decoder.DecodeRaw(raw, obj)
			return obj, err
		}
		newObj, err := decode(req.Object)
		if err != nil {
			t.Fatalf("%s: allowed an object that does not decode (%v): %q", ep.name, err, req.Object.Raw)
		}
		var oldObj client.Object
		if req.Operation == admissionv1.Update {
			if oldObj, err = decode(req.OldObject); err != nil {
				t.Fatalf("%s: allowed an old object that does not decode (%v): %q", ep.name, err, req.OldObject.Raw)
			}
		}
		if ep.mutating {
			checkStamps(t, ep.name, req, oldObj, answer.Response)
			return
		}
		ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: *req})
		d, _, err := judge.Decide(ctx, oldObj, newObj)
		if oldObj == nil && req.Operation == admissionv1.Update {
			t.Fatalf("%s: an update without an old object", ep.name)
		}
		if err != nil || !d.Allowed() {
			t.Fatalf("%s: allowed what the policy refuses (%v, %v): %q", ep.name, err, d.Violations, body)
		}
	})
}

// checkStamps applies a Stamper's patch and checks the author it leaves.
func checkStamps(t *testing.T, name string, req *admissionv1.AdmissionRequest, oldObj client.Object, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	by, ok := stampsAfter(t, req, resp)[revisions.AnnotationChangedBy]
	if !ok {
		return
	}
	allowed := []string{req.UserInfo.Username}
	if oldObj != nil {
		allowed = append(allowed, revisions.StampsOf(oldObj).ChangedBy)
	}
	for _, a := range allowed {
		if by == a {
			return
		}
	}
	t.Fatalf("%s: changed-by %q is neither the request's user nor the stored stamp %v", name, by, fmt.Sprint(allowed))
}

// stampsAfter applies a Stamper's patch to the request's object and returns
// the annotations the object would be stored with.
func stampsAfter(t testing.TB, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) map[string]string {
	t.Helper()
	out := req.Object.Raw
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("the patch does not decode: %v", err)
		}
		if out, err = patch.Apply(req.Object.Raw); err != nil {
			t.Fatalf("the patch does not apply: %v", err)
		}
	}
	var meta metav1.PartialObjectMetadata
	if err := utiljson.Unmarshal(out, &meta); err != nil {
		t.Fatalf("the patched object does not decode: %v", err)
	}
	return meta.Annotations
}
