package kinds

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Kind is one kind the guard polices, with what the rest of the product
// needs to know about it. A field that does not apply to a kind is nil
// (a ClusterClass is not judged by the policy, so no Decide).
type Kind struct {
	// GVK is the kind's group, version and kind (v1beta2 for Cluster API's
	// own kinds, the served version for a contract control plane).
	GVK schema.GroupVersionKind
	// New returns an empty object of the kind.
	New func() client.Object
	// Snapshot returns the revision content of an object of the kind; nil
	// for a kind without revisions.
	Snapshot func(client.Object) (revisions.Snapshot, error)
	// Fingerprint returns a fast hash of an object's revision content as
	// encoded, before it is made canonical (revisions.FingerprintMachineDeployment):
	// the guard's cache compares it across versions of one object, to
	// take no Snapshot of a spec change that leaves the content alone (a
	// scale). nil for a kind without replicas and for a kind cached with
	// all of its content (ContentCached).
	Fingerprint func(client.Object) (uint64, error)
	// Tracks says whether an object of a kind with revisions has them:
	// a Cluster only when it has a topology. nil: every object has.
	Tracks func(client.Object) bool
	// RolloutAfter returns the object's spec.rollout.after as RFC3339, ""
	// when unset or when the kind has none (a MachinePool).
	RolloutAfter func(client.Object) string
	// ClusterName returns the name of the Cluster the object belongs to: a
	// worker pool's spec.clusterName, else its owning Cluster, else its
	// cluster-name label (a Cluster's own name); "" when it names none.
	ClusterName func(client.Object) string
	// DecodeLean decodes an admission request's object of the kind into
	// into (an object New made), leaving out what no reader of the guard
	// reads: managed fields and status, but what the policy reads of it.
	// It returns ErrNotLean when raw is not of the kind and version, so the
	// caller decodes it whole. nil: the kind is decoded whole.
	DecodeLean func(raw []byte, into client.Object) error
	// Trim drops from a cached object's spec and status what no reader of
	// the guard's cache reads, and of the labels and owner references the
	// cache keeps for kinds with revisions, those that say nothing more
	// than ClusterName and the topology-owned label (for worker pools,
	// control planes and Clusters); the rest of its metadata is trimmed
	// by the cache. nil: the kind is cached whole (but its managed
	// fields).
	Trim func(client.Object)
	// Decide is how a change of the kind is judged: which of the policy's
	// ways (Judge) decides it, with what of the object; nil for a kind the
	// policy does not judge (ClusterClass).
	Decide Decision
	// ContentCached says whether Trim keeps all of the revision content, so
	// the history reconciler can take an object's live revision from the
	// cache. When it does not, the cache notes the hash of the whole
	// content on the cached copy before trimming it.
	ContentCached bool
}

// HasRevisions says whether objects of the kind have revisions (history).
func (k Kind) HasRevisions() bool { return k.Snapshot != nil }

// Tracked says whether obj, of kind k, has revisions: its kind has, and
// Tracks (when set) says obj has.
func (k Kind) Tracked(obj client.Object) bool {
	return k.HasRevisions() && (k.Tracks == nil || k.Tracks(obj))
}

// Of returns the kind of obj, false for a kind the guard does not police.
// An unstructured object is taken as a control plane read through the
// contract (Contract).
func Of(obj client.Object) (Kind, bool) {
	switch obj.(type) {
	case *unstructured.Unstructured:
		return Contract(obj.GetObjectKind().GroupVersionKind()), true
	case *clusterv1.MachineDeployment:
		return MachineDeployment, true
	case *clusterv1.MachinePool:
		return MachinePool, true
	case *controlplanev1.KubeadmControlPlane:
		return KubeadmControlPlane, true
	case *clusterv1.Cluster:
		return Cluster, true
	case *clusterv1.ClusterClass:
		return ClusterClass, true
	case *clusterv1.MachineSet:
		return MachineSet, true
	case *clusterv1.Machine:
		return Machine, true
	}
	return Kind{}, false
}

// WithRevisions returns the kinds of Cluster API's own with revisions, in
// the order the guard sets them up: MachineDeployment, MachinePool,
// KubeadmControlPlane, ClusterClass, Cluster. Contract control planes are
// added per --control-plane-kinds (Contract).
func WithRevisions() []Kind {
	return []Kind{MachineDeployment, MachinePool, KubeadmControlPlane, ClusterClass, Cluster}
}

// clusterName finds the Cluster an object belongs to as Cluster API
// follows it: spec (a worker pool's spec.clusterName, which Cluster API
// makes immutable), else its owning Cluster (a control plane's owner
// reference, which Cluster API's controllers follow), else its
// cluster-name label (Cluster API's copy, which any editor of the object
// may change, and which names the Cluster of a control plane before its
// Cluster controller has set the owner reference).
//
// Why the label last: a control plane whose label names another Cluster
// than its owner is still upgraded, paused and recorded as its owner's,
// and the guard must read the same Cluster (policy/identity.go).
func clusterName(obj client.Object, spec string) string {
	if spec != "" {
		return spec
	}
	if owner := OwnerCluster(obj); owner != "" {
		return owner
	}
	return obj.GetLabels()[clusterv1.ClusterNameLabel]
}

// OwnerCluster returns the name of the Cluster of Cluster API's group that
// owns obj, "" when none does.
func OwnerCluster(obj client.Object) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "Cluster" && ref.APIVersion != "" && schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == clusterv1.GroupVersion.Group {
			return ref.Name
		}
	}
	return ""
}

// ControlPlaneClusterName is the Cluster a control plane of any kind
// belongs to, read from its metadata alone: its owning Cluster, else its
// cluster-name label (see clusterName); "" when it names none.
func ControlPlaneClusterName(obj client.Object) string { return clusterName(obj, "") }

// trimClusterMeta drops from a cached object the labels and owner
// references no reader of the guard's cache reads: it keeps the
// topology-owned label (the policy leaves topology-owned workers to the
// topology controller) and, of the cluster-name label and the owner
// references to a Cluster, only what clusterName needs to name the same
// Cluster as before (a worker pool's spec.clusterName names it already,
// a Cluster is its own).
//
// Why: a map and a slice of owner references cost several hundred bytes
// per object, thousands of times over, for values that say what
// clusterName and the topology-owned label say.
func trimClusterMeta(o client.Object, clusterName func(client.Object) string) {
	want := clusterName(o)
	labels, refs := o.GetLabels(), o.GetOwnerReferences()
	keep := func(keys ...string) map[string]string {
		var out map[string]string
		for _, k := range keys {
			if v, ok := labels[k]; ok {
				if out == nil {
					out = make(map[string]string, len(keys))
				}
				out[k] = v
			}
		}
		return out
	}
	o.SetOwnerReferences(nil)
	o.SetLabels(keep(clusterv1.ClusterTopologyOwnedLabel))
	if clusterName(o) == want {
		return
	}
	o.SetLabels(keep(clusterv1.ClusterTopologyOwnedLabel, clusterv1.ClusterNameLabel))
	if clusterName(o) == want {
		return
	}
	var clusters []metav1.OwnerReference
	for _, ref := range refs {
		if ref.Kind == "Cluster" {
			clusters = append(clusters, ref)
		}
	}
	o.SetOwnerReferences(clusters)
	if clusterName(o) != want {
		// Never reached: clusterName reads nothing else. Keep all.
		o.SetLabels(labels)
		o.SetOwnerReferences(refs)
	}
}

// rolloutAfter formats a spec.rollout.after as the revisions record it.
func rolloutAfter(after time.Time) string {
	if after.IsZero() {
		return ""
	}
	return after.UTC().Format(time.RFC3339)
}

// HistoryOf returns the kind of obj when obj has revisions (a history),
// false otherwise: for a Cluster without a topology and for kinds the
// guard does not police.
func HistoryOf(obj client.Object) (Kind, bool) {
	kind, ok := Of(obj)
	if !ok || !kind.Tracked(obj) {
		return Kind{}, false
	}
	return kind, true
}

// errWrongKind says that obj was handed to the entry of another kind.
func errWrongKind(kind string, obj client.Object) error {
	return fmt.Errorf("expected a %s, got %T", kind, obj)
}
