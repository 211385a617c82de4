package history

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Index is what the guard knows of recorded revisions without asking the
// API server: the metadata (labels and annotations, where a revision's
// record lives — not its data) of every RolloutRevision the guard made,
// kept by a metadata-only reflector and found by owner or by name.
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
// large management cluster, so it keeps them in a store of its own
// (recordStore), grouped by owner, each a few numbers and a shared
// encoding of what revisions repeat, rather than in an informer's indexer
// of metadata objects, which cost several times the memory
// (BenchmarkIndexMemory, docs/benchmarks.md).
type Index struct {
	// entries holds the records.
	entries entryStore
	// synced says whether entries has been filled.
	synced func() bool
}

// entryStore is where the Index finds its records: the recordStore.
type entryStore interface {
	// byOwner returns the metadata of the records of the owner with UID
	// ownerUID in namespace.
	byOwner(namespace, ownerUID string) ([]*metav1.PartialObjectMetadata, error)
	// get returns the metadata of RolloutRevision namespace/name, nil
	// when there is none.
	get(namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// NewIndex makes the Index and the metadata-only reflector that fills it,
// which mgr runs on every replica (each webhook records revisions), for
// the RolloutRevisions labelled with an owner UID (every one the guard
// makes).
func NewIndex(mgr manager.Manager) (*Index, error) {
	mc, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("the metadata client of the revision index: %w", err)
	}
	store := &recordStore{}
	reflector := newReflector(mc, store)
	if err := mgr.Add(runReflector{reflector: reflector, store: store}); err != nil {
		return nil, fmt.Errorf("watching the metadata of RolloutRevisions: %w", err)
	}
	return &Index{entries: storeEntries{store}, synced: store.synced.Load}, nil
}

// newReflector is the reflector that fills store with the metadata of the
// RolloutRevisions labelled with an owner UID, read through mc.
func newReflector(mc metadata.Interface, store *recordStore) *toolscache.Reflector {
	revs := mc.Resource(rgv1alpha1.Resource).Namespace(metav1.NamespaceAll)
	selected := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = revisions.LabelOwnerUID
		return o
	}
	lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return revs.List(ctx, selected(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return revs.Watch(ctx, selected(o))
		},
	}, mc)
	return toolscache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, store, toolscache.ReflectorOptions{Name: "revision-index"})
}

// runReflector runs the Index's reflector with the manager, on every
// replica.
type runReflector struct {
	reflector *toolscache.Reflector
	store     *recordStore
}

// Start runs the reflector until ctx ends, and logs when it has filled
// the Index.
func (r runReflector) Start(ctx context.Context) error {
	begin := time.Now()
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), r.store.synced.Load) {
			log.FromContext(ctx).WithName("revision-index").Info("revision index filled",
				"records", r.store.len(), "took", time.Since(begin).Round(time.Millisecond).String())
		}
	}()
	r.reflector.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica's webhooks read the Index.
func (runReflector) NeedLeaderElection() bool { return false }

// storeEntries is the entryStore of a recordStore.
type storeEntries struct{ store *recordStore }

func (s storeEntries) byOwner(namespace, ownerUID string) ([]*metav1.PartialObjectMetadata, error) {
	return s.store.byOwnerUID(namespace, ownerUID)
}

func (s storeEntries) get(namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return s.store.get(namespace, name)
}

// clusterEntries is an entryStore that also finds records by the Cluster
// they name.
type clusterEntries interface {
	// byCluster returns the metadata of the records in namespace whose
	// revisions.LabelCluster is cluster.
	byCluster(namespace, cluster string) []*metav1.PartialObjectMetadata
}

func (s storeEntries) byCluster(namespace, cluster string) []*metav1.PartialObjectMetadata {
	return s.store.byCluster(namespace, cluster)
}

// ClusterRuns returns what the recorded revisions of the control planes of
// Cluster cluster in namespace ran (revisions.ClusterRunOf), whatever
// their owners — alive, or deleted and their records orphaned. ok is false
// when the Index cannot answer (not filled yet); the caller then lists
// the records from the API server (ListClusterRuns).
func (i *Index) ClusterRuns(_ context.Context, namespace, cluster string) (runs []revisions.ClusterRun, ok bool) {
	if !i.Synced() {
		return nil, false
	}
	entries, found := i.entries.(clusterEntries)
	if !found {
		return nil, false
	}
	runs = []revisions.ClusterRun{}
	if cluster == "" {
		return runs, true
	}
	for _, m := range entries.byCluster(namespace, cluster) {
		if run, ok := revisions.ClusterRunOf(m); ok {
			runs = append(runs, run)
		}
	}
	return runs, true
}

// ListClusterRuns is Index.ClusterRuns read from the API server: one List
// of the metadata of the RolloutRevisions labelled with cluster.
func ListClusterRuns(ctx context.Context, reader client.Reader, namespace, cluster string) ([]revisions.ClusterRun, error) {
	runs := []revisions.ClusterRun{}
	if cluster == "" {
		return runs, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(rgv1alpha1.GroupVersion.WithKind("RolloutRevisionList"))
	if err := reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{revisions.LabelCluster: cluster}); err != nil {
		return nil, fmt.Errorf("listing the RolloutRevisions of Cluster %s/%s: %w", namespace, cluster, err)
	}
	for i := range list.Items {
		if run, ok := revisions.ClusterRunOf(&list.Items[i]); ok {
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// ClusterHistory finds what the control planes of a Cluster ran, from
// their recorded revisions: from Index when it can answer, else from
// Reader (policy.RecordedRuns).
type ClusterHistory struct {
	// Index is the guard's revision Index; nil in the CLI.
	Index *Index
	// Reader lists RolloutRevisions' metadata from the API server.
	Reader client.Reader
}

// ClusterRuns returns what the recorded revisions of the control planes
// of Cluster cluster in namespace ran.
func (h ClusterHistory) ClusterRuns(ctx context.Context, namespace, cluster string) ([]revisions.ClusterRun, error) {
	if runs, ok := h.Index.ClusterRuns(ctx, namespace, cluster); ok {
		return runs, nil
	}
	if h.Reader == nil {
		return nil, fmt.Errorf("no reader of the RolloutRevisions of Cluster %s/%s", namespace, cluster)
	}
	return ListClusterRuns(ctx, h.Reader, namespace, cluster)
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
	revs = []revisions.Revision{} // listed, even when empty
	if ownerUID == "" {
		return revs, true, nil // no record is labelled with no owner
	}
	entries, err := i.entries.byOwner(namespace, ownerUID)
	if err != nil {
		return nil, false, fmt.Errorf("listing the recorded revisions of %s in %s from the revision index: %w", ownerUID, namespace, err)
	}
	for _, e := range entries {
		rev, err := revisions.FromMetadata(e)
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
	return e, true, nil
}

// recordFromIndex is one attempt of record that reads what is recorded from
// the Index instead of the API server: no request when the content is
// recorded as rec would have it, one create when it is not recorded, one
// patch of the record (with the resourceVersion the Index holds as
// precondition) otherwise. ok is false when the Index cannot answer; the
// attempt then reads from the API server. A conflict or AlreadyExists
// (the Index was behind) makes record try again, from the API server.
//
// The data of a recorded revision is not in the Index: the content's
// record is the one, among the names it may have (revisions.Names), whose
// digest (revisions.AnnotationDigest) is the content's — a record of other
// content under the same short hash is another revision — and its data is
// the content. A record without a digest (an earlier release's) or a
// damaged one makes the attempt read from the API server, which tells
// their content from their data.
func (r *Recorder) recordFromIndex(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, what string) (out recorded, ok bool, _ error) {
	free := ""
	var meta *metav1.PartialObjectMetadata
	var old revisions.Revision
	for _, name := range revisions.Names(owner.GetName(), snap.Hash) {
		m, ok, err := r.Index.Get(ctx, owner.GetNamespace(), name)
		if err != nil || !ok {
			return recorded{}, false, err
		}
		if m == nil {
			if free == "" {
				free = name
			}
			continue
		}
		rev, err := revisions.FromMetadata(m)
		if err != nil {
			return recorded{}, false, nil // no digest, or damaged: read from the API server
		}
		if rev.Snapshot.Same(snap) {
			meta, old = m, rev
			break
		}
	}
	if meta == nil {
		if free == "" {
			return recorded{}, false, nil // every name taken: the API server's copies decide
		}
		out, err := r.create(ctx, owner, ownerGVK, snap, rec, free, true, what)
		return out, true, err
	}
	out, want, err := r.merge(ctx, owner, ownerGVK, snap, rec, old, meta.Annotations, meta.Labels, true)
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

// holds says whether recording rec for owner's content of the given digest
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
	var meta *metav1.PartialObjectMetadata
	var old revisions.Revision
	for _, name := range revisions.Names(owner.GetName(), hash) {
		m, ok, err := r.Index.Get(ctx, owner.GetNamespace(), name)
		if err != nil || !ok {
			return false, err
		}
		if m == nil {
			continue
		}
		rev, err := revisions.FromMetadata(m)
		if err != nil {
			return false, nil // no digest, or damaged: the content decides
		}
		if rev.Snapshot.Hash == hash {
			meta, old = m, rev
			break
		}
	}
	if meta == nil {
		return false, nil
	}
	if rec.Revision != 0 && rec.Revision != old.Record.Revision && !slices.Contains(old.Record.History, rec.Revision) {
		return false, nil
	}
	_, want, err := r.merge(ctx, owner, ownerGVK, old.Snapshot, rec, old, meta.Annotations, meta.Labels, true)
	if err != nil {
		return false, err
	}
	return unchanged(meta, want), nil
}
