package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// notJSONObject says what is wrong with raw, the encoding of one object in
// an AdmissionReview, when it is not a JSON object; "" when it is. The API
// server always sends JSON objects; the decoder behind the handlers would
// also take YAML (so "#0", a YAML comment, would decode as an empty object)
// and a JSON null, which the guard must not judge as if it were an object.
func notJSONObject(raw []byte) string {
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0:
		return "it is empty"
	case trimmed[0] != '{' || !json.Valid(trimmed):
		return "it is not a JSON object"
	}
	return ""
}

// checkRequestObjects refuses, with a 400, a request whose object (and old
// object, on UPDATE) is not a JSON object. kind names the endpoint's kind.
func checkRequestObjects(req admission.Request, kind string) error {
	which := []struct {
		name string
		raw  []byte
	}{{"object", req.Object.Raw}}
	if len(req.OldObject.Raw) > 0 {
		which = append(which, struct {
			name string
			raw  []byte
		}{"oldObject", req.OldObject.Raw})
	}
	for _, w := range which {
		if why := notJSONObject(w.raw); why != "" {
			return apierrors.NewBadRequest(fmt.Sprintf("rollout-guard cannot read the %s %s/%s in request.%s: %s; the API server sends objects as JSON",
				kind, req.Namespace, req.Name, w.name, why))
		}
	}
	return nil
}

// badRequest is the admission answer for checkRequestObjects' error.
func badRequest(err error) admission.Response {
	return admission.Errored(http.StatusBadRequest, err)
}
