package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/json"
)

// leanDecoder decodes the objects of admission requests for the guard's
// handlers, leaving out what none of them reads: the managed fields of a
// MachineDeployment, MachinePool or KubeadmControlPlane, and its status
// (but a control plane's status.version and status.versions, which the
// policy reads as what the control plane runs). Other objects are decoded
// whole, by the scheme's decoder.
//
// Why: as Cluster API's controllers write them, the managed fields and the
// status are most of such an object (a control plane of the quick start:
// 4.5 and 3.3 of 9.2 KB), and decoding them was most of each webhook
// call's own time, two objects per call: 256–308 µs each whole, 121–133
// lean (BenchmarkDecodeControlPlane).
type leanDecoder struct {
	// whole decodes what the lean decoding does not (and reports what it
	// cannot).
	whole admission.Decoder
}

var _ admission.Decoder = leanDecoder{}

// newLeanDecoder returns a leanDecoder whose other objects scheme decodes.
func newLeanDecoder(scheme *runtime.Scheme) leanDecoder {
	return leanDecoder{whole: admission.NewDecoder(scheme)}
}

// Decode decodes the object of req into into.
func (d leanDecoder) Decode(req admission.Request, into runtime.Object) error {
	return d.DecodeRaw(req.Object, into)
}

// DecodeRaw decodes raw into into.
func (d leanDecoder) DecodeRaw(raw runtime.RawExtension, into runtime.Object) error {
	if len(raw.Raw) == 0 {
		return d.whole.DecodeRaw(raw, into)
	}
	var err error
	switch obj := into.(type) {
	case *clusterv1.MachineDeployment:
		err = decodeLean(raw.Raw, clusterv1.GroupVersion.WithKind("MachineDeployment"), obj, func(l leanObject[clusterv1.MachineDeploymentSpec, skipped]) {
			*obj = clusterv1.MachineDeployment{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
		})
	case *clusterv1.MachinePool:
		err = decodeLean(raw.Raw, clusterv1.GroupVersion.WithKind("MachinePool"), obj, func(l leanObject[clusterv1.MachinePoolSpec, skipped]) {
			*obj = clusterv1.MachinePool{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
		})
	case *controlplanev1.KubeadmControlPlane:
		err = decodeLean(raw.Raw, controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"), obj, func(l leanObject[controlplanev1.KubeadmControlPlaneSpec, kcpRunStatus]) {
			*obj = controlplanev1.KubeadmControlPlane{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
			obj.Status.Version = l.Status.Version //nolint:staticcheck // read by the policy on older controllers
			obj.Status.Versions = l.Status.Versions
		})
	default:
		return d.whole.DecodeRaw(raw, into)
	}
	if errors.Is(err, errNotLean) {
		// Not the object it should be (another kind, another version):
		// the scheme's decoder says what is wrong.
		return d.whole.DecodeRaw(raw, into)
	}
	return err
}

// errNotLean says that an object is not of the kind and version its lean
// decoding expects.
var errNotLean = errors.New("not the expected kind")

// decodeLean decodes raw as a leanObject and hands it to set, when it is of
// kind gvk.
func decodeLean[S, T any](raw []byte, gvk schema.GroupVersionKind, into runtime.Object, set func(leanObject[S, T])) error {
	var l leanObject[S, T]
	// As the scheme's decoder does: field names case-sensitive, unknown
	// fields ignored.
	if err := json.UnmarshalCaseSensitivePreserveInts(raw, &l); err != nil {
		return fmt.Errorf("decoding %T: %w", into, err)
	}
	if l.TypeMeta.GroupVersionKind() != gvk {
		return errNotLean
	}
	set(l)
	return nil
}

// leanObject is an object of Spec S and status T, without managed fields.
type leanObject[S, T any] struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        leanMeta `json:"metadata"`
	Spec            S        `json:"spec"`
	Status          T        `json:"status"`
}

// leanMeta is ObjectMeta whose managed fields are skipped: the decoder
// only finds where they end.
type leanMeta struct {
	metav1.ObjectMeta `json:",inline"`
	ManagedFields     skipped `json:"managedFields"`
}

// skipped is a JSON value that is read past and not decoded.
type skipped struct{}

// UnmarshalJSON ignores the value.
func (*skipped) UnmarshalJSON([]byte) error { return nil }

// kcpRunStatus is what the policy reads of a KubeadmControlPlane's status:
// the versions its machines run.
type kcpRunStatus struct {
	Version  string                    `json:"version,omitempty"`
	Versions []clusterv1.StatusVersion `json:"versions,omitempty"`
}

// validating serves a Validator with objects decoded by a leanDecoder. It
// answers as controller-runtime's handler of a CustomValidator does
// (admission.WithValidator, whose decoder cannot be replaced): an error
// carrying an API status answers with that status, any other denies with
// its message, warnings ride along either way.
type validating[T client.Object] struct {
	validator *Validator[T]
	new       func() T
	decoder   admission.Decoder
}

var _ admission.Handler = validating[*clusterv1.MachineDeployment]{}

// Handle judges one admission request.
func (h validating[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	ctx = admission.NewContextWithRequest(ctx, req)
	obj := h.new()
	var warnings admission.Warnings
	var err error
	switch req.Operation {
	case admissionv1.Connect:
	case admissionv1.Create:
		if err := h.decoder.DecodeRaw(req.Object, obj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		warnings, err = h.validator.ValidateCreate(ctx, obj)
	case admissionv1.Update:
		oldObj := h.new()
		if err := h.decoder.DecodeRaw(req.Object, obj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if err := h.decoder.DecodeRaw(req.OldObject, oldObj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		warnings, err = h.validator.ValidateUpdate(ctx, oldObj, obj)
	case admissionv1.Delete:
		if err := h.decoder.DecodeRaw(req.OldObject, obj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
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
