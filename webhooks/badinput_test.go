package webhooks

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Endpoint indexes of endpoints().
const (
	validateMD = iota
	validateKCP
	validateCluster
	mutateMD
	mutateKCP
)

// TestBadRequests posts malformed and hostile AdmissionReviews to the
// guard's endpoints through the http.Handler its webhook server runs. Most
// of them the API server never sends (test/e2e covers what it does send);
// each must get a clear answer, and none an allowance of something the guard
// judges. A direct post cannot change anything in a cluster, but a handler
// that panics, hangs or misreads a body here would do the same behind the API
// server.
func TestBadRequests(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	mdAt := func(v string) *clusterv1.MachineDeployment {
		md := machineDeployment("tmpl-a", nil)
		md.Spec.Template.Spec.Version = v
		return typed(md, mdGVK)
	}
	kcpAt := func(v string) *controlplanev1.KubeadmControlPlane { return typed(kcp(v), kcpGVK) }
	withCluster := func(md *clusterv1.MachineDeployment, name string) *clusterv1.MachineDeployment {
		md.Spec.ClusterName = name
		return md
	}
	update := func(gvk metav1.GroupVersionKind, oldObj, newObj any) []byte {
		return reviewBody(t, gvk, admissionv1.Update, alice, oldObj, newObj)
	}
	withOp := func(op admissionv1.Operation, gvk metav1.GroupVersionKind, oldObj, newObj any) []byte {
		return reviewBody(t, gvk, op, alice, oldObj, newObj)
	}
	// An object of 2 MiB (over the 1.5 MiB etcd takes by default), with a downgrade.
	huge := kcpAt("v1.33.5")
	huge.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 2<<20)}
	// A body over controller-runtime's 7 MiB limit.
	oversized := append([]byte(`{"request":{"operation":"UPDATE","object":{"metadata":{"annotations":{"a":"`), bytes.Repeat([]byte("x"), 7<<20)...)
	oversized = append(oversized, []byte(`"}}}}}`)...)
	forged := mdAt("v1.34.2")
	forged.Spec.Template.Spec.InfrastructureRef.Name = "tmpl-b"
	forged.Annotations = map[string]string{revisions.AnnotationChangedBy: "someone-else", revisions.AnnotationRevision: "99"}
	noTemplate := typed(machineDeployment("", nil), mdGVK)
	noTemplate.Spec.Template = clusterv1.MachineTemplateSpec{}

	cases := []struct {
		name        string
		endpoint    int
		contentType string
		body        []byte
		wantAllowed bool
		wantCode    int32
		wantMsg     string   // the whole message, when it is the caller's to read
		wantInMsg   []string // parts of a policy refusal
		wantStamps  map[string]string
	}{
		{name: "empty body", endpoint: validateKCP, contentType: "application/json", body: nil,
			wantCode: http.StatusBadRequest, wantMsg: "request body is empty"},
		{name: "wrong content type", endpoint: validateKCP, contentType: "text/plain", body: update(kcpGVK, kcpAt("v1.34.2"), kcpAt("v1.33.5")),
			wantCode: http.StatusBadRequest, wantMsg: "contentType=text/plain, expected application/json"},
		{name: "malformed JSON", endpoint: validateMD, contentType: "application/json", body: []byte(`{"request":`),
			wantCode: http.StatusBadRequest, wantMsg: "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		{name: "not an AdmissionReview", endpoint: validateMD, contentType: "application/json", body: []byte(`{"apiVersion":"v1","kind":"Pod"}`),
			wantCode: http.StatusBadRequest, wantMsg: `unknown operation ""`},
		{name: "body over 7 MiB", endpoint: validateKCP, contentType: "application/json", body: oversized,
			wantCode: http.StatusRequestEntityTooLarge, wantMsg: "request entity is too large; limit is 7340032 bytes"},
		{name: "2 MiB object: still judged", endpoint: validateKCP, contentType: "application/json", body: update(kcpGVK, kcpAt("v1.34.2"), huge),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{`KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-cp" is invalid`, "spec.version: Forbidden", "[rule ControlPlaneDowngrade]"}},
		{name: "wrong kind: a KubeadmControlPlane to the MachineDeployment webhook", endpoint: validateMD, contentType: "application/json",
			body:     update(kcpGVK, kcpAt("v1.34.2"), kcpAt("v1.36.0")),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the KubeadmControlPlane ns/c1-cp in request.object: unable to decode controlplane.cluster.x-k8s.io/v1beta2, Kind=KubeadmControlPlane into *v1beta2.MachineDeployment"},
		{name: "wrong kind: a MachineDeployment to the KubeadmControlPlane stamper", endpoint: mutateKCP, contentType: "application/json",
			body:     update(mdGVK, mdAt("v1.34.2"), mdAt("v1.33.0")),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the KubeadmControlPlane: unable to decode cluster.x-k8s.io/v1beta2, Kind=MachineDeployment into *v1beta2.KubeadmControlPlane"},
		{name: "unknown version v1alpha3", endpoint: validateMD, contentType: "application/json",
			body:     update(mdGVK, []byte(`{"apiVersion":"cluster.x-k8s.io/v1alpha3","kind":"MachineDeployment"}`), []byte(`{"apiVersion":"cluster.x-k8s.io/v1alpha3","kind":"MachineDeployment"}`)),
			wantCode: http.StatusBadRequest, wantMsg: `rollout-guard could not decode the MachineDeployment ns/c1-cp in request.object: no kind "MachineDeployment" is registered for version "cluster.x-k8s.io/v1alpha3" in scheme "pkg/runtime/scheme.go:111"`},
		{name: "unconverted v1beta1 (the API server converts it first)", endpoint: mutateMD, contentType: "application/json",
			body:     update(mdGVK, []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"MachineDeployment"}`), []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"MachineDeployment"}`)),
			wantCode: http.StatusBadRequest, wantMsg: `rollout-guard could not decode the MachineDeployment: no kind "MachineDeployment" is registered for version "cluster.x-k8s.io/v1beta1" in scheme "pkg/runtime/scheme.go:111"`},
		{name: "update without the old object", endpoint: validateKCP, contentType: "application/json", body: update(kcpGVK, nil, kcpAt("v1.33.5")),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the KubeadmControlPlane ns/c1-cp in request.oldObject: there is no content to decode"},
		{name: "update without the old object, to the stamper", endpoint: mutateKCP, contentType: "application/json", body: update(kcpGVK, nil, kcpAt("v1.33.5")),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the previous KubeadmControlPlane: there is no content to decode"},
		{name: "create without an object", endpoint: validateMD, contentType: "application/json", body: withOp(admissionv1.Create, mdGVK, nil, nil),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard cannot read the MachineDeployment ns/c1-cp in request.object: it is empty; the API server sends objects as JSON"},
		{name: "version of the wrong type", endpoint: validateKCP, contentType: "application/json",
			body:     update(kcpGVK, kcpAt("v1.34.2"), []byte(`{"apiVersion":"controlplane.cluster.x-k8s.io/v1beta2","kind":"KubeadmControlPlane","spec":{"version":1.33}}`)),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the KubeadmControlPlane ns/c1-cp in request.object: decoding *v1beta2.KubeadmControlPlane: json: cannot unmarshal number into Go struct field KubeadmControlPlaneSpec.spec.version of type string"},
		{name: "objects without apiVersion and kind: decoded as the endpoint's kind and judged", endpoint: validateMD, contentType: "application/json",
			body:     update(mdGVK, []byte(`{"spec":{"clusterName":"c1","template":{"spec":{"version":"v1.34.2"}}}}`), []byte(`{"metadata":{"name":"md-0","namespace":"ns"},"spec":{"clusterName":"c1","template":{"spec":{"version":"v1.36.0"}}}}`)),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{"spec.template.spec.version: Forbidden: MachineDeployment md-0: v1.36.0 is newer than v1.34.2", "[rule WorkerNewerThanControlPlane]"}},
		{name: "a null object to the stamper", endpoint: mutateMD, contentType: "application/json",
			body:     update(mdGVK, []byte(`{}`), []byte(`null`)),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard cannot read the MachineDeployment ns/c1-cp in request.object: it is empty; the API server sends objects as JSON"},
		{name: "duplicate keys: the last one counts (here a skip ahead of the control plane)", endpoint: validateMD, contentType: "application/json",
			body:     update(mdGVK, mdAt("v1.34.2"), []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","metadata":{"name":"md-0","namespace":"ns"},"spec":{"clusterName":"c1","template":{"spec":{"version":"v1.34.2","version":"v1.36.0"}}}}`)),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{"spec.template.spec.version: Forbidden: MachineDeployment md-0: v1.36.0 is newer than v1.34.2", "[rule WorkerNewerThanControlPlane]"}},
		{name: "duplicate keys: the last one counts (here unchanged)", endpoint: validateMD, contentType: "application/json",
			body:        update(mdGVK, mdAt("v1.34.2"), []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","metadata":{"name":"md-0","namespace":"ns"},"spec":{"clusterName":"c1","template":{"spec":{"version":"v1.36.0","version":"v1.34.2"}}}}`)),
			wantAllowed: true},
		{name: "a field of the wrong type the policy does not read: not decoded, refused as such", endpoint: validateKCP, contentType: "application/json",
			body:     update(kcpGVK, kcpAt("v1.34.2"), []byte(`{"apiVersion":"controlplane.cluster.x-k8s.io/v1beta2","kind":"KubeadmControlPlane","metadata":{"name":"c1-cp","namespace":"ns","labels":{"cluster.x-k8s.io/cluster-name":"c1"}},"spec":{"replicas":"three","version":"v1.33.5"}}`)),
			wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the KubeadmControlPlane ns/c1-cp in request.object: decoding *v1beta2.KubeadmControlPlane: json: cannot unmarshal string into Go struct field KubeadmControlPlaneSpec.spec.replicas of type int32"},
		{name: "unknown operation", endpoint: validateMD, contentType: "application/json", body: withOp("PATCH", mdGVK, mdAt("v1.34.2"), mdAt("v1.36.0")),
			wantCode: http.StatusBadRequest, wantMsg: `unknown operation "PATCH"`},
		{name: "unknown operation, to the stamper (once stamped as a create)", endpoint: mutateMD, contentType: "application/json", body: withOp("PATCH", mdGVK, mdAt("v1.34.2"), mdAt("v1.36.0")),
			wantCode: http.StatusBadRequest, wantMsg: `rollout-guard cannot stamp MachineDeployment ns/c1-cp: operation "PATCH" is not CREATE or UPDATE`},
		{name: "no operation, to the stamper", endpoint: mutateKCP, contentType: "application/json", body: []byte(`{"request":{"object":{}}}`),
			wantCode: http.StatusBadRequest, wantMsg: `rollout-guard cannot stamp KubeadmControlPlane /: operation "" is not CREATE or UPDATE`},
		{name: "delete: allowed, removing an object breaks no skew", endpoint: validateKCP, contentType: "application/json", body: withOp(admissionv1.Delete, kcpGVK, kcpAt("v1.34.2"), nil),
			wantAllowed: true},
		{name: "delete, to the stamper: allowed without a patch", endpoint: mutateMD, contentType: "application/json", body: withOp(admissionv1.Delete, mdGVK, mdAt("v1.34.2"), nil),
			wantAllowed: true},
		{name: "non-semver version latest", endpoint: validateKCP, contentType: "application/json", body: update(kcpGVK, kcpAt("v1.34.2"), kcpAt("latest")),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{`spec.version: Invalid value: "latest"`, "[rule InvalidVersion]"}},
		{name: "non-semver version without patch", endpoint: validateMD, contentType: "application/json", body: update(mdGVK, mdAt("v1.34.2"), mdAt("v1.34")),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{`spec.template.spec.version: Invalid value: "v1.34"`, "[rule InvalidVersion]"}},
		{name: "non-semver topology version", endpoint: validateCluster, contentType: "application/json",
			body: update(clusterGVK, []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{"name":"c1","namespace":"ns"},"spec":{"topology":{"version":"v1.34.2"}}}`),
				[]byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{"name":"c1","namespace":"ns"},"spec":{"topology":{"version":"1.35.x"}}}`)),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{`spec.topology.version: Invalid value: "1.35.x"`, "[rule InvalidVersion]"}},
		{name: "deleted control plane: a non-semver version is still refused", endpoint: validateMD, contentType: "application/json",
			body:     update(mdGVK, withCluster(mdAt("v1.34.2"), "gone"), withCluster(mdAt("latest"), "gone")),
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  `MachineDeployment.cluster.x-k8s.io "md-0" is invalid: spec.template.spec.version: Invalid value: "latest": MachineDeployment md-0: spec.template.spec.version "latest" is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`},
		{name: "missing template: an empty version in a cluster with a control plane, refused", endpoint: validateMD, contentType: "application/json", body: update(mdGVK, mdAt("v1.34.2"), noTemplate),
			wantCode: http.StatusUnprocessableEntity, wantInMsg: []string{"spec.template.spec.version: Forbidden", "[rule WorkerVersionUnset]", "set spec.template.spec.version to"}},
		{name: "forged changed-by and revision: overwritten", endpoint: mutateMD, contentType: "application/json", body: update(mdGVK, mdAt("v1.34.2"), forged),
			wantAllowed: true, wantStamps: map[string]string{revisions.AnnotationChangedBy: "alice", revisions.AnnotationRevision: "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := endpoints(t)[tc.endpoint]
			_, answer := serve(t, ep.handler, tc.contentType, tc.body)
			resp := answer.Response
			require.Equal(t, tc.wantAllowed, resp.Allowed, "%+v", resp.Result)
			if tc.wantAllowed {
				if tc.wantStamps == nil {
					assert.Empty(t, resp.Patch, "an allowance that needs no stamps patched the object")
					return
				}
				var review admissionv1.AdmissionReview
				require.NoError(t, utiljson.Unmarshal(tc.body, &review))
				ann := stampsAfter(t, review.Request, resp)
				for k, v := range tc.wantStamps {
					assert.Equal(t, v, ann[k], k)
				}
				return
			}
			require.NotNil(t, resp.Result)
			assert.Equal(t, tc.wantCode, resp.Result.Code)
			if tc.wantMsg != "" {
				assert.Equal(t, tc.wantMsg, resp.Result.Message)
			}
			for _, want := range tc.wantInMsg {
				assert.Contains(t, resp.Result.Message, want)
			}
		})
	}
}

// TestObjectsThatAreNotJSON hands the handlers requests whose objects are
// not JSON objects, as the in-process fuzz targets do. An AdmissionReview
// read from JSON cannot carry them, but the decoder behind the handlers would
// read YAML ("#0", a YAML comment, decoded as an empty object that was then
// judged and allowed) and a JSON null (which made the stamper panic): both
// found by fuzzing, both now refused.
func TestObjectsThatAreNotJSON(t *testing.T) {
	eps := endpoints(t)
	cases := []struct {
		name     string
		handler  http.Handler
		kind     metav1.GroupVersionKind
		old, obj string
		wantMsg  string
	}{
		{name: "YAML comment to the KubeadmControlPlane validator (FuzzKubeadmControlPlaneAdmission)", handler: eps[validateKCP].handler, kind: kcpGVK, old: "#0", obj: "#0",
			wantMsg: "rollout-guard cannot read the KubeadmControlPlane ns/c1-cp in request.object: it is not a JSON object; the API server sends objects as JSON"},
		{name: "YAML old object to the MachineDeployment validator", handler: eps[validateMD].handler, kind: mdGVK, old: "spec: {}", obj: "{}",
			wantMsg: "rollout-guard cannot read the MachineDeployment ns/c1-cp in request.oldObject: it is not a JSON object; the API server sends objects as JSON"},
		{name: "null to the MachineDeployment stamper (FuzzStamper)", handler: eps[mutateMD].handler, kind: mdGVK, old: " ", obj: "null",
			wantMsg: "rollout-guard cannot read the MachineDeployment ns/c1-cp in request.object: it is not a JSON object; the API server sends objects as JSON"},
		{name: "a JSON array to the KubeadmControlPlane stamper", handler: eps[mutateKCP].handler, kind: kcpGVK, old: "{}", obj: "[]",
			wantMsg: "rollout-guard cannot read the KubeadmControlPlane ns/c1-cp in request.object: it is not a JSON object; the API server sends objects as JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Operation: admissionv1.Update, Namespace: "ns", Name: "c1-cp", Kind: tc.kind,
				Object: runtime.RawExtension{Raw: []byte(tc.obj)}, OldObject: runtime.RawExtension{Raw: []byte(tc.old)},
			}}
			resp := tc.handler.(*admission.Webhook).Handle(context.Background(), req)
			require.False(t, resp.Allowed, "%+v", resp.Result)
			assert.EqualValues(t, http.StatusBadRequest, resp.Result.Code)
			assert.Equal(t, tc.wantMsg, resp.Result.Message)
		})
	}
}
