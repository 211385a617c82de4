package history

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
		Label: labels.NewSelector().Add(*ours),
		Transform: func(in any) (any, error) {
			if obj, err := meta.Accessor(in); err == nil {
				obj.SetManagedFields(nil)
				obj.SetFinalizers(nil)
				obj.SetOwnerReferences(nil)
			}
			return in, nil
		},
	}
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
