package history

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// ownerUIDIndex is the name of the Index's informer index: the owner UID
// label of a RolloutRevision.
const ownerUIDIndex = "rollout-guard.io/owner-uid"

// Index is what the guard knows of recorded revisions without asking the
// API server: the metadata (labels and annotations, where a revision's
// record lives — not its data) of every RolloutRevision the guard made,
// kept by a metadata-only informer and indexed by owner.
//
// Why: numbering a new revision needs the object's history, and recording
// one needs to know whether its content is recorded already. Read from the
// API server, that was a GET and a List of RolloutRevisions for every
// recorded revision, and a List per object when the guard starts. From the
// Index it costs no request. The Index may lag the API server by a watch
// event — as the watch-cache List it replaces did (FromWatchCache) — so a
// create that meets a record made a moment ago fails with AlreadyExists,
// and the Recorder then reads from the API server.
//
// The Index holds every revision of every object, tens of thousands in a
// large management cluster, so each is kept as an indexEntry — the values
// of its labels and annotations, shared strings where revisions repeat
// them, beside keys that entries written alike share — rather than as an
// ObjectMeta with two maps, which cost several times the memory
// (BenchmarkIndexMemory, docs/benchmarks-history.md, Scale).
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
	// get returns the entry of RolloutRevision namespace/name, nil when
	// there is none.
	get(namespace, name string) (*indexEntry, error)
}

// NewIndex makes the Index and the metadata-only informer behind it, which
// mgr runs on every replica (each webhook records revisions), for the
// RolloutRevisions labelled with an owner UID (every one the guard makes).
func NewIndex(mgr manager.Manager) (*Index, error) {
	mc, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("the metadata client of the revision index: %w", err)
	}
	informer := metadatainformer.NewFilteredMetadataInformer(mc, rgv1alpha1.Resource, metav1.NamespaceAll, 0,
		toolscache.Indexers{ownerUIDIndex: byOwnerUID},
		func(o *metav1.ListOptions) { o.LabelSelector = revisions.LabelOwnerUID }).Informer()
	if err := informer.SetTransform(toEntry); err != nil {
		return nil, fmt.Errorf("the revision index: %w", err)
	}
	if err := mgr.Add(runInformer{informer}); err != nil {
		return nil, fmt.Errorf("watching the metadata of RolloutRevisions: %w", err)
	}
	return &Index{entries: indexerStore{informer.GetIndexer()}, synced: informer.HasSynced}, nil
}

// runInformer runs the Index's informer with the manager, on every replica.
type runInformer struct{ toolscache.SharedIndexInformer }

// Start runs the informer until ctx ends, and logs when it has filled.
func (r runInformer) Start(ctx context.Context) error {
	begin := time.Now()
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), r.HasSynced) {
			log.FromContext(ctx).WithName("revision-index").Info("revision index filled",
				"records", len(r.GetStore().ListKeys()), "took", time.Since(begin).Round(time.Millisecond).String())
		}
	}()
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

// indexEntry is what the Index keeps of one RolloutRevision: what
// numbering, recording and pruning read — name, namespace,
// resourceVersion, labels and annotations — with the strings many
// revisions repeat (keys, namespaces, owner UIDs, kinds, numbers,
// authors, field managers, causes) shared instead of copied per revision.
// The refused break-glass attempts (a JSON list of up to
// MaxRefusedOverrides) are left out: they are read and written whole from
// the API server, and a patch from the Index never touches a key it does
// not hold. An entry never changes once made: a new version of the
// RolloutRevision is a new entry.
//
// The keys are held apart from the values, in a keySet that every entry
// with the same label and annotation keys shares — nearly all of them, as
// the guard writes every record alike: an entry then costs one string
// per value instead of two, about a third of its size.
type indexEntry struct {
	namespace, name, resourceVersion string
	// keys are the entry's label and annotation keys.
	keys *keySet
	// values holds the value of each of keys.labels, then of each of
	// keys.annotations.
	values []string
}

// keySet is the sorted label keys and annotation keys of an indexEntry.
// It never changes once made.
type keySet struct{ labels, annotations []string }

// keySets holds one keySet per distinct set of keys, by keySetID: a few
// (the guard writes every record with the same keys, some with a change
// cause or an override), whatever the number of entries.
var keySets sync.Map

// maxSharedKeySets bounds keySets. Nothing removes a set from it, so
// records that each carried keys of their own (a tool labelling the
// guard's RolloutRevisions with unique keys) would grow it without
// end; past the bound, a new set of keys is held by its entry alone.
const maxSharedKeySets = 1024

// sharedKeySets counts the sets in keySets.
var sharedKeySets atomic.Int64

// keySetID names a keySet: its keys joined by a byte no label or
// annotation key may hold, the labels apart from the annotations.
func keySetID(labels, annotations []string) string {
	return strings.Join(labels, "\n") + "\n\n" + strings.Join(annotations, "\n")
}

// sharedKeySet returns the one keySet of these keys the process keeps, or
// one of the caller's own once maxSharedKeySets are kept.
func sharedKeySet(labels, annotations []string) *keySet {
	id := keySetID(labels, annotations)
	if ks, ok := keySets.Load(id); ok {
		return ks.(*keySet)
	}
	if sharedKeySets.Load() >= maxSharedKeySets {
		return &keySet{labels: labels, annotations: annotations}
	}
	ks, loaded := keySets.LoadOrStore(id, &keySet{labels: labels, annotations: annotations})
	if !loaded {
		sharedKeySets.Add(1)
	}
	return ks.(*keySet)
}

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
	if i, found := slices.BinarySearch(e.keys.labels, key); found {
		return e.values[i]
	}
	return ""
}

// metadata returns the RolloutRevision's metadata as the entry holds
// it, in maps of its own.
func (e *indexEntry) metadata() *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: rgv1alpha1.GroupVersion.String(), Kind: "RolloutRevision"}}
	out.Namespace, out.Name, out.ResourceVersion = e.namespace, e.name, e.resourceVersion
	n := len(e.keys.labels)
	out.Labels, out.Annotations = toMap(e.keys.labels, e.values[:n]), toMap(e.keys.annotations, e.values[n:])
	return out
}

// toMap is the map of keys[i] to values[i].
func toMap(keys, values []string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		out[k] = values[i]
	}
	return out
}

// toEntry is the transform of the Index's informer: a RolloutRevision's
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

// newEntry is the indexEntry of a RolloutRevision's metadata.
func newEntry(obj *metav1.PartialObjectMetadata) *indexEntry {
	labels := slices.Sorted(maps.Keys(obj.Labels))
	annotations := slices.DeleteFunc(slices.Sorted(maps.Keys(obj.Annotations)), func(k string) bool { return k == AnnotationRefusedOverrides })
	keys := sharedKeySet(labels, annotations)
	// A slice of the exact length: it holds a revision's whole record.
	values := make([]string, 0, len(labels)+len(annotations))
	for _, k := range keys.labels {
		v := obj.Labels[k]
		if k != revisions.LabelHash { // one per revision: nothing to share
			v = shared(v)
		}
		values = append(values, v)
	}
	for _, k := range keys.annotations {
		v := obj.Annotations[k]
		switch k {
		case revisions.AnnotationChangedBy, revisions.AnnotationFieldManager, revisions.AnnotationChangeCause, revisions.AnnotationChangeType,
			revisions.AnnotationOverriddenBy, revisions.AnnotationOverrideReason, revisions.AnnotationOverrideRules,
			revisions.AnnotationRevision, revisions.AnnotationRevisionHistory:
			v = shared(v)
		}
		values = append(values, v)
	}
	return &indexEntry{namespace: shared(obj.Namespace), name: obj.Name, resourceVersion: obj.ResourceVersion, keys: keys, values: values}
}

// shared returns the one copy of s the process keeps.
func shared(s string) string {
	return unique.Make(s).Value()
}

// WaitForSync waits until the Index has been filled, or ctx ends; it says
// whether the Index is filled. A nil Index is never filled.
func (i *Index) WaitForSync(ctx context.Context) bool {
	if i == nil {
		return false
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return i.Synced(), nil })
	return err == nil
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

// Get returns the metadata of the RolloutRevision name in namespace,
// nil when the Index holds none. ok is false when the Index cannot answer
// (not filled yet).
func (i *Index) Get(_ context.Context, namespace, name string) (_ *metav1.PartialObjectMetadata, ok bool, _ error) {
	if !i.Synced() {
		return nil, false, nil
	}
	e, err := i.entries.get(namespace, name)
	if err != nil {
		return nil, false, fmt.Errorf("reading RolloutRevision %s/%s from the revision index: %w", namespace, name, err)
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
	if unchanged(meta, want) {
		return out, true, nil
	}
	// The record as the Index holds it, and as it should be: the patch
	// between them (controller-runtime's merge patch, with the
	// resourceVersion read as precondition) touches only what differs,
	// never the data nor an annotation the Index does not hold.
	base := &rgv1alpha1.RolloutRevision{ObjectMeta: metav1.ObjectMeta{Namespace: meta.Namespace, Name: meta.Name,
		ResourceVersion: meta.ResourceVersion, Labels: meta.Labels, Annotations: meta.Annotations}, Revision: old.Record.Revision}
	updated := base.DeepCopy()
	updated.Labels, updated.Annotations, updated.OwnerReferences, updated.Revision = want.Labels, want.Annotations, want.OwnerReferences, want.Revision
	if err := r.Client.Patch(ctx, updated, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return recorded{}, true, fmt.Errorf("updating %s: %w", what, err)
	}
	return out, true, nil
}

// unchanged says whether the record as the Index holds it (meta) is the
// record as it should be (want): a patch between them would be empty.
func unchanged(meta *metav1.PartialObjectMetadata, want *rgv1alpha1.RolloutRevision) bool {
	return reflect.DeepEqual(meta.Annotations, want.Annotations) && reflect.DeepEqual(meta.Labels, want.Labels)
}

// holds says whether recording rec for owner's content of the given hash
// would send nothing: the Recorder has just recorded it so from owner's
// current version (its memo), or the Index holds its record with
// everything rec adds. It is false when neither can tell — the Index not
// filled, no record, a damaged one, or a number the record does not hold
// yet (numbering it reads the history) — and recording then needs the
// content itself.
//
// Why: the history reconciler of a kind the cache keeps without all of
// its revision content knows the live content by its hash only (see
// Reconciler.ObjectReader); when this holds, it need not read the whole
// object from the API server.
func (r *Recorder) holds(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, hash string, rec revisions.Record) (bool, error) {
	if _, ok := r.recorded.covered(owner, hash, rec); ok {
		return true, nil
	}
	meta, ok, err := r.Index.Get(ctx, owner.GetNamespace(), revisions.Name(owner.GetName(), hash))
	if err != nil || !ok || meta == nil {
		return false, err
	}
	old, err := revisions.FromMetadata(meta)
	if err != nil || old.Snapshot.Hash != hash {
		return false, nil
	}
	if rec.Revision != 0 && rec.Revision != old.Record.Revision && !slices.Contains(old.Record.History, rec.Revision) {
		return false, nil
	}
	_, want, err := r.merge(ctx, owner, ownerGVK, old.Snapshot, rec, old, meta.Annotations, true)
	if err != nil {
		return false, err
	}
	return unchanged(meta, want), nil
}
