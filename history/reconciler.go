package history

import (
	"context"
	"fmt"
	"strings"

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
	if err := r.Recorder.Record(ctx, obj, r.Kind.GVK, snap, rec); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.prune(ctx, obj, snap); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
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

func (r *Reconciler) prune(ctx context.Context, obj client.Object, live revisions.Snapshot) error {
	limit := r.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	revs, _, err := List(ctx, r.APIReader, obj.GetNamespace(), string(obj.GetUID()))
	if err != nil {
		return err
	}
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
		if err := r.Client.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pruning ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		log.FromContext(ctx).V(1).Info("pruned revision", "revision", rev.Record.Revision, "controllerRevision", rev.Name)
		excess--
	}
	return nil
}
