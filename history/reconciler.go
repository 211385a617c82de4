package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// DefaultLimit is how many revisions are kept per object unless configured.
const DefaultLimit = 20

// Reconciler makes sure the live revision of every object of its Kind is
// recorded — which also covers objects that existed before the guard was
// installed, or that changed while it was down — and prunes each object's
// history beyond Limit, never removing the live revision nor the revisions
// that raised a control plane's highest Kubernetes or etcd version.
type Reconciler struct {
	// Client reads the objects (from the manager's cache).
	Client client.Client
	// APIReader lists ControllerRevisions without caching them.
	APIReader client.Reader
	// Recorder writes revisions.
	Recorder *Recorder
	// Kind is the kind reconciled.
	Kind Kind
	// Limit is the number of revisions kept per object; 0 means DefaultLimit.
	Limit int
}

// SetupWithManager registers the reconciler. It runs on the elected leader
// only, and wakes up on spec and annotation changes, not on status updates.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("history-"+strings.ToLower(r.Kind.GVK.Kind)).
		For(r.Kind.New(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the %s history reconciler: %w", r.Kind.GVK.Kind, err)
	}
	return nil
}

// Reconcile records the live revision of one object and prunes its history.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	obj := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	snap, err := r.Kind.Snapshot(obj)
	if err != nil {
		logger.Error(err, "cannot take the revision of the object; not recorded")
		return ctrl.Result{}, nil
	}
	rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
	if err != nil {
		logger.Info("ignoring malformed revision stamps", "error", err.Error())
		rec = revisions.Record{}
	}
	if rec.Revision == 0 {
		rec = Adopted(obj)
	}
	done, err := r.Recorder.record(ctx, obj, r.Kind.GVK, snap, rec)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Recording new content lists the history to number it: what it listed,
	// with the new record, is the history to check. Else the Index has it,
	// or the API server.
	revs := done.listed
	if revs == nil {
		if revs, err = r.list(ctx, obj, false); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.renumberReturned(ctx, req.NamespacedName, rec.Revision, revs); err != nil {
		return ctrl.Result{}, err
	}
	if len(revs) <= r.limit() {
		return ctrl.Result{}, nil
	}
	// Pruning keeps the revisions that raised a control plane's highest
	// versions run, which only their data tells (the Index has none).
	if withoutData(revs) {
		if revs, err = r.list(ctx, obj, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.prune(ctx, obj, snap, revs); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
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
	stamps, err := revisions.RecordFromAnnotations(live.GetAnnotations())
	if err != nil {
		stamps = revisions.Record{}
	}
	if stamps.Revision >= highest {
		return nil
	}
	snap, err := r.Kind.Snapshot(live)
	if err != nil {
		return nil // Reconcile logged it for the cached copy.
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
func (r *Reconciler) prune(ctx context.Context, obj client.Object, live revisions.Snapshot, revs []revisions.Revision) error {
	limit := r.limit()
	if len(revs) <= limit {
		return nil
	}
	keep := map[int64]bool{}
	highest := revisions.HighestOf(revs)
	keep[highest.KubernetesRevision] = true
	keep[highest.EtcdRevision] = true
	excess := len(revs) - limit
	for _, rev := range revs { // oldest first
		if excess == 0 {
			break
		}
		if rev.Snapshot.Hash == live.Hash || keep[rev.Record.Revision] {
			continue
		}
		cr := &appsv1.ControllerRevision{}
		cr.Namespace, cr.Name = obj.GetNamespace(), rev.Name
		// Only as listed: a replica's recorder may have just given this
		// content a new number (the object went back to it) after revs was
		// read; deleting it then would drop the live revision's record, or
		// make that recorder's update fail and the edit with it. A
		// conflict leaves it to the next reconcile, which lists again.
		var del []client.DeleteOption
		if rev.ResourceVersion != "" {
			del = append(del, client.Preconditions{ResourceVersion: &rev.ResourceVersion})
		}
		if err := r.Client.Delete(ctx, cr, del...); err != nil {
			if apierrors.IsConflict(err) {
				log.FromContext(ctx).V(1).Info("not pruning a revision changed since it was listed", "revision", rev.Record.Revision, "controllerRevision", rev.Name)
				continue
			}
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("pruning ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
			}
		}
		r.Recorder.recorded.forget(obj, rev.Snapshot.Hash)
		log.FromContext(ctx).V(1).Info("pruned revision", "revision", rev.Record.Revision, "controllerRevision", rev.Name)
		excess--
	}
	return nil
}
