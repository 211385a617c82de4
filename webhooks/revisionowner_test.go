package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestOwnerLabelerFollowsTheOwnerReference: a RolloutRevision whose owner
// label is not its controller owner's UID (a move rewrote the reference)
// gets the owner's UID; one that agrees, or has no controller, is left as
// it is.
func TestOwnerLabelerFollowsTheOwnerReference(t *testing.T) {
	owner := func(controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "md-0", UID: "new-uid", Controller: &controller}}
	}
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		owners  []metav1.OwnerReference
		want    string
		patched bool
	}{
		{name: "moved: the label names the old owner", labels: map[string]string{revisions.LabelOwnerUID: "old-uid", revisions.LabelHash: "abc"}, owners: owner(true), want: "new-uid", patched: true},
		{name: "no labels at all", owners: owner(true), want: "new-uid", patched: true},
		{name: "label and owner agree", labels: map[string]string{revisions.LabelOwnerUID: "new-uid"}, owners: owner(true), want: "new-uid"},
		{name: "no controller owner", labels: map[string]string{revisions.LabelOwnerUID: "old-uid"}, owners: owner(false), want: "old-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := &rgv1alpha1.RolloutRevision{
				TypeMeta:   metav1.TypeMeta{APIVersion: rgv1alpha1.GroupVersion.String(), Kind: "RolloutRevision"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0-abc", Labels: tc.labels, OwnerReferences: tc.owners},
				Data:       runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}, Revision: 1,
			}
			raw, err := json.Marshal(rr)
			require.NoError(t, err)
			resp := OwnerLabeler{}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Operation: admissionv1.Create, Namespace: "ns", Name: rr.Name, Object: runtime.RawExtension{Raw: raw},
			}})
			require.True(t, resp.Allowed, resp.Result)
			assert.Equal(t, tc.patched, len(resp.Patches) > 0)
			ops, err := json.Marshal(resp.Patches)
			require.NoError(t, err)
			patch, err := jsonpatch.DecodePatch(ops)
			require.NoError(t, err)
			out, err := patch.Apply(raw)
			require.NoError(t, err)
			got := &rgv1alpha1.RolloutRevision{}
			require.NoError(t, json.Unmarshal(out, got))
			assert.Equal(t, tc.want, got.Labels[revisions.LabelOwnerUID])
			for k, v := range tc.labels {
				if k != revisions.LabelOwnerUID {
					assert.Equal(t, v, got.Labels[k], "label %s kept", k)
				}
			}
		})
	}
}
