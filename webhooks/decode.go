package webhooks

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/json"
)

// leanDecoder decodes the objects of admission requests for the mutating
// webhook (Stamper.Decoder, controller-runtime's admission.Decoder),
// leaving out what it does not read: the managed fields of a
// MachineDeployment, MachinePool or KubeadmControlPlane, and its status
// (but a control plane's status.version and status.versions, which the
// policy reads as what the control plane runs). Other objects are decoded
// whole, by the scheme's decoder.
//
// Why: as Cluster API's controllers write them, the managed fields and the
// status are most of such an object (a control plane of the quick start:
// 4.5 and 3.3 of 9.2 KB), and decoding them was most of each mutating
// call's own time, two objects per call: 256–308 µs each whole, 121–133
// lean (BenchmarkDecodeControlPlane). The validating webhooks keep
// controller-runtime's handler, whose decoder cannot be replaced: they
// are called for version changes only, and a copy of that handler
// decoding lean saved them at most 0.2 ms per call (docs/benchmarks.md).
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
