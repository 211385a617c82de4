package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/rollout-guard/rollout-guard/policy"
)

// ValidateKubeadmControlPlanePath is the path of the KubeadmControlPlane
// validating webhook, as config/webhook/manifests.yaml names it.
const ValidateKubeadmControlPlanePath = "/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"

// KubeadmControlPlaneHandler is the validating webhook of
// KubeadmControlPlanes. It judges like Validator, but decodes from each
// object only what the policy reads (metadata, spec.version, the etcd image
// tag, status.version and status.versions) instead of the whole object: a
// KubeadmControlPlane's kubeadmConfigSpec (files, commands, flags) is most
// of its size, the policy never reads it, and decoding it twice per
// admission was most of the webhook's own cost.
//
// Only well-formed CREATE and UPDATE requests of v1beta2 objects without a
// break-glass override take that path; everything else (other operations,
// other kinds or versions, objects that do not decode, overrides, whose
// refusal records the whole revision) goes to Full, controller-runtime's
// typed handler of the same Validator, so every such answer is the one it
// gives, error messages included.
type KubeadmControlPlaneHandler struct {
	// Validator judges the change.
	Validator *Validator[*controlplanev1.KubeadmControlPlane]
	// Full is controller-runtime's handler of Validator (see
	// NewKubeadmControlPlaneHandler).
	Full admission.Handler
}

// NewKubeadmControlPlaneHandler returns the handler of v, with the types of scheme.
func NewKubeadmControlPlaneHandler(scheme *runtime.Scheme, v *Validator[*controlplanev1.KubeadmControlPlane]) *KubeadmControlPlaneHandler {
	return &KubeadmControlPlaneHandler{Validator: v, Full: admission.WithValidator(scheme, v).Handler}
}

var _ admission.Handler = &KubeadmControlPlaneHandler{}

// leanKCP holds the fields of a KubeadmControlPlane the policy reads.
type leanKCP struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Version           string `json:"version"`
		KubeadmConfigSpec struct {
			ClusterConfiguration struct {
				Etcd struct {
					Local struct {
						ImageTag string `json:"imageTag"`
					} `json:"local"`
				} `json:"etcd"`
			} `json:"clusterConfiguration"`
		} `json:"kubeadmConfigSpec"`
	} `json:"spec"`
	Status struct {
		Version  string                    `json:"version"`
		Versions []clusterv1.StatusVersion `json:"versions"`
	} `json:"status"`
}

// decodeLeanKCP decodes raw (a KubeadmControlPlane as JSON) into a
// KubeadmControlPlane holding only the fields the policy reads.
func decodeLeanKCP(raw []byte) (*controlplanev1.KubeadmControlPlane, error) {
	if len(raw) == 0 {
		return nil, errors.New("there is no content to decode")
	}
	var l leanKCP
	// Case-sensitive, as the API server's own decoding: a field spelled
	// "Version" is not spec.version.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &l); err != nil {
		return nil, err
	}
	// Another kind or version is for the full decoder to accept (an object
	// without apiVersion and kind is the endpoint's kind) or refuse.
	if gvk := l.GroupVersionKind(); !gvk.Empty() && gvk != controlplanev1.GroupVersion.WithKind("KubeadmControlPlane") {
		return nil, fmt.Errorf("not a %s", controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
	}
	kcp := &controlplanev1.KubeadmControlPlane{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata}
	kcp.Spec.Version = l.Spec.Version
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = l.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
	kcp.Status.Version = l.Status.Version //nolint:staticcheck // read by the policy on older controllers
	kcp.Status.Versions = l.Status.Versions
	return kcp, nil
}

// Handle answers one admission request for a KubeadmControlPlane.
func (h *KubeadmControlPlaneHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	oldKCP, newKCP, ok := h.decodeLean(req)
	if !ok {
		return h.Full.Handle(ctx, req)
	}
	ctx = admission.NewContextWithRequest(ctx, req)
	// decodeLean decoded both objects as JSON objects: what
	// checkRequestObjects would check again.
	ctx = context.WithValue(ctx, objectsCheckedKey{}, true)
	var warnings admission.Warnings
	var err error
	if oldKCP == nil {
		warnings, err = h.Validator.ValidateCreate(ctx, newKCP)
	} else {
		warnings, err = h.Validator.ValidateUpdate(ctx, oldKCP, newKCP)
	}
	// The answer as controller-runtime's typed handler builds it.
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			s := status.Status()
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &s}}.WithWarnings(warnings...)
		}
		return admission.Denied(err.Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// decodeLean decodes the objects of a request that can take the lean path;
// ok is false for every other request. oldKCP is nil on CREATE.
func (h *KubeadmControlPlaneHandler) decodeLean(req admission.Request) (oldKCP, newKCP *controlplanev1.KubeadmControlPlane, ok bool) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil, false
	}
	// Only JSON objects (decodeLeanKCP then checks the whole syntax); the
	// typed handler answers anything else, as checkRequestObjects says.
	if !startsObject(req.Object.Raw) || (req.Operation == admissionv1.Update && !startsObject(req.OldObject.Raw)) {
		return nil, nil, false
	}
	newKCP, err := decodeLeanKCP(req.Object.Raw)
	if err != nil {
		return nil, nil, false
	}
	var oldObj client.Object // a nil interface on create, not a nil pointer
	if req.Operation == admissionv1.Update {
		if oldKCP, err = decodeLeanKCP(req.OldObject.Raw); err != nil {
			return nil, nil, false
		}
		oldObj = oldKCP
	}
	if _, requested := policy.OverrideRequested(oldObj, newKCP); requested {
		return nil, nil, false
	}
	return oldKCP, newKCP, true
}

// startsObject reports whether raw starts, after white space, with '{'.
func startsObject(raw []byte) bool {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// objectsCheckedKey marks a context whose request objects are known to be
// JSON objects, so Validator skips checkRequestObjects.
type objectsCheckedKey struct{}
