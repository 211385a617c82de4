package kinds

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestEveryKindIsFoundFromItsObjects: an object New makes is of the kind
// that made it, and a kind with revisions can snapshot it and name its
// restart; a kind without revisions (Cluster) has no snapshot.
func TestEveryKindIsFoundFromItsObjects(t *testing.T) {
	contract := Contract(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KThreesControlPlane"})
	for _, kind := range append(WithRevisions(), contract, Cluster) {
		t.Run(kind.GVK.Kind, func(t *testing.T) {
			obj := kind.New()
			got, ok := Of(obj)
			if !ok || got.GVK != kind.GVK {
				t.Fatalf("Of(New()) = %v, %v; want %v", got.GVK, ok, kind.GVK)
			}
			if kind.ClusterName == nil || kind.RolloutAfter == nil {
				t.Fatal("every kind names its Cluster and its restart")
			}
			_, withHistory := HistoryOf(obj)
			if withHistory != kind.HasRevisions() || withHistory == (kind.GVK.Kind == "Cluster") {
				t.Errorf("HistoryOf = %v, HasRevisions = %v", withHistory, kind.HasRevisions())
			}
		})
	}
}

// TestLeanDecodingRefusesOtherKinds: an object of another kind or version
// is not decoded lean (ErrNotLean), so the scheme's decoder says what is
// wrong with it; a malformed one is an error of its own.
func TestLeanDecodingRefusesOtherKinds(t *testing.T) {
	for _, kind := range WithRevisions() {
		t.Run(kind.GVK.Kind, func(t *testing.T) {
			other := []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"` + kind.GVK.Kind + `","metadata":{"name":"a"}}`)
			if err := kind.DecodeLean(other, kind.New()); !errors.Is(err, ErrNotLean) {
				t.Errorf("an older version: %v, want ErrNotLean", err)
			}
			if err := kind.DecodeLean([]byte(`{"metadata":`), kind.New()); err == nil || errors.Is(err, ErrNotLean) {
				t.Errorf("malformed JSON: %v, want a decoding error", err)
			}
			good := []byte(`{"apiVersion":"` + kind.GVK.GroupVersion().String() + `","kind":"` + kind.GVK.Kind + `","metadata":{"name":"a","managedFields":[{"manager":"x"}]}}`)
			into := kind.New()
			if err := kind.DecodeLean(good, into); err != nil {
				t.Fatalf("its own kind: %v", err)
			}
			if into.GetName() != "a" || into.GetManagedFields() != nil {
				t.Errorf("decoded %q with managed fields %v; want the name and no managed fields", into.GetName(), into.GetManagedFields())
			}
		})
	}
}
