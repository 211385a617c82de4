package history

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// ownerUIDIndex is the name of the Index's informer index: the owner UID
// label of a ControllerRevision.
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
//
// The Index holds every revision of every object, tens of thousands in a
// large management cluster, so each is kept as an indexEntry — its labels
// and annotations as sorted pairs of shared strings — rather than as an
// ObjectMeta with two maps, which cost about three times the memory.
type Index struct {
	// entries holds the entries.
	entries entryStore
	// synced says whether the informer behind entries has been filled.
	synced func() bool
}

// entryStore is where the Index finds its entries: the informer's indexer.
type entryStore interface {
	// byOwner returns the entries labelled with ownerUID.
	byOwner(ownerUID string) ([]*indexEntry, error)
	// get returns the entry of ControllerRevision namespace/name, nil when
	// there is none.
	get(namespace, name string) (*indexEntry, error)
}

// NewIndex makes the Index and the metadata-only informer behind it, which
// mgr runs on every replica (each webhook records revisions), for the
// ControllerRevisions labelled with an owner UID — those the guard made;
// the history of DaemonSets and StatefulSets is not its business.
func NewIndex(mgr manager.Manager) (*Index, error) {
	mc, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("the metadata client of the revision index: %w", err)
	}
	informer := metadatainformer.NewFilteredMetadataInformer(mc, appsv1.SchemeGroupVersion.WithResource("controllerrevisions"), metav1.NamespaceAll, 0,
		toolscache.Indexers{ownerUIDIndex: byOwnerUID},
		func(o *metav1.ListOptions) { o.LabelSelector = revisions.LabelOwnerUID }).Informer()
	if err := informer.SetTransform(toEntry); err != nil {
		return nil, fmt.Errorf("the revision index: %w", err)
	}
	if err := mgr.Add(runInformer{informer}); err != nil {
		return nil, fmt.Errorf("watching the metadata of ControllerRevisions: %w", err)
	}
	return &Index{entries: indexerStore{informer.GetIndexer()}, synced: informer.HasSynced}, nil
}

// runInformer runs the Index's informer with the manager, on every replica.
type runInformer struct{ toolscache.SharedIndexInformer }

// Start runs the informer until ctx ends.
func (r runInformer) Start(ctx context.Context) error {
	r.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica's webhooks read the Index.
func (runInformer) NeedLeaderElection() bool { return false }

// byOwnerUID is the informer index of entries by owner UID.
func byOwnerUID(obj any) ([]string, error) {
	if e, ok := obj.(*indexEntry); ok {
		if uid := e.label(revisions.LabelOwnerUID); uid != "" {
			return []string{uid}, nil
		}
	}
	return nil, nil
}

// indexerStore is the entryStore of an informer's indexer.
type indexerStore struct{ indexer toolscache.Indexer }

func (s indexerStore) byOwner(ownerUID string) ([]*indexEntry, error) {
	objs, err := s.indexer.ByIndex(ownerUIDIndex, ownerUID)
	if err != nil {
		return nil, err
	}
	out := make([]*indexEntry, 0, len(objs))
	for _, obj := range objs {
		if e, ok := obj.(*indexEntry); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s indexerStore) get(namespace, name string) (*indexEntry, error) {
	obj, exists, err := s.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, err
	}
	e, _ := obj.(*indexEntry)
	return e, nil
}

// indexEntry is what the Index keeps of one ControllerRevision: what
// numbering, recording and pruning read — name, namespace,
// resourceVersion, labels and annotations — with the strings many
// revisions repeat (keys, namespaces, owner UIDs, kinds, numbers,
// authors, field managers, causes) shared instead of copied per revision.
// The refused break-glass attempts (a JSON list of up to
// MaxRefusedOverrides) are left out: they are read and written whole from
// the API server, and a patch from the Index never touches a key it does
// not hold. An entry never changes once made: a new version of the
// ControllerRevision is a new entry.
type indexEntry struct {
	namespace, name, resourceVersion string
	// labels and annotations are sorted by key.
	labels, annotations []pair
}

// pair is a label or an annotation.
type pair struct{ key, value string }

// GetObjectKind is part of runtime.Object, which the informer stores.
func (*indexEntry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns e itself: an entry never changes.
func (e *indexEntry) DeepCopyObject() runtime.Object { return e }

// GetObjectMeta gives the informer the entry's namespace, name and
// resourceVersion (its key, and what a watch resumes from).
func (e *indexEntry) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: e.namespace, Name: e.name, ResourceVersion: e.resourceVersion}
}

// label returns the value of label key, "" when it is not set.
func (e *indexEntry) label(key string) string {
	for _, p := range e.labels {
		if p.key == key {
			return p.value
		}
	}
	return ""
}

// metadata returns the ControllerRevision's metadata as the entry holds
// it, in maps of its own.
func (e *indexEntry) metadata() *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "ControllerRevision"}}
	out.Namespace, out.Name, out.ResourceVersion = e.namespace, e.name, e.resourceVersion
	out.Labels, out.Annotations = toMap(e.labels), toMap(e.annotations)
	return out
}

func toMap(pairs []pair) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p.key] = p.value
	}
	return out
}

// toEntry is the transform of the Index's informer: a ControllerRevision's
// metadata becomes its indexEntry (an entry stays as it is: the informer
// may transform what it already holds).
func toEntry(in any) (any, error) {
	switch obj := in.(type) {
	case *indexEntry:
		return obj, nil
	case *metav1.PartialObjectMetadata:
		return newEntry(obj), nil
	}
	return in, nil
}

// newEntry is the indexEntry of a ControllerRevision's metadata.
func newEntry(obj *metav1.PartialObjectMetadata) *indexEntry {
	// Slices of the exact length: each holds a revision's whole record.
	e := &indexEntry{namespace: shared(obj.Namespace), name: obj.Name, resourceVersion: obj.ResourceVersion,
		labels: make([]pair, 0, len(obj.Labels)), annotations: make([]pair, 0, len(obj.Annotations))}
	for k, v := range obj.Labels {
		if k != revisions.LabelHash { // one per revision: nothing to share
			v = shared(v)
		}
		e.labels = append(e.labels, pair{shared(k), v})
	}
	for k, v := range obj.Annotations {
		switch k {
		case AnnotationRefusedOverrides:
			continue
		case revisions.AnnotationChangedBy, revisions.AnnotationFieldManager, revisions.AnnotationChangeCause, revisions.AnnotationChangeType,
			revisions.AnnotationOverriddenBy, revisions.AnnotationOverrideReason, revisions.AnnotationOverrideRules,
			revisions.AnnotationRevision, revisions.AnnotationRevisionHistory:
			v = shared(v)
		}
		e.annotations = append(e.annotations, pair{shared(k), v})
	}
	byKey := func(a, b pair) int { return strings.Compare(a.key, b.key) }
	slices.SortFunc(e.labels, byKey)
	slices.SortFunc(e.annotations, byKey)
	return e
}

// shared returns the one copy of s the process keeps.
func shared(s string) string {
	return unique.Make(s).Value()
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
func (i *Index) List(_ context.Context, namespace, ownerUID string) (revs []revisions.Revision, ok bool, err error) {
	if !i.Synced() {
		return nil, false, nil
	}
	entries, err := i.entries.byOwner(ownerUID)
	if err != nil {
		return nil, false, fmt.Errorf("listing the recorded revisions of %s in %s from the revision index: %w", ownerUID, namespace, err)
	}
	revs = []revisions.Revision{} // listed, even when empty
	for _, e := range entries {
		if e.namespace != namespace {
			continue
		}
		rev, err := revisions.FromMetadata(e.metadata())
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
func (i *Index) Get(_ context.Context, namespace, name string) (_ *metav1.PartialObjectMetadata, ok bool, _ error) {
	if !i.Synced() {
		return nil, false, nil
	}
	e, err := i.entries.get(namespace, name)
	if err != nil {
		return nil, false, fmt.Errorf("reading ControllerRevision %s/%s from the revision index: %w", namespace, name, err)
	}
	if e == nil {
		return nil, true, nil
	}
	return e.metadata(), true, nil
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
