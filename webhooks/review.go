package webhooks

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// maxReviewSize is controller-runtime's limit on an AdmissionReview body;
// a larger body is left to it to refuse.
const maxReviewSize = 7 * 1024 * 1024

// reviewServer serves AdmissionReviews to Webhook. controller-runtime's own
// HTTP handler decodes a body with the API machinery's serializer, which
// reads it twice (once to find its apiVersion and kind, once for its
// content): for a KubeadmControlPlane that was half of the guard's cost of
// an admission. reviewServer reads a well-formed admission.k8s.io/v1
// AdmissionReview in one decoding and writes the answer as controller-runtime
// does; anything else (no body, another content type, another version,
// malformed JSON, a body over the limit) goes to Webhook.ServeHTTP, so it
// gets controller-runtime's very answer.
type reviewServer struct {
	// Webhook answers the request (its Handle) or the whole HTTP exchange.
	Webhook *admission.Webhook
}

var _ http.Handler = &reviewServer{}

func (s *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Type") != "application/json" {
		s.Webhook.ServeHTTP(w, r)
		return
	}
	original := r.Body
	body, err := io.ReadAll(io.LimitReader(original, maxReviewSize+1))
	if err != nil || len(body) > maxReviewSize {
		// Replay what was read, then the rest, to controller-runtime.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), original), original}
		s.Webhook.ServeHTTP(w, r)
		return
	}
	_ = original.Close()
	var review admissionv1.AdmissionReview
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil || review.Request == nil ||
		review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.Webhook.ServeHTTP(w, r)
		return
	}
	resp := s.Webhook.Handle(r.Context(), admission.Request{AdmissionRequest: *review.Request})
	answer := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: &resp.AdmissionResponse}
	if err := json.NewEncoder(w).Encode(answer); err != nil {
		// As controller-runtime: the connection is likely gone; say so in the log.
		log.FromContext(r.Context()).Error(err, "could not write the admission response", "requestID", review.Request.UID)
	}
}
