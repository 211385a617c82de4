package webhooks

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/kinds"
)

// leanDecoder decodes the objects of admission requests for the guard's
// handlers (Stamper.Decoder and validating, as controller-runtime's
// admission.Decoder), leaving out what none of them reads, as each kind's
// lean decoding says (kinds.Kind.DecodeLean): the managed fields of a
// MachineDeployment, MachinePool or KubeadmControlPlane, and its status
// (but a control plane's status.version and status.versions, which the
// policy reads as what the control plane runs). Other objects are decoded
// whole, by the scheme's decoder.
//
// Why: as Cluster API's controllers write them, the managed fields and the
// status are most of such an object, and decoding them was most of each
// call's own time, two objects per update (BenchmarkDecodeControlPlane,
// BenchmarkValidatingDecoders).
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
	obj, ok := into.(client.Object)
	if !ok || len(raw.Raw) == 0 {
		return d.whole.DecodeRaw(raw, into)
	}
	kind, ok := kinds.Of(obj)
	if !ok || kind.DecodeLean == nil {
		return d.whole.DecodeRaw(raw, into)
	}
	err := kind.DecodeLean(raw.Raw, obj)
	if errors.Is(err, kinds.ErrNotLean) {
		// Not the object it should be (another kind, another version):
		// the scheme's decoder says what is wrong.
		return d.whole.DecodeRaw(raw, into)
	}
	return err
}
