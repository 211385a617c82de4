package webhooks

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
)

// Restorers tells who may restore an object's history: create it with the
// revision stamps it carried elsewhere, which the guard then keeps as they
// are instead of stamping a new revision 1.
//
// Why this right: `clusterctl move` and a restore from its directory backup
// create every object anew in the target management cluster, stamps and
// all, and then its RolloutRevisions. Stamps on a create are a claim about
// the past, which the guard cannot check against anything the target
// stored. Whoever may create RolloutRevisions in the namespace could write
// that past anyway, so the claim gives them nothing they do not have; from
// anyone else — namespace editors, GitOps controllers applying an exported
// manifest — the stamps are replaced as on any create.
type Restorers interface {
	// MayRestore says whether user may create RolloutRevisions in
	// namespace.
	MayRestore(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error)
}

// AccessReviews is the Restorers that asks the API server, with a
// SubjectAccessReview for the request's user.
type AccessReviews struct {
	// Client creates the SubjectAccessReviews.
	Client client.Client
}

var _ Restorers = AccessReviews{}

// MayRestore asks the API server whether user may create RolloutRevisions
// in namespace.
func (a AccessReviews) MayRestore(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "create", Group: rgv1alpha1.GroupVersion.Group, Resource: rgv1alpha1.Resource.Resource,
		},
	}}
	if err := a.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether %s may create rolloutrevisions in namespace %s: %w", user.Username, namespace, err)
	}
	return review.Status.Allowed, nil
}
