package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// MutateRolloutRevisionPath is the path of OwnerLabeler, as
// config/webhook/manifests.yaml names it.
var MutateRolloutRevisionPath = mutatePath(rgv1alpha1.GroupVersion.WithKind("RolloutRevision"))

// OwnerLabeler is the mutating webhook of RolloutRevisions: it keeps the
// label revisions.LabelOwnerUID, by which the guard and the CLI find an
// object's history, equal to the UID of the revision's controller owner
// reference.
//
// Why: `clusterctl move` and a restore from its directory backup create
// every object anew in the target management cluster, under a new UID, and
// rewrite the owner references of what it owns to that UID — never the
// labels. A moved revision would keep its old owner's UID and be found by
// nobody. The webhook is registered only for revisions whose label and
// owner reference differ, which the guard never writes: it costs nothing
// outside a move.
type OwnerLabeler struct{}

var _ admission.Handler = OwnerLabeler{}

// Handle answers one admission request for a RolloutRevision with the patch
// of its owner label, or allows it unchanged.
func (OwnerLabeler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	meta := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal(req.Object.Raw, meta); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("rollout-guard could not decode RolloutRevision %s/%s: %w", req.Namespace, req.Name, err))
	}
	uid := string(revisions.OwnerUID(meta))
	if uid == "" || meta.Labels[revisions.LabelOwnerUID] == uid {
		return admission.Allowed("")
	}
	log.FromContext(ctx).Info("a RolloutRevision's owner label follows its owner reference (a move or a restore)",
		"namespace", meta.Namespace, "name", meta.Name, "from", meta.Labels[revisions.LabelOwnerUID], "to", uid, "user", req.UserInfo.Username)
	if len(meta.Labels) == 0 {
		return admission.Patched("", jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/labels", Value: map[string]string{revisions.LabelOwnerUID: uid}})
	}
	return admission.Patched("", jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/labels/" + jsonPointerEscaper.Replace(revisions.LabelOwnerUID), Value: uid})
}
