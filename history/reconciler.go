package history

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// DefaultLimit is how many revisions are kept per object unless configured.
const DefaultLimit = 20

// DefaultWorkers is how many objects of one kind a Reconciler reconciles
// at once unless configured. Why more than one: at start the guard
// reconciles every object (8,000 at 2,000 clusters), and a control plane,
// read from the API server (see Reconciler.ObjectReader), waits on a GET.
const DefaultWorkers = 4

// AnnotationCachedHash is set by the guard's cache, on its own copy of an
// object it keeps without all of its revision content, to that content's
// hash, computed from the whole object as it entered the cache (see
// Reconciler.ObjectReader), as CachedHashValue writes it. It is never
// written to the API server; a value set there is replaced as the object
// enters the cache.
const AnnotationCachedHash = revisions.Prefix + "cached-content-hash"

// cachedHashMark ends every AnnotationCachedHash value this process's cache
// writes: a random word drawn at start, which no value set on a stored
// object carries. A cache transform given an object it already trimmed —
// an informer may pass what it holds through its transform again (its
// initial watch-list fills a store of its own, then the queue) — tells it
// by the mark and keeps its hash, which a hash of the trimmed copy would
// not be; given a stored object, it replaces whatever that carries.
var cachedHashMark = "@" + rand.Text()[:12]

// CachedHashValue is the AnnotationCachedHash value noting hash on a
// cached copy; hash "" notes that the whole object's revision could not be
// taken (the reconciler then reads the object).
func CachedHashValue(hash string) string { return hash + cachedHashMark }

// CachedHash returns the content hash this process's cache noted on obj
// (AnnotationCachedHash), and whether it noted one at all: false for an
// object the cache has not trimmed, or that carries a value it did not
// write.
func CachedHash(obj metav1.Object) (hash string, noted bool) {
	hash, noted = strings.CutSuffix(obj.GetAnnotations()[AnnotationCachedHash], cachedHashMark)
	if !noted {
		return "", false
	}
	return hash, true
}

// DefaultPruneBatch is how many revisions beyond the limit an object's
// history gathers before they are pruned, unless configured.
const DefaultPruneBatch = 10

// Reconciler makes sure the live revision of every object of its Kind is
// recorded — which also covers objects that existed before the guard was
// installed, or that changed while it was down — and prunes each object's
// history back to Limit once it holds PruneBatch revisions more, never
// removing the live revision nor the revisions that raised a control
// plane's highest Kubernetes or etcd version.
//
// Why in batches: pruning one revision per new one costs a DELETE for
// every recorded revision (and, for a control plane, a List of its whole
// history); a batch is one DeleteCollection request selecting the pruned
// revisions by owner and number (revisions.LabelRevision).
type Reconciler struct {
	// Client reads the objects (from the manager's cache).
	Client client.Client
	// ObjectReader, when set, reads the object whose live revision is
	// recorded instead of Client: the API server, for a kind the cache
	// keeps without some of what its revision is made of (a
	// KubeadmControlPlane without its kubeadmConfigSpec, a
	// MachineDeployment without most of its template). The cached copy
	// then carries the hash of its whole content (AnnotationCachedHash):
	// when the content's record already holds the object's stamps, the
	// reconcile reads nothing more; else it records the content Pending
	// kept of that copy, and only when that is gone costs a GET of the
	// object, served from the API server's watch cache (as fresh as the
	// guard's own cache would be, without a read of etcd).
	ObjectReader client.Reader
	// Pending, when set with an ObjectReader, holds the whole content the
	// cache saw last of the objects it changed: the reconciler records
	// that instead of reading the object, when the cached copy notes the
	// same hash.
	Pending *Pending
	// APIReader lists RolloutRevisions without caching them.
	APIReader client.Reader
	// Recorder writes revisions.
	Recorder *Recorder
	// Kind is the kind reconciled.
	Kind kinds.Kind
	// Limit is the number of revisions kept per object; 0 means DefaultLimit.
	Limit int
	// PruneBatch is how many revisions beyond Limit an object gathers
	// before its history is pruned back to Limit; 0 means
	// DefaultPruneBatch, 1 prunes at every revision beyond Limit.
	PruneBatch int
	// Workers is how many objects are reconciled at once (never the same
	// object twice at once); 0 means DefaultWorkers.
	Workers int
	// Stamps, when set, tells the stamps the guard wrote from those it
	// did not: only the former are recorded as they say; nil records
	// every stamp as written.
	Stamps *Stamps
	// Migrated, when set, says whether the history Migration has
	// finished; until it has, an object whose stamps are not signed waits
	// (a record it brings may confirm them).
	Migrated *MigrationDone
}

// SetupWithManager registers the reconciler. It runs on the elected leader
// only, and wakes up on changes of the revision content and of the
// project's annotations (wakesOn), not on status, label or replicas updates.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("history-"+strings.ToLower(r.Kind.GVK.Kind)).
		For(r.Kind.New(), builder.WithPredicates(wakesOn())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers()}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the %s history reconciler: %w", r.Kind.GVK.Kind, err)
	}
	return nil
}

// Reconcile records the live revision of one object and prunes its history.
// An object whose namespace is being deleted is left alone: the API server
// refuses new history there, and the namespace's deletion takes the object
// and its history away, so retrying would only fail again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcile(ctx, req)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		log.FromContext(ctx).V(1).Info("not recording: the namespace is being deleted, with the object and its history")
		return ctrl.Result{}, nil
	}
	return result, err
}

// reconcile is Reconcile, its errors returned as they come.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// A guard that keeps a revision Index starts reconciling every object
	// before the Index has filled (it fills after the caches); until it
	// has, each reconcile would read the object's history from the API
	// server — data included — and the Index makes that read needless.
	if index := r.Recorder.Index; index != nil && !index.Synced() && !index.WaitForSync(ctx) {
		return ctrl.Result{}, fmt.Errorf("waiting for the revision index to fill: %w", ctx.Err())
	}
	obj := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() || !r.Kind.Tracked(obj) {
		// Being deleted, or without revisions (a Cluster without a
		// topology).
		return ctrl.Result{}, nil
	}
	if paused, err := r.clusterPaused(ctx, obj); err != nil || paused {
		if paused {
			log.FromContext(ctx).V(1).Info("not recording while the object's Cluster is paused; looking again later", "after", PausedRecheck.String())
			err = r.pruneWhilePaused(ctx, req.NamespacedName, obj)
		}
		return ctrl.Result{RequeueAfter: PausedRecheck}, err
	}
	live, err := r.recordLive(ctx, req.NamespacedName, obj)
	if live.wait {
		log.FromContext(ctx).V(1).Info("not recording unsigned stamps before the earlier history is migrated; looking again later", "after", migrationRecheck.String())
		return ctrl.Result{RequeueAfter: migrationRecheck}, nil
	}
	if err != nil || live.obj == nil {
		return ctrl.Result{}, err
	}
	obj = live.obj
	// Recording new content lists the history to number it: what it listed,
	// with the new record, is the history to check. Else the Index has it,
	// or the API server.
	revs := live.listed
	if revs == nil {
		if revs, err = r.list(ctx, obj, false); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.renumberReturned(ctx, req.NamespacedName, live.stamped, revs); err != nil {
		return ctrl.Result{}, err
	}
	if len(revs) < r.limit()+r.batch() {
		return ctrl.Result{}, nil
	}
	// Pruning keeps the revisions that raised a control plane's highest
	// versions run, which only their data tells (the Index has none).
	if withoutData(revs) {
		if revs, err = r.list(ctx, obj, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.prune(ctx, obj, live.hash, revs); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// migrationRecheck is how long the reconciler waits before it looks again
// at an object whose unsigned stamps wait for the history Migration.
const migrationRecheck = 2 * time.Second

// PausedRecheck is how long the reconciler waits before it looks again at
// an object whose Cluster is paused.
const PausedRecheck = 30 * time.Second

// clusterPaused says whether the Cluster of obj is paused (spec.paused),
// false when obj names none or it does not exist.
//
// Why the reconciler waits while it is: `clusterctl move` and a restore
// from its directory backup keep the Cluster paused while they create its
// objects, stamps and all, and then their RolloutRevisions — and a
// restore skips a revision that already exists. Recording the live
// revision of such an object from its stamps, before its own record
// arrives, would put a record without its earlier numbers and restarts
// in that record's place. While a Cluster is paused no controller rolls
// anything out, and the webhooks still record every revision an edit
// replaces.
func (r *Reconciler) clusterPaused(ctx context.Context, obj client.Object) (bool, error) {
	name := r.Kind.ClusterName(obj)
	if name == "" {
		return false, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the Cluster %s/%s of %s %s: %w", obj.GetNamespace(), name, r.Kind.GVK.Kind, obj.GetName(), err)
	}
	return ptr.Deref(cluster.Spec.Paused, false), nil
}

// pruneWhilePaused prunes the history of obj, whose Cluster is paused,
// as Reconcile prunes any other: recording waits while the Cluster is
// paused, pruning does not.
//
// Why: every edit of a paused Cluster's pool still records the revision it
// replaces (at admission); were pruning to wait as well, its history — in
// the API server and in the revision index of every replica — would grow
// with each edit for as long as the Cluster stays paused.
func (r *Reconciler) pruneWhilePaused(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	revs, err := r.list(ctx, obj, false)
	if err != nil || len(revs) < r.limit()+r.batch() {
		return err
	}
	hash, noted := CachedHash(obj)
	if !noted || hash == "" {
		whole, err := r.whole(ctx, key, obj)
		if err != nil || whole == nil {
			return err
		}
		snap, err := r.Kind.Snapshot(whole)
		if err != nil {
			return nil // nothing to tell the live revision by: wait
		}
		hash = snap.Hash
	}
	if withoutData(revs) {
		if revs, err = r.list(ctx, obj, true); err != nil {
			return err
		}
	}
	return r.prune(ctx, obj, hash, revs)
}

// workers is Workers, or DefaultWorkers.
func (r *Reconciler) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return DefaultWorkers
}

// liveRevision is what recordLive learnt of an object's live revision.
type liveRevision struct {
	// obj is the object it read last: the cached copy, or the whole
	// object read from ObjectReader. nil when there is nothing to record
	// (the object is gone or being deleted, or its revision cannot be
	// taken).
	obj client.Object
	// hash is the live content's hash.
	hash string
	// stamped is the revision number obj's stamps give the content.
	stamped int64
	// listed is obj's history when recording listed it, the content's own
	// record as stored included; nil when it did not.
	listed []revisions.Revision
	// wait is true when nothing was recorded because obj's stamps are not
	// signed and the history Migration has not finished.
	wait bool
}

// recordLive makes sure the live revision of cached, the object as the
// manager's cache holds it, is recorded as its stamps say. For a kind the
// cache keeps whole that is cached's content; otherwise the record of the
// content hash the cache noted is enough when it already holds the stamps
// (heldFromCache); when it does not, the content is the one the cache saw
// of this copy if Pending still holds it (kept), else the whole object is
// read from ObjectReader.
func (r *Reconciler) recordLive(ctx context.Context, key client.ObjectKey, cached client.Object) (liveRevision, error) {
	kept, haveKept := r.kept(cached)
	if hash, _ := CachedHash(cached); r.ObjectReader != nil && hash != "" {
		rec, written, err := r.stampsOf(ctx, cached, hash)
		if err != nil {
			return liveRevision{}, err
		}
		if !written && !r.Migrated.Done() {
			return liveRevision{wait: true}, nil
		}
		if hash, ok, err := r.heldFromCache(ctx, cached, rec); err != nil || ok {
			return liveRevision{obj: cached, hash: hash, stamped: rec.Revision}, err
		}
	}
	obj, snap := cached, kept
	if !haveKept {
		var err error
		if obj, err = r.whole(ctx, key, cached); err != nil || obj == nil {
			return liveRevision{}, err
		}
		if snap, err = r.Kind.Snapshot(obj); err != nil {
			log.FromContext(ctx).Error(err, "cannot take the revision of the object; not recorded")
			return liveRevision{}, nil
		}
	}
	rec, written, err := r.stampsOf(ctx, obj, snap.Hash)
	if err != nil {
		return liveRevision{}, err
	}
	if !written {
		if !r.Migrated.Done() {
			return liveRevision{wait: true}, nil
		}
		log.FromContext(ctx).Info("the object's revision stamps were not written by rollout-guard (created while it was not admitting changes?); recording its content as of unknown author and number",
			"claimedRevision", obj.GetAnnotations()[revisions.AnnotationRevision], "claimedBy", obj.GetAnnotations()[revisions.AnnotationChangedBy], "revision", rec.Revision)
	}
	done, err := r.Recorder.record(ctx, obj, r.Kind.GVK, snap, rec)
	if err != nil {
		return liveRevision{}, err
	}
	return liveRevision{obj: obj, hash: snap.Hash, stamped: rec.Revision, listed: done.listed}, nil
}

// stampsOf returns the record obj's stamps make for its content hash, and
// whether the guard wrote them (Stamps.Of); every stamp is written when
// the Reconciler has no Stamps.
func (r *Reconciler) stampsOf(ctx context.Context, obj client.Object, hash string) (revisions.Record, bool, error) {
	if r.Stamps == nil {
		return stampsOf(ctx, obj), true, nil
	}
	return r.Stamps.Of(ctx, obj, r.Kind.GVK.Kind, hash)
}

// whole returns the object whole: cached itself for a kind the cache keeps
// whole, else read from ObjectReader (nil when it is gone or being
// deleted).
func (r *Reconciler) whole(ctx context.Context, key client.ObjectKey, cached client.Object) (client.Object, error) {
	if r.ObjectReader == nil {
		return cached, nil
	}
	obj := r.Kind.New()
	if err := r.ObjectReader.Get(ctx, key, obj, getFromWatchCache()); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil, nil
	}
	return obj, nil
}

// kept returns the whole content the cache saw of cached, the object as
// the manager's cache holds it, when Pending holds it under the hash the
// cached copy notes (see Pending): the content of this very copy, whose
// stamps it carries. Pending then forgets it.
func (r *Reconciler) kept(cached client.Object) (revisions.Snapshot, bool) {
	if r.ObjectReader == nil || r.Pending == nil {
		return revisions.Snapshot{}, false
	}
	hash, _ := CachedHash(cached)
	return r.Pending.Take(cached.GetUID(), hash)
}

// stampsOf returns the record obj's stamps make, Adopted when it has none.
func stampsOf(ctx context.Context, obj client.Object) revisions.Record {
	rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
	if err != nil {
		log.FromContext(ctx).Info("ignoring malformed revision stamps", "error", err.Error())
		rec = revisions.Record{}
	}
	if rec.Revision == 0 {
		rec = Adopted(obj)
	}
	return rec
}

// heldFromCache returns the content hash of cached, the object as the
// manager's cache holds it, when the reconciler reads whole objects from
// ObjectReader, the cached copy carries that hash (AnnotationCachedHash)
// and its record already holds rec (Recorder.holds): the live revision is
// then recorded as it should be, and reading the whole object would only
// prove it. ok is false otherwise.
//
// Why: at start the reconciler goes through every object, almost all of
// them recorded before the guard restarted; a read of each from the API
// server was most of the start's time (2,000 control planes).
func (r *Reconciler) heldFromCache(ctx context.Context, cached client.Object, rec revisions.Record) (hash string, ok bool, _ error) {
	if r.ObjectReader == nil {
		return "", false, nil
	}
	hash, _ = CachedHash(cached)
	if hash == "" {
		return "", false, nil
	}
	held, err := r.Recorder.holds(ctx, cached, r.Kind.GVK, hash, rec)
	if err != nil || !held {
		return "", false, err
	}
	return hash, true, nil
}

// getFromWatchCache makes a GET an answer of the API server's watch cache
// (resourceVersion 0) rather than a read of etcd. A new option each call:
// the client may write into it.
func getFromWatchCache() client.GetOption {
	return &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}}
}

// list returns obj's recorded history: from the Index when the Recorder
// has one that can answer and whole is false (records without data), else
// from the API server's watch cache.
func (r *Reconciler) list(ctx context.Context, obj client.Object, whole bool) ([]revisions.Revision, error) {
	if !whole {
		revs, ok, err := r.Recorder.Index.List(ctx, obj.GetNamespace(), string(obj.GetUID()))
		if err != nil || ok {
			return revs, err
		}
	}
	revs, _, err := List(ctx, r.APIReader, obj.GetNamespace(), string(obj.GetUID()), FromWatchCache())
	return revs, err
}

// withoutData says whether revs holds a control-plane revision read
// without its data: what it ran is then unknown.
func withoutData(revs []revisions.Revision) bool {
	for _, rev := range revs {
		if len(rev.Snapshot.Data) == 0 && (rev.Snapshot.Kind == revisions.KindKubeadmControlPlane || rev.Snapshot.Kind == revisions.KindContractControlPlane) {
			return true
		}
	}
	return false
}

// limit is the number of revisions kept per object.
func (r *Reconciler) limit() int {
	if r.Limit <= 0 {
		return DefaultLimit
	}
	return r.Limit
}

// batch is how many revisions beyond the limit start a prune.
func (r *Reconciler) batch() int {
	if r.PruneBatch <= 0 {
		return DefaultPruneBatch
	}
	return r.PruneBatch
}

// renumberReturned gives the live content a number above every recorded
// one when the history holds a higher number for other content. That
// happens when changes slipped past the guard and came back to content
// recorded earlier: A stamped 3; B, not admitted, recorded as 4; A again,
// still stamped 3, its record holding 3. The stamper numbers the next
// change from the replaced content's record (Recorder.RecordReplaced) and
// would give it 4 again; after this, A's record holds 5 and the next
// change is 6.
//
// revs must be listed before the live object is read: every number the
// guard stamped that appears in revs was then on the object at some point
// before, and stamps only grow, so a number in revs above the live stamps
// can only be one the guard did not admit. The live object is read from
// the API server, not the cache, which may be behind revs — unless the
// cached stamps (cached, never ahead of the live ones) are already at the
// highest number, the usual case, which costs no read.
func (r *Reconciler) renumberReturned(ctx context.Context, key client.ObjectKey, cached int64, revs []revisions.Revision) error {
	highest := Highest(revs)
	if highest == 0 || cached >= highest {
		return nil
	}
	live := r.Kind.New()
	if err := r.APIReader.Get(ctx, key, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !live.GetDeletionTimestamp().IsZero() {
		return nil
	}
	snap, err := r.Kind.Snapshot(live)
	if err != nil {
		return nil // Reconcile logged it for the cached copy.
	}
	stamps, written, err := r.stampsOf(ctx, live, snap.Hash)
	if err != nil {
		return err
	}
	if !written || stamps.Revision >= highest {
		return nil // stamps the guard did not write were numbered by it
	}
	for _, rev := range revs {
		if rev.Snapshot.Hash == snap.Hash && rev.Record.Revision >= highest {
			return nil // the live content is the one numbered highest
		}
	}
	log.FromContext(ctx).Info("live content came back after a change the guard did not admit; numbering it above the history", "stamped", stamps.Revision, "highest", highest, "revision", highest+1)
	return r.Recorder.Record(ctx, live, r.Kind.GVK, snap, Unadmitted(highest+1, time.Now()))
}

// Adopted is the record of a revision that was live before the guard saw
// any change of the object: revision 1, author unknown.
func Adopted(obj client.Object) revisions.Record {
	return revisions.Record{
		Revision:    1,
		History:     []int64{1},
		ChangedAt:   obj.GetCreationTimestamp().Time,
		ChangeCause: "recorded by rollout-guard (made before it was installed)",
		ChangeType:  revisions.ChangeAdopted,
	}
}

// prune removes the oldest revisions of revs (obj's history, oldest
// first) beyond the limit, never the live one nor those that raised the
// highest versions.
//
// Only as listed: a replica's recorder may have just given one of them a
// new number (the object went back to its content) after revs was read;
// deleting it then would drop the live revision's record, or make that
// recorder's update fail and the edit with it. So revisions labelled with
// their number are removed in one request that selects them by owner and
// number — a renumbered revision carries its new number and is not
// selected — and the others (recorded before the label existed) one by
// one, each with the resourceVersion it was listed at as precondition. A
// revision left out is pruned by a later reconcile, which lists again.
func (r *Reconciler) prune(ctx context.Context, obj client.Object, liveHash string, revs []revisions.Revision) error {
	victims := pruned(revs, liveHash, r.limit())
	if len(victims) == 0 {
		return nil
	}
	var numbers []string // of the labelled victims
	var all []int64
	for _, rev := range victims {
		all = append(all, rev.Record.Revision)
		if rev.Labelled {
			numbers = append(numbers, strconv.FormatInt(rev.Record.Revision, 10))
		}
	}
	batched := len(numbers) > 0
	if batched {
		err := r.deleteNumbered(ctx, obj, numbers)
		if apierrors.IsForbidden(err) {
			// An install whose role lacks deletecollection (an older
			// manifest): prune one by one, as before.
			log.FromContext(ctx).Info("cannot prune revisions in one request; pruning them one by one (grant deletecollection on rolloutrevisions)", "error", err.Error())
			batched = false
		} else if err != nil {
			return err
		}
	}
	for _, rev := range victims {
		if !rev.Labelled || !batched {
			if err := r.deleteAsListed(ctx, obj, rev); err != nil {
				return err
			}
		}
		r.Recorder.recorded.forget(obj, rev.Snapshot.Hash)
	}
	log.FromContext(ctx).V(1).Info("pruned revisions", "revisions", all, "inOneRequest", batched, "kept", r.limit())
	return nil
}

// pruned returns the revisions of revs (oldest first) that pruning back
// to limit removes: the oldest ones, in-place revisions first, but never
// the live content, the revisions that raised the highest Kubernetes and
// etcd versions, nor the newest limit revisions that rolled machines out
// (every change type but revisions.ChangeInPlace).
//
// Why in-place revisions go first and never flush the rollouts: an
// in-place change (a label, an annotation of the machine template) costs
// a namespace editor one edit each, and the machines are what they were;
// were every revision alike, 29 label edits would prune every earlier
// rollout, and with them the revisions an undo goes back to.
func pruned(revs []revisions.Revision, liveHash string, limit int) []revisions.Revision {
	excess := len(revs) - limit
	if excess <= 0 {
		return nil
	}
	highest := revisions.HighestOf(revs)
	keep := map[int64]bool{highest.KubernetesRevision: true, highest.EtcdRevision: true}
	kept := 0
	for _, rev := range revs {
		if rev.Snapshot.Hash == liveHash || keep[rev.Record.Revision] {
			kept++
		}
	}
	// The newest rollouts, up to limit revisions kept in all.
	for i := len(revs) - 1; i >= 0 && kept < limit; i-- {
		rev := revs[i]
		if rev.Record.ChangeType != revisions.ChangeInPlace && rev.Snapshot.Hash != liveHash && !keep[rev.Record.Revision] {
			keep[rev.Record.Revision] = true
			kept++
		}
	}
	removable := func(rev revisions.Revision) bool {
		return rev.Snapshot.Hash != liveHash && !keep[rev.Record.Revision]
	}
	var out []revisions.Revision
	taken := map[string]bool{}
	for _, inPlaceOnly := range []bool{true, false} {
		for _, rev := range revs {
			if len(out) == excess {
				return out
			}
			if taken[rev.Name+"/"+rev.Snapshot.Hash] || !removable(rev) || (inPlaceOnly && rev.Record.ChangeType != revisions.ChangeInPlace) {
				continue
			}
			taken[rev.Name+"/"+rev.Snapshot.Hash] = true
			out = append(out, rev)
		}
	}
	return out
}

// deleteNumbered removes obj's revisions whose LabelRevision is one of
// numbers, in one DeleteCollection request.
func (r *Reconciler) deleteNumbered(ctx context.Context, obj client.Object, numbers []string) error {
	owner, err := labels.NewRequirement(revisions.LabelOwnerUID, selection.Equals, []string{string(obj.GetUID())})
	if err != nil {
		return fmt.Errorf("selecting the revisions of %s/%s to prune: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	numbered, err := labels.NewRequirement(revisions.LabelRevision, selection.In, numbers)
	if err != nil {
		return fmt.Errorf("selecting the revisions of %s/%s to prune: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	selector := labels.NewSelector().Add(*owner, *numbered)
	if err := r.Client.DeleteAllOf(ctx, &rgv1alpha1.RolloutRevision{}, client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return fmt.Errorf("pruning the RolloutRevisions %s in %s: %w", selector, obj.GetNamespace(), err)
	}
	return nil
}

// deleteAsListed removes one revision of obj if it is still as listed (its
// resourceVersion as precondition); changed since, it stays.
func (r *Reconciler) deleteAsListed(ctx context.Context, obj client.Object, rev revisions.Revision) error {
	cr := &rgv1alpha1.RolloutRevision{}
	cr.Namespace, cr.Name = obj.GetNamespace(), rev.Name
	var del []client.DeleteOption
	if rev.ResourceVersion != "" {
		del = append(del, client.Preconditions{ResourceVersion: &rev.ResourceVersion})
	}
	err := r.Client.Delete(ctx, cr, del...)
	switch {
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("not pruning a revision changed since it was listed", "revision", rev.Record.Revision, "rolloutRevision", rev.Name)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("pruning RolloutRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	return nil
}
