package kinds

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TestEveryKindIsFoundFromItsObjects: an object New makes is of the kind
// that made it, and every kind the guard polices has revisions; an empty
// Cluster (no topology) has none of its own.
func TestEveryKindIsFoundFromItsObjects(t *testing.T) {
	contract := Contract(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KThreesControlPlane"})
	for _, kind := range append(WithRevisions(), contract) {
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
			if !kind.HasRevisions() || withHistory == (kind.GVK.Kind == "Cluster") {
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
		if kind.DecodeLean == nil {
			continue // decoded whole
		}
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

// TestClusterRevisionsAreItsTopology: a Cluster has revisions only with a
// topology, and they are its topology: what Cluster API's controllers
// write of it (references, status) changes nothing of them. A
// ClusterClass's are its spec; its cached copy keeps what the policy reads.
func TestClusterRevisionsAreItsTopology(t *testing.T) {
	plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	if _, ok := HistoryOf(plain); ok {
		t.Error("a Cluster without a topology has no history of its own")
	}
	withTopology := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "cc"}}
	withTopology.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "demo-class"}, Version: "v1.35.2"}
	kind, ok := HistoryOf(withTopology)
	if !ok || kind.GVK.Kind != "Cluster" {
		t.Fatalf("HistoryOf(a topology Cluster) = %v, %v", kind.GVK, ok)
	}
	before, err := kind.Snapshot(withTopology)
	if err != nil {
		t.Fatal(err)
	}
	written := withTopology.DeepCopy()
	written.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "cc-cp"}
	written.Status.Phase = "Provisioned"
	after, err := kind.Snapshot(written)
	if err != nil {
		t.Fatal(err)
	}
	if before.Hash != after.Hash {
		t.Errorf("the controllers' writes changed the topology's revision: %s → %s", before.Hash, after.Hash)
	}

	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Name: "demo-class"}}
	cc.Spec.KubernetesVersions = []string{"v1.35.2", "v1.36.1"}
	cc.Spec.Variables = []clusterv1.ClusterClassVariable{{Name: "workerImage"}}
	ccKind, ok := HistoryOf(cc)
	if !ok || ccKind.GVK.Kind != "ClusterClass" || ccKind.Decide != nil || ccKind.ContentCached {
		t.Fatalf("HistoryOf(a ClusterClass) = %v, %v", ccKind.GVK, ok)
	}
	ccKind.Trim(cc)
	if len(cc.Spec.KubernetesVersions) != 2 || cc.Spec.Variables != nil {
		t.Errorf("trimmed class: %+v; want its kubernetesVersions only", cc.Spec)
	}
}
