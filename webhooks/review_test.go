package webhooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestReviewServerAnswersLikeControllerRuntime posts the same bodies to
// reviewServer and to controller-runtime's own HTTP handler of the same
// webhook: status and body must be byte for byte the same, for the
// AdmissionReviews the API server sends and for everything else.
func TestReviewServerAnswersLikeControllerRuntime(t *testing.T) {
	body := func(apiVersion string, req *admissionv1.AdmissionRequest) []byte {
		raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "AdmissionReview", "request": req})
		require.NoError(t, err)
		return raw
	}
	request := func(old, new string, user string, groups ...string) *admissionv1.AdmissionRequest {
		oldK, newK := kcp(old), kcp(new)
		if user == "root" || user == "bob" {
			newK.Annotations = map[string]string{revisions.AnnotationOverride: "restore"}
		}
		req := review(t, "KubeadmControlPlane", oldK, newK).AdmissionRequest
		req.UserInfo = authenticationv1.UserInfo{Username: user, Groups: groups}
		return &req
	}
	oversized := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"UPDATE","object":{"metadata":{"annotations":{"a":"`),
		bytes.Repeat([]byte("x"), maxReviewSize)...)
	oversized = append(oversized, []byte(`"}}}}}`)...)
	cases := []struct {
		name, contentType string
		body              []byte
		wantFast          bool
	}{
		{name: "allowed upgrade", contentType: "application/json", body: body("admission.k8s.io/v1", request("v1.34.2", "v1.35.0", "alice")), wantFast: true},
		{name: "refused downgrade", contentType: "application/json", body: body("admission.k8s.io/v1", request("v1.35.2", "v1.34.2", "alice")), wantFast: true},
		{name: "override honoured", contentType: "application/json", body: body("admission.k8s.io/v1", request("v1.35.2", "v1.34.2", "root", "breakglass")), wantFast: true},
		{name: "override not honoured", contentType: "application/json", body: body("admission.k8s.io/v1", request("v1.35.2", "v1.34.2", "bob", "dev")), wantFast: true},
		{name: "v1beta1 review", contentType: "application/json", body: body("admission.k8s.io/v1beta1", request("v1.35.2", "v1.34.2", "alice"))},
		{name: "no apiVersion", contentType: "application/json", body: body("", request("v1.35.2", "v1.34.2", "alice"))},
		{name: "no request", contentType: "application/json", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)},
		{name: "malformed JSON", contentType: "application/json", body: []byte(`{"request":`)},
		{name: "empty body", contentType: "application/json"},
		{name: "wrong content type", contentType: "text/plain", body: body("admission.k8s.io/v1", request("v1.35.2", "v1.34.2", "alice"))},
		{name: "body over the limit", contentType: "application/json", body: oversized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, v, _ := NewValidators(testFacts(t, cluster("v1.34.2", "v1.34.2")...), policy.OverrideGroups{"breakglass"}, nil)
			wh := &admission.Webhook{Handler: NewKubeadmControlPlaneHandler(testScheme(t), v)}
			post := func(h http.Handler) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, ValidateKubeadmControlPlanePath, bytes.NewReader(tc.body))
				if tc.body == nil {
					req = httptest.NewRequest(http.MethodPost, ValidateKubeadmControlPlanePath, nil)
				}
				req.Header.Set("Content-Type", tc.contentType)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			want, got := post(wh), post(&reviewServer{Webhook: wh})
			assert.Equal(t, want.Code, got.Code)
			assert.Equal(t, want.Body.String(), got.Body.String())
			if tc.wantFast {
				var answer admissionv1.AdmissionReview
				require.NoError(t, json.Unmarshal(got.Body.Bytes(), &answer))
				require.NotNil(t, answer.Response)
				assert.Equal(t, "admission.k8s.io/v1", answer.APIVersion)
				assert.EqualValues(t, "1", answer.Response.UID)
			}
		})
	}
}
