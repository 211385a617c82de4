package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// ValidateRolloutRevisionPath is the path of RevisionGuard, as
// config/webhook/manifests.yaml names it.
var ValidateRolloutRevisionPath = validatePath(rgv1alpha1.GroupVersion.WithKind("RolloutRevision"))

// RevisionGuard is the validating webhook of RolloutRevision updates: only
// the guard itself may change what a record says of its revision — its
// number (revision), its owner references (taking one off, as the garbage
// collector orphans a record, excepted), and the product's labels and
// annotations (owner, hash, number, author, cause, restarts) — the API
// server keeping its data immutable (a CEL rule of the CRD).
//
// Why: the history is the memory of the policy (the highest versions a
// control plane has run) and the account of who changed what. Whoever
// may update RolloutRevisions — a namespace editor given more than reads,
// a controller's stolen token — could otherwise renumber a record so
// that undo picks it, re-parent it to another object (whose owner label
// the guard then follows), or credit it to another author. Creates are
// left alone: `clusterctl move` and a restore create their records, and
// whoever may create RolloutRevisions writes history by design
// (Restorers).
type RevisionGuard struct {
	// Self is the user name the guard writes as (SelfUser).
	Self string
}

var _ admission.Handler = RevisionGuard{}

// Handle allows a RolloutRevision update from the guard, or one that
// leaves the record's revision as it was; it refuses any other, naming
// the fields changed.
func (g RevisionGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if g.Self != "" && req.UserInfo.Username == g.Self {
		return admission.Allowed("")
	}
	var oldRev, newRev rgv1alpha1.RolloutRevision
	if err := json.Unmarshal(req.OldObject.Raw, &oldRev); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("rollout-guard could not decode the previous RolloutRevision %s/%s: %w", req.Namespace, req.Name, err))
	}
	if err := json.Unmarshal(req.Object.Raw, &newRev); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("rollout-guard could not decode RolloutRevision %s/%s: %w", req.Namespace, req.Name, err))
	}
	_, deletingForMove := newRev.Annotations[DeleteForMoveAnnotation]
	errs := RecordChanges(&oldRev, &newRev, deletingForMove)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	log.FromContext(ctx).Info("refused a change of a RolloutRevision's record by another user than the guard",
		"namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username, "fields", errs.ToAggregate().Error())
	return admission.Denied(apierrors.NewInvalid(rgv1alpha1.GroupVersion.WithKind("RolloutRevision").GroupKind(), req.Name, errs).Error())
}

// DeleteForMoveAnnotation is the annotation `clusterctl move` puts on each
// object of the source management cluster right before deleting it — with
// a JSON patch that replaces every other annotation.
const DeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// RecordChanges returns what a change of a RolloutRevision from oldRev to
// newRev does to its record: one Forbidden error per field changed among
// revision, metadata.ownerReferences and the product's labels and
// annotations. takeOff allows annotations to be taken off (never set or
// changed): what `clusterctl move` does to a record it is about to delete
// from the source cluster (DeleteForMoveAnnotation), after copying it
// whole to the target.
func RecordChanges(oldRev, newRev *rgv1alpha1.RolloutRevision, takeOff bool) field.ErrorList {
	const way = "only rollout-guard writes a RolloutRevision's record (its number, owner and stamps); create a new one to restore history, or change other labels and annotations"
	var errs field.ErrorList
	if oldRev.Revision != newRev.Revision {
		errs = append(errs, field.Forbidden(field.NewPath("revision"), fmt.Sprintf("changed from %d to %d: %s", oldRev.Revision, newRev.Revision, way)))
	}
	if !ownersTakenOffOnly(ownerRefs(oldRev), ownerRefs(newRev)) {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "ownerReferences"), way))
	}
	for _, m := range []struct {
		path     *field.Path
		old, new map[string]string
		takeOff  bool
	}{
		{field.NewPath("metadata", "labels"), oldRev.Labels, newRev.Labels, false},
		{field.NewPath("metadata", "annotations"), oldRev.Annotations, newRev.Annotations, takeOff},
	} {
		for _, k := range changedKeys(m.old, m.new) {
			if _, kept := m.new[k]; m.takeOff && !kept {
				continue
			}
			errs = append(errs, field.Forbidden(m.path.Key(k), way))
		}
	}
	return errs
}

// ownersTakenOffOnly says whether after holds only owner references before
// holds, unchanged: what Kubernetes' garbage collector does to the
// dependents of an object deleted with --cascade=orphan. Taking an owner
// off re-parents nothing (the record keeps its owner label, which only the
// guard may change) and changes no number or stamp; refusing it would hang
// the orphaning delete on its finalizer.
func ownersTakenOffOnly(before, after []metav1.OwnerReference) bool {
	for _, ref := range after {
		if !slices.ContainsFunc(before, func(b metav1.OwnerReference) bool { return reflect.DeepEqual(b, ref) }) {
			return false
		}
	}
	return true
}

// ownerRefs returns the owner references of rev, nil for none.
func ownerRefs(rev *rgv1alpha1.RolloutRevision) []metav1.OwnerReference {
	if len(rev.OwnerReferences) == 0 {
		return nil
	}
	return rev.OwnerReferences
}

// changedKeys returns the keys of the product's prefix whose values differ
// between a and b, sorted.
func changedKeys(a, b map[string]string) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !strings.HasPrefix(k, revisions.Prefix) {
			continue
		}
		av, aok := a[k]
		bv, bok := b[k]
		if aok != bok || av != bv {
			out = append(out, k)
		}
	}
	return out
}

// SelfUser returns the user name the API server knows c's requests by,
// from a SelfSubjectReview (which every authenticated user may create).
func SelfUser(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the guard is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
