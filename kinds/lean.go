package kinds

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/json"
)

// ErrNotLean says that an object is not of the kind and version its lean
// decoding (Kind.DecodeLean) expects: the scheme's decoder then says what
// is wrong with it.
var ErrNotLean = errors.New("not the expected kind")

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
		return ErrNotLean
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
