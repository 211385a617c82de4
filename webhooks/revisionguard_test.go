package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestOnlyTheGuardRewritesARecord: a RolloutRevision's number, owner and
// stamps change only when the guard writes them; anyone else may change
// other labels and annotations, and the guard anything.
func TestOnlyTheGuardRewritesARecord(t *testing.T) {
	const guard = "system:serviceaccount:rollout-guard-system:rollout-guard"
	base := func() *rgv1alpha1.RolloutRevision {
		return &rgv1alpha1.RolloutRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-abc",
				Labels:          map[string]string{revisions.LabelOwnerUID: "uid-1", revisions.LabelRevision: "3"},
				Annotations:     map[string]string{revisions.AnnotationChangedBy: "alice"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "KubeadmControlPlane", Name: "cp", UID: "uid-1", Controller: new(bool)}}},
			Revision: 3,
		}
	}
	for _, tc := range []struct {
		name    string
		user    string
		change  func(r *rgv1alpha1.RolloutRevision)
		allowed bool
		field   string
	}{
		{name: "a new number", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) { r.Revision = 99 }, field: "revision"},
		{name: "another owner", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) { r.OwnerReferences[0].UID = "uid-2" }, field: "metadata.ownerReferences"},
		{name: "another owner added", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) {
			r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "KubeadmControlPlane", Name: "other", UID: "uid-2"})
		}, field: "metadata.ownerReferences"},
		{name: "the owner taken off, as the garbage collector orphans a record", user: "system:serviceaccount:kube-system:generic-garbage-collector",
			change: func(r *rgv1alpha1.RolloutRevision) { r.OwnerReferences = nil }, allowed: true},
		{name: "the owner label", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) { r.Labels[revisions.LabelOwnerUID] = "uid-2" }, field: revisions.LabelOwnerUID},
		{name: "another author", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) { r.Annotations[revisions.AnnotationChangedBy] = "system:admin" }, field: revisions.AnnotationChangedBy},
		{name: "a stamp taken away", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) { delete(r.Annotations, revisions.AnnotationChangedBy) }, field: revisions.AnnotationChangedBy},
		{name: "a label of its own", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) { r.Labels["backup.example/keep"] = "yes" }, allowed: true},
		{name: "clusterctl move takes every annotation off before deleting the source's record", user: "admin", change: func(r *rgv1alpha1.RolloutRevision) {
			r.Annotations = map[string]string{DeleteForMoveAnnotation: ""}
		}, allowed: true},
		{name: "a stamp changed under the move's annotation", user: "mallory", change: func(r *rgv1alpha1.RolloutRevision) {
			r.Annotations = map[string]string{DeleteForMoveAnnotation: "", revisions.AnnotationChangedBy: "system:admin"}
		}, field: revisions.AnnotationChangedBy},
		{name: "the guard renumbers", user: guard, change: func(r *rgv1alpha1.RolloutRevision) { r.Revision = 4 }, allowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldRev, newRev := base(), base()
			tc.change(newRev)
			oldRaw, err := json.Marshal(oldRev)
			require.NoError(t, err)
			newRaw, err := json.Marshal(newRev)
			require.NoError(t, err)
			resp := RevisionGuard{Self: guard}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Namespace: "ns", Name: "cp-abc", UserInfo: authenticationv1.UserInfo{Username: tc.user},
				Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw},
			}})
			assert.Equal(t, tc.allowed, resp.Allowed, "%v", resp.Result)
			if !tc.allowed {
				assert.Contains(t, resp.Result.Message, tc.field)
				assert.Contains(t, resp.Result.Message, "only rollout-guard writes")
			}
		})
	}
}
