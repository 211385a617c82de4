package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// validating serves a Validator with the objects of each request decoded by
// the mutating webhook's lean decoder (leanDecoder). It answers as
// controller-runtime's handler of a Validator does (admission.WithValidator):
// an error carrying an API status answers with that status, any other
// denies with its message, warnings ride along either way — but that it
// refuses objects that are not JSON objects before decoding them
// (checkRequestObjects), and names the object it could not decode.
//
// Why not controller-runtime's handler, whose decoder cannot be replaced:
// it decodes both objects of an update whole, managed fields and status
// included, which as Cluster API's controllers write a control plane is
// most of it and most of the validating call's own time
// (BenchmarkValidatingDecoders).
type validating[T client.Object] struct {
	validator admission.Validator[T]
	new       func() T
	decoder   admission.Decoder
}

var _ admission.Handler = validating[client.Object]{}

// Handle judges one admission request.
func (h validating[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	ctx = admission.NewContextWithRequest(ctx, req)
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		// What is not a JSON object the decoder might still read (YAML,
		// null): refused before it is.
		if err := checkRequestObjects(req, req.Kind.Kind); err != nil {
			return badRequest(err)
		}
	}
	obj := h.new()
	var warnings admission.Warnings
	var err error
	switch req.Operation {
	case admissionv1.Connect:
	case admissionv1.Create:
		if err := h.decode(req, "object", req.Object, obj); err != nil {
			return badRequest(err)
		}
		warnings, err = h.validator.ValidateCreate(ctx, obj)
	case admissionv1.Update:
		oldObj := h.new()
		if err := h.decode(req, "object", req.Object, obj); err != nil {
			return badRequest(err)
		}
		if err := h.decode(req, "oldObject", req.OldObject, oldObj); err != nil {
			return badRequest(err)
		}
		warnings, err = h.validator.ValidateUpdate(ctx, oldObj, obj)
	case admissionv1.Delete:
		if err := h.decode(req, "oldObject", req.OldObject, obj); err != nil {
			return badRequest(err)
		}
		warnings, err = h.validator.ValidateDelete(ctx, obj)
	default:
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unknown operation %q", req.Operation))
	}
	if err != nil {
		var apiStatus apierrors.APIStatus
		if errors.As(err, &apiStatus) {
			status := apiStatus.Status()
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}.WithWarnings(warnings...)
		}
		return admission.Denied(err.Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// decode decodes raw, the request's field which, into obj, saying which
// object of the request could not be read.
func (h validating[T]) decode(req admission.Request, which string, raw runtime.RawExtension, obj T) error {
	if err := h.decoder.DecodeRaw(raw, obj); err != nil {
		return fmt.Errorf("rollout-guard could not decode the %s %s/%s in request.%s: %w", req.Kind.Kind, req.Namespace, req.Name, which, err)
	}
	return nil
}
