package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestAnOversizedChangeCauseIsKeptCut: a 240 KB change-cause on an edit
// (what grew every replica until its memory limit) is admitted, and kept
// cut to revisions.MaxClientText bytes with a mark saying how long it was:
// on the object, in the record of the revision, and in the record the next
// edit makes of it.
func TestAnOversizedChangeCauseIsKeptCut(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	waitLiveRecorded(t, w.MD, kinds.MachineDeployment)
	cause := strings.Repeat("x", 240_000)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{revisions.AnnotationChangeCause: cause}},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"version": "v1.34.1"}}},
	})
	require.NoError(t, err)
	require.NoError(t, env.Client.Patch(ctx, w.MD, client.RawPatch(types.MergePatchType, patch)), "an edit with a 240 KB change-cause")
	got := env.Stamps(t, w.MD)
	assert.LessOrEqual(t, len(w.MD.GetAnnotations()[revisions.AnnotationChangeCause]), revisions.MaxClientText, "on the object")
	assert.True(t, strings.HasSuffix(got.ChangeCause, "… (truncated, 240000 bytes)"), "%.60q", got.ChangeCause[max(0, len(got.ChangeCause)-60):])
	require.NoError(t, edit(t, mergePatch, w.MD, "v1.34.2", mdVersion...), "the next edit records the revision with the oversized cause")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := &rgv1alpha1.RolloutRevisionList{}
		require.NoError(c, env.Client.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(w.MD.UID)}))
		found := false
		for _, cr := range list.Items {
			for k, v := range cr.Annotations {
				assert.LessOrEqual(c, len(v), 4*revisions.MaxClientText, "RolloutRevision %s annotation %s", cr.Name, k)
			}
			found = found || strings.Contains(cr.Annotations[revisions.AnnotationChangeCause], "(truncated, 240000 bytes)")
		}
		assert.True(c, found, "the revision of the oversized cause is recorded, its cause cut")
	}, 30*time.Second, 100*time.Millisecond)
}

// TestOnlyTheGuardRewritesHistory: a user who may update RolloutRevisions
// cannot renumber a record, re-parent it, move its owner label or credit
// it to another author (each refused, naming the field and the way out);
// a label of their own passes, and the guard's own writes — recording the
// next revisions, numbering them — pass as before.
func TestOnlyTheGuardRewritesHistory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	waitLiveRecorded(t, w.MD, kinds.MachineDeployment)
	require.NoError(t, edit(t, mergePatch, w.MD, "v1.34.1", mdVersion...))
	require.NoError(t, edit(t, mergePatch, w.MD, "v1.34.2", mdVersion...))

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: "history-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"rollout-guard.io"}, Resources: []string{"rolloutrevisions"}, Verbs: []string{"get", "list", "update", "patch"}}}}
	require.NoError(t, env.Client.Create(ctx, role))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: "history-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}}}))
	mallory, err := env.ClientAs("mallory")
	require.NoError(t, err)

	var first rgv1alpha1.RolloutRevision
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := &rgv1alpha1.RolloutRevisionList{}
		require.NoError(c, env.Client.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(w.MD.UID)}))
		require.NotEmpty(c, list.Items)
		first = list.Items[0]
		for _, cr := range list.Items {
			if cr.Revision < first.Revision {
				first = cr
			}
		}
	}, 30*time.Second, 100*time.Millisecond)

	for _, tc := range []struct {
		name   string
		change func(cr *rgv1alpha1.RolloutRevision)
		field  string
	}{
		{"a new number, so undo picks it", func(cr *rgv1alpha1.RolloutRevision) { cr.Revision = 99 }, "revision"},
		{"another owner", func(cr *rgv1alpha1.RolloutRevision) {
			cr.OwnerReferences[0].UID = w.KCP.UID
			cr.OwnerReferences[0].Name = w.KCP.Name
		}, "metadata.ownerReferences"},
		{"another author", func(cr *rgv1alpha1.RolloutRevision) { cr.Annotations[revisions.AnnotationChangedBy] = "system:admin" }, revisions.AnnotationChangedBy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &rgv1alpha1.RolloutRevision{}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(&first), cr))
			tc.change(cr)
			err := mallory.Update(ctx, cr)
			require.Error(t, err, "a rewrite of the record by another user than the guard")
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), "only rollout-guard writes a RolloutRevision's record")
		})
	}
	// The owner label follows the owner reference, which stays: a label
	// moved to another owner is put back (webhooks.OwnerLabeler).
	cr := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(&first), cr))
	cr.Labels[revisions.LabelOwnerUID] = string(w.KCP.UID)
	require.NoError(t, mallory.Update(ctx, cr))
	assert.Equal(t, string(w.MD.UID), cr.Labels[revisions.LabelOwnerUID], "the owner label is put back")
	assert.Equal(t, first.Revision, cr.Revision)

	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(&first), cr))
	cr.Labels["backup.example.com/keep"] = "yes"
	require.NoError(t, mallory.Update(ctx, cr), "a label of the user's own")

	// The guard's own writes pass: the next edit records and numbers.
	before := env.Stamps(t, w.MD).Revision
	require.NoError(t, edit(t, mergePatch, w.MD, "v1.34.1", mdVersion...))
	assert.Equal(t, before+1, env.Stamps(t, w.MD).Revision)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, bad, err := history.List(ctx, env.Client, w.Namespace, string(w.MD.UID))
		require.NoError(c, err)
		assert.Empty(c, bad)
		assert.Equal(c, before+1, history.Highest(revs), "%s", framework.DescribeHistory(revs))
	}, 30*time.Second, 100*time.Millisecond)
}

// TestInPlaceEditsDoNotFlushTheRollouts: with the default history limit
// (20), 29 in-place edits of a worker pool (a machine-template label each,
// one edit each) after three rollouts prune in-place revisions only: the
// rollouts an undo goes back to stay recorded.
func TestInPlaceEditsDoNotFlushTheRollouts(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, env.StopGuard())
	require.NoError(t, env.StartGuardWith(ctx, "--history-limit=20", "--prune-batch=1"))
	t.Cleanup(func() {
		require.NoError(t, env.StopGuard())
		require.NoError(t, env.StartGuard(context.Background()))
	})
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	waitLiveRecorded(t, w.MD, kinds.MachineDeployment)
	for _, v := range []string{"v1.34.1", "v1.34.0", "v1.34.2"} {
		require.NoError(t, edit(t, mergePatch, w.MD, v, mdVersion...))
	}
	rollouts := env.Stamps(t, w.MD).Revision // 1 (created) and three rollouts
	for i := range 29 {
		require.NoError(t, edit(t, mergePatch, w.MD, fmt.Sprint("v", i), "spec", "template", "metadata", "labels", "tier"))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, _, err := history.List(ctx, env.Client, w.Namespace, string(w.MD.UID))
		require.NoError(c, err)
		assert.LessOrEqual(c, len(revs), 21, "pruned back to the limit: %s", framework.DescribeHistory(revs))
		have := map[int64]bool{}
		for _, r := range revs {
			for _, n := range r.Record.History {
				have[n] = true
			}
		}
		for n := int64(1); n <= rollouts; n++ {
			assert.True(c, have[n], "rollout revision %d is still recorded: %s", n, framework.DescribeHistory(revs))
		}
	}, 60*time.Second, 200*time.Millisecond)
}
