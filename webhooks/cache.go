package webhooks

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// CacheOptions returns the cache options of the guard's manager. The guard
// holds in memory every Cluster, control plane, worker pool and Machine of
// the management cluster, so each kind keeps only what some reader of the
// cache reads (a management cluster with thousands of clusters must not cost
// gigabytes):
//
//   - Clusters, ClusterClasses, KubeadmControlPlanes, MachineDeployments
//     and MachinePools are trimmed as their entry in package kinds says
//     (kinds.Kind.Trim): a ClusterClass keeps spec.kubernetesVersions and
//     the upgrade-plan extension (how Cluster API plans a chained upgrade),
//     a Cluster its control-plane reference and spec.paused. All keep
//     the project's own annotations (revision stamps and the highest
//     versions run); of their labels and owner references, worker pools,
//     control planes and Clusters keep what names their Cluster and the
//     topology-owned label, the others all.
//   - MachineSets keep their UID, spec.clusterName and template version
//     (kinds.MachineSet.Trim): what judging a Machine they own reads.
//   - Machine: kept as a compact entry of what the policy reads of it
//     (CompactMachine), which MachineStore reads; the cache cannot give it
//     back as a Machine.
//
// An object cached without all of its revision content
// (kinds.Kind.ContentCached) carries the hash of it in its cached copy
// (history.AnnotationCachedHash), taken as it enters the cache.
//
// Every kind loses its managed fields. Other kinds (control planes of other
// providers, read as unstructured through the contract) keep their content
// minus managed fields. RolloutRevisions are not in this cache: see
// ClientOptions.
//
// pending, when not nil, keeps the whole revision content the cache saw
// last of an object cached without all of it, for the history reconciler
// (history.Pending).
func CacheOptions(pending *history.Pending) cache.Options {
	byObject := map[client.Object]cache.ByObject{
		&clusterv1.Machine{}: {Transform: CompactMachine},
		// A MachineSet is read as the owner of Machines: its UID, cluster
		// and version (kinds.MachineSet.Trim).
		&clusterv1.MachineSet{}: {Transform: cacheTransform(kinds.MachineSet, nil)},
	}
	for _, kind := range kinds.WithRevisions() {
		byObject[kind.New()] = cache.ByObject{Transform: cacheTransform(kind, pending)}
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         byObject,
	}
}

// RevisionContentCached says whether the guard's cache keeps all of what
// a revision of kind gvk is made of (kinds.Kind.ContentCached), so that
// the history reconciler can take an object's live revision from the
// cache. It does not for a KubeadmControlPlane, cached without its
// kubeadmConfigSpec, for a MachineDeployment, cached with only the
// version of its template, nor for a ClusterClass or a Cluster, cached
// without their templates and topology: their cached copies carry the hash of that
// content, and the reconciler reads one from the API server when that
// content is not recorded as the object's stamps say and the content the
// cache saw of it is no longer kept aside (history.Pending) — rarely;
// never when the guard restarts with its history recorded.
func RevisionContentCached(gvk schema.GroupVersionKind) bool {
	for _, kind := range kinds.WithRevisions() {
		if kind.GVK.GroupKind() == gvk.GroupKind() {
			return kind.ContentCached
		}
	}
	return true
}

// CacheTransform is the cache transform of kind (see CacheOptions), keeping
// no content aside. Objects of other kinds are returned unchanged.
func CacheTransform(kind kinds.Kind) toolscache.TransformFunc {
	return cacheTransform(kind, nil)
}

// cacheTransform is CacheTransform, keeping the whole revision content of
// an object whose cached copy does not hold all of it in pending (which
// may be nil). It remembers the content hash of each object at its
// generation, and the fingerprint of its content (contentHashes): an event
// that changes nothing of the spec (status, labels, annotations) takes no
// snapshot and keeps nothing aside, nor does a scale.
func cacheTransform(kind kinds.Kind, pending *history.Pending) toolscache.TransformFunc {
	var hashes contentHashes
	return func(in any) (any, error) {
		obj, ok := in.(client.Object)
		if !ok {
			return in, nil
		}
		if of, ok := kinds.Of(obj); !ok || of.GVK != kind.GVK {
			return in, nil
		}
		if kind.HasRevisions() && !kind.ContentCached {
			if trimmedBefore(obj) {
				return obj, nil
			}
			noted := hashes.value(obj, kind.Fingerprint, func() string {
				snap, err := kind.Snapshot(obj)
				if err == nil && kind.Tracked(obj) {
					pending.Keep(obj, snap)
				}
				return history.CachedHashValue(contentHash(snap, err))
			})
			trimMeta(obj, kind.HasRevisions(), noted)
		} else {
			trimMeta(obj, kind.HasRevisions(), "")
		}
		if kind.Trim != nil {
			kind.Trim(obj)
		}
		return obj, nil
	}
}

// ClientOptions returns the client options of the guard's manager: reads of
// RolloutRevisions through the client always go to the API server. A
// cached copy of every revision of every object, data included, would be
// the largest thing the guard holds; history.Index keeps only their
// metadata, in a store of its own filled by a metadata watch, and a
// revision's data is read live when needed.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&rgv1alpha1.RolloutRevision{}}}}
}

// trimMeta keeps the object metadata an informer and the guard's readers
// need, dropping managed fields, finalizers and the annotations of others;
// an object with revisions keeps its owner references and labels (few and
// small on worker pools and control planes; the cluster-name label names a
// control plane's Cluster), others lose them.
//
// cachedHash, when not "", is set as history.AnnotationCachedHash: the
// hash of the revision content of the whole object, taken before the
// transform dropped part of it (see withContentHash).
func trimMeta(m metav1.Object, withRevisions bool, cachedHash string) {
	m.SetManagedFields(nil)
	m.SetFinalizers(nil)
	keepLabel := allLabels
	if !withRevisions {
		m.SetOwnerReferences(nil)
		keepLabel = nil
	}
	ann := ours(m.GetAnnotations(), cachedHash != "")
	if cachedHash != "" {
		ann[history.AnnotationCachedHash] = cachedHash
	}
	m.SetAnnotations(ann)
	m.SetLabels(filtered(m.GetLabels(), keepLabel, 0))
}

// ours keeps the annotations the project owns (revision stamps, highest
// versions run, the override) but history.AnnotationCachedHash, which only
// the cache sets (trimMeta). withRoom makes the map non-nil, with room
// for that one.
func ours(in map[string]string, withRoom bool) map[string]string {
	extra := 0
	if withRoom {
		extra = 1
	}
	return filtered(in, func(k string) bool {
		return strings.HasPrefix(k, revisions.Prefix) && k != history.AnnotationCachedHash
	}, extra)
}

// contentHash is the hash the cache notes on a cached copy of the revision
// content of the whole object, taken before the transform dropped part of
// it (history.AnnotationCachedHash): the history reconciler then knows
// whether that content is recorded without reading the object from the
// API server. A content whose revision cannot be taken gets no hash ("");
// the reconciler reads the object and says why.
func contentHash(snap revisions.Snapshot, err error) string {
	if err != nil {
		return ""
	}
	return snap.Hash
}

// trimmedBefore says whether obj is a copy the cache already trimmed (it
// carries the hash the cache noted): an informer may pass what it holds
// through its transform again, and the transforms that note a hash must
// then leave it as it is.
func trimmedBefore(obj metav1.Object) bool {
	_, noted := history.CachedHash(obj)
	return noted
}

// filtered returns the entries of in that keep keeps, in a map of their
// exact size, keys and values shared with every other object's (see
// shared): thousands of control planes and worker pools carry the same
// label and annotation keys, and the same values of most of them (cluster
// names, revision numbers, who changed them and how).
//
// extra is room for more entries the caller adds: with extra > 0 the map
// is made even when none of in is kept.
func filtered(in map[string]string, keep func(string) bool, extra int) map[string]string {
	n := 0
	if keep != nil {
		for k := range in {
			if keep(k) {
				n++
			}
		}
	}
	if n+extra == 0 {
		return nil
	}
	out := make(map[string]string, n+extra)
	if n == 0 {
		return out
	}
	for k, v := range in {
		if keep(k) {
			out[shared(k)] = shared(v)
		}
	}
	return out
}

// TrimClusterClass is the cache transform of ClusterClasses (see
// CacheOptions), keeping no content aside. Objects of other types are
// returned unchanged.
func TrimClusterClass(obj any) (any, error) {
	return cacheTransform(kinds.ClusterClass, nil)(obj)
}

// allLabels keeps every label.
func allLabels(string) bool { return true }

var _ toolscache.TransformFunc = TrimClusterClass
