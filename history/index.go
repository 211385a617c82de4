package history

import (
	"context"
	"fmt"
	"reflect"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// ownerUIDIndex is the name of the Index's field index: the owner UID label
// of a ControllerRevision.
const ownerUIDIndex = "rollout-guard.io/owner-uid"

// Index is what the guard knows of recorded revisions without asking the
// API server: the metadata (labels and annotations, where a revision's
// record lives — not its data) of every ControllerRevision the guard made,
// kept by a metadata-only informer and indexed by owner.
//
// Why: numbering a new revision needs the object's history, and recording
// one needs to know whether its content is recorded already. Read from the
// API server, that was a GET and a List of ControllerRevisions for every
// recorded revision, and a List per object when the guard starts. From the
// Index it costs no request. The Index may lag the API server by a watch
// event — as the watch-cache List it replaces did (FromWatchCache) — so a
// create that meets a record made a moment ago fails with AlreadyExists,
// and the Recorder then reads from the API server.
type Index struct {
	// reader reads IndexObjects (the manager's cache).
	reader client.Reader
	// synced says whether the informer behind reader has been filled.
	synced func() bool
}

// IndexObject is the object the Index's informer caches: the metadata of a
// ControllerRevision.
func IndexObject() client.Object {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ControllerRevision"))
	return obj
}

// IndexCacheOptions is how the manager's cache keeps IndexObject: only the
// ControllerRevisions the guard made (those with its owner UID label; the
// history of DaemonSets and StatefulSets is not its business), without the
// managed fields, finalizers and owner references nothing here reads.
func IndexCacheOptions() cache.ByObject {
	ours, err := labels.NewRequirement(revisions.LabelOwnerUID, selection.Exists, nil)
	if err != nil { // a constant, valid label key
		panic(fmt.Sprintf("the label selector of the revision index: %v", err))
	}
	return cache.ByObject{
		Label:     labels.NewSelector().Add(*ours),
		Transform: compactMetadata,
	}
}

// compactMetadata is the Index's cache transform: it keeps of a
// ControllerRevision's metadata what the Index reads — name, namespace,
// resourceVersion, labels and annotations — and shares the strings many
// revisions repeat (keys, namespaces, owner UIDs, kinds, authors, field
// managers, causes) instead of holding a copy per revision. The Index holds
// every revision of every object in memory: at 40,000 revisions each byte
// saved is 40 kB. The refused break-glass attempts (a JSON list of up to
// MaxRefusedOverrides) are left out: they are read and written whole from
// the API server, and a patch from the Index never touches a key it does
// not hold.
func compactMetadata(in any) (any, error) {
	obj, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		if m, err := meta.Accessor(in); err == nil {
			m.SetManagedFields(nil)
		}
		return in, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: shared(obj.APIVersion), Kind: shared(obj.Kind)}}
	out.Name = obj.Name
	out.Namespace = shared(obj.Namespace)
	out.ResourceVersion = obj.ResourceVersion
	if len(obj.Labels) > 0 {
		out.Labels = make(map[string]string, len(obj.Labels))
		for k, v := range obj.Labels {
			if k == revisions.LabelHash {
				out.Labels[shared(k)] = v // one per revision: nothing to share
				continue
			}
			out.Labels[shared(k)] = shared(v)
		}
	}
	if len(obj.Annotations) > 0 {
		out.Annotations = make(map[string]string, len(obj.Annotations))
		for k, v := range obj.Annotations {
			switch k {
			case AnnotationRefusedOverrides:
			case revisions.AnnotationChangedBy, revisions.AnnotationFieldManager, revisions.AnnotationChangeCause, revisions.AnnotationChangeType,
				revisions.AnnotationOverriddenBy, revisions.AnnotationOverrideReason, revisions.AnnotationOverrideRules:
				out.Annotations[shared(k)] = shared(v)
			default:
				out.Annotations[shared(k)] = v
			}
		}
	}
	return out, nil
}

// shared returns the one copy of s the process keeps.
func shared(s string) string {
	return unique.Make(s).Value()
}

// NewIndex registers the Index's informer and its owner index in c. Call it
// before c starts (the manager starts it); c must keep IndexObject as
// IndexCacheOptions says.
func NewIndex(ctx context.Context, c cache.Cache) (*Index, error) {
	if err := c.IndexField(ctx, IndexObject(), ownerUIDIndex, func(obj client.Object) []string {
		if uid := obj.GetLabels()[revisions.LabelOwnerUID]; uid != "" {
			return []string{uid}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing ControllerRevisions by owner: %w", err)
	}
	informer, err := c.GetInformer(ctx, IndexObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watching the metadata of ControllerRevisions: %w", err)
	}
	return &Index{reader: c, synced: informer.HasSynced}, nil
}

// Synced says whether the Index has been filled; until then it answers
// nothing and readers go to the API server.
func (i *Index) Synced() bool {
	return i != nil && i.synced()
}

// List returns the recorded history of the owner with the given UID in
// namespace, sorted by revision number, without the revisions' data. ok is
// false when the Index cannot answer — not filled yet, or a record it holds
// cannot be decoded (the API server's copy says why) — and the caller must
// read from the API server.
func (i *Index) List(ctx context.Context, namespace, ownerUID string) (revs []revisions.Revision, ok bool, err error) {
	if !i.Synced() {
		return nil, false, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ControllerRevisionList"))
	if err := i.reader.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{ownerUIDIndex: ownerUID}); err != nil {
		return nil, false, fmt.Errorf("listing the recorded revisions of %s in %s from the revision index: %w", ownerUID, namespace, err)
	}
	revs = []revisions.Revision{} // listed, even when empty
	for n := range list.Items {
		rev, err := revisions.FromMetadata(&list.Items[n])
		if err != nil {
			return nil, false, nil
		}
		revs = append(revs, rev)
	}
	revisions.Sort(revs)
	return revs, true, nil
}

// Get returns the metadata of the ControllerRevision name in namespace,
// nil when the Index holds none. ok is false when the Index cannot answer
// (not filled yet).
func (i *Index) Get(ctx context.Context, namespace, name string) (_ *metav1.PartialObjectMetadata, ok bool, _ error) {
	if !i.Synced() {
		return nil, false, nil
	}
	obj := IndexObject().(*metav1.PartialObjectMetadata)
	if err := i.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("reading ControllerRevision %s/%s from the revision index: %w", namespace, name, err)
	}
	return obj, true, nil
}

// recordFromIndex is one attempt of record that reads what is recorded from
// the Index instead of the API server: no request when the content is
// recorded as rec would have it, one create when it is not recorded, one
// patch of the record (with the resourceVersion the Index holds as
// precondition) otherwise. ok is false when the Index cannot answer; the
// attempt then reads from the API server. A conflict or AlreadyExists
// (the Index was behind) makes record try again, from the API server.
//
// The data of a recorded revision is not in the Index: content recorded
// under the same name has the same hash, so its data is what it was.
func (r *Recorder) recordFromIndex(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, what string) (out recorded, ok bool, _ error) {
	name := revisions.Name(owner.GetName(), snap.Hash)
	meta, ok, err := r.Index.Get(ctx, owner.GetNamespace(), name)
	if err != nil || !ok {
		return recorded{}, false, err
	}
	if meta == nil {
		out, err = r.create(ctx, owner, ownerGVK, snap, rec, true, what)
		return out, true, err
	}
	old, err := revisions.FromMetadata(meta)
	if err != nil {
		return recorded{}, false, nil // damaged: the API server's copy is replaced
	}
	out, want, err := r.merge(ctx, owner, ownerGVK, snap, rec, old, meta.Annotations, true)
	if err != nil {
		return recorded{}, true, err
	}
	if reflect.DeepEqual(meta.Annotations, want.Annotations) && reflect.DeepEqual(meta.Labels, want.Labels) {
		return out, true, nil
	}
	// The record as the Index holds it, and as it should be: the patch
	// between them (controller-runtime's merge patch, with the
	// resourceVersion read as precondition) touches only what differs,
	// never the data nor an annotation the Index does not hold.
	base := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: meta.Namespace, Name: meta.Name,
		ResourceVersion: meta.ResourceVersion, Labels: meta.Labels, Annotations: meta.Annotations}, Revision: old.Record.Revision}
	updated := base.DeepCopy()
	updated.Labels, updated.Annotations, updated.OwnerReferences, updated.Revision = want.Labels, want.Annotations, want.OwnerReferences, want.Revision
	if err := r.Client.Patch(ctx, updated, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return recorded{}, true, fmt.Errorf("updating %s: %w", what, err)
	}
	return out, true, nil
}
