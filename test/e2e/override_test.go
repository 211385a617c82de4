package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestHistoryAwareRulesAndOverride walks a control plane through a revert
// that only a break-glass override lets through, then checks that history
// remembers what the control plane ran: a later edit that is not a downgrade
// of the current object is still refused, naming the revision that raised
// the bar.
func TestHistoryAwareRulesAndOverride(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.33.5", WorkerVersion: "v1.33.5"})

	// Revision 2: v1.34.2, which runs etcd 3.6.
	require.NoError(t, edit(t, mergePatch, w.KCP, "v1.34.2", kcpVersion...))

	revert := func(c client.Client, reason string) error {
		patch := map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{revisions.AnnotationOverride: reason}},
			"spec":     map[string]any{"version": "v1.33.5"},
		}
		data, err := json.Marshal(patch)
		require.NoError(t, err)
		return c.Patch(ctx, w.KCP.DeepCopy(), client.RawPatch(types.MergePatchType, data))
	}

	// Outside the override group: the normal refusal plus a line saying why
	// the override was not honoured, and the attempt is recorded.
	mallory := framework.UserClient(t, env, "mallory")
	err := revert(mallory, "incident 42: roll back")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[rule ControlPlaneDowngrade]")
	assert.Contains(t, err.Error(), "[rule EtcdDowngrade]")
	assert.Contains(t, err.Error(), `metadata.annotations[rollout-guard.io/override]: Forbidden: override not honoured: user mallory is not in an override group (platform-admins)`)
	w.Refresh(t)
	assert.Equal(t, "v1.34.2", w.KCP.Spec.Version)
	refused := refusedOverridesOf(t, w)
	require.Len(t, refused, 1)
	assert.Equal(t, "mallory", refused[0].By)
	assert.Equal(t, "incident 42: roll back", refused[0].Reason)
	assert.ElementsMatch(t, []string{"ControlPlaneDowngrade", "EtcdDowngrade"}, refused[0].Rules)

	// In the group: let through once, with a warning, and stamped.
	oncall := framework.UserClient(t, env, "oncall", overrideGroup)
	require.NoError(t, revert(oncall, "incident 42: roll back"))
	w.Refresh(t)
	assert.Equal(t, "v1.33.5", w.KCP.Spec.Version)
	rec, err := revisions.RecordFromAnnotations(w.KCP.Annotations)
	require.NoError(t, err)
	assert.EqualValues(t, 3, rec.Revision)
	require.NotNil(t, rec.Override)
	assert.Equal(t, "oncall", rec.Override.By)
	assert.Equal(t, "incident 42: roll back", rec.Override.Reason)
	assert.ElementsMatch(t, []string{"ControlPlaneDowngrade", "EtcdDowngrade"}, rec.Override.Rules)

	// The override is spent: the same annotation, carried by the next
	// change, lets nothing through and is removed.
	err = edit(t, mergePatch, w.KCP, "v1.33.1", kcpVersion...)
	require.Error(t, err)
	// History-aware: v1.33.1 is only a patch below the current v1.33.5, but the
	// control plane ran v1.34.2 and etcd 3.6 in revision 2.
	assert.Contains(t, err.Error(), "Kubernetes downgrade from v1.34.2 (the highest version it has run, per revision 2) to v1.33.1")
	assert.Contains(t, err.Error(), "etcd downgrade from 3.6.5 (revision 2)")
	// The next change that goes through removes the spent override.
	require.NoError(t, env.Client.Patch(ctx, w.KCP.DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"machineTemplate":{"metadata":{"labels":{"tier":"gold"}}}}}`))))
	w.Refresh(t)
	assert.NotContains(t, w.KCP.Annotations, revisions.AnnotationOverride, "a used override stays on the object")
	assert.Equal(t, "4", w.KCP.Annotations[revisions.AnnotationRevision])
	assert.NotContains(t, w.KCP.Annotations, revisions.AnnotationOverriddenBy, "revision 4 used no override")

	// The overridden revision is in history with its override once replaced
	// (or recorded by the reconciler).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, _, err := history.List(ctx, env.Client, w.Namespace, string(w.KCP.UID))
		require.NoError(c, err)
		i := slices.IndexFunc(revs, func(r revisions.Revision) bool { return r.Record.Revision == 3 })
		require.GreaterOrEqual(c, i, 0, "revision 3 among the recorded: %s", framework.DescribeHistory(revs))
		require.NotNil(c, revs[i].Record.Override, "revision 3's override")
		assert.Equal(c, "oncall", revs[i].Record.Override.By, "revision 3's override")
	}, 20*time.Second, 100*time.Millisecond, "revision 3 and its override were never recorded")
}

// refusedOverridesOf reads the refused overrides recorded on the live revision of w's control plane.
func refusedOverridesOf(t *testing.T, w *framework.World) []history.RefusedOverride {
	t.Helper()
	snap, err := revisions.ForKubeadmControlPlane(w.KCP)
	require.NoError(t, err)
	cr := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: revisions.Name(w.KCP.Name, snap.Hash)}, cr))
	var out []history.RefusedOverride
	require.NoError(t, json.Unmarshal([]byte(cr.Annotations[history.AnnotationRefusedOverrides]), &out))
	return out
}

// TestHistoryStampsComeFromTheRequest checks that a client cannot write its
// own history: forged stamps are overwritten with the request's user, and a
// v1beta1 client's change is recorded like a v1beta2 one.
func TestHistoryStampsComeFromTheRequest(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	eve := framework.UserClient(t, env, "eve")

	// A forged author on a real change.
	patch := []byte(`{"metadata":{"annotations":{"rollout-guard.io/changed-by":"someone-else","rollout-guard.io/revision":"99"}},"spec":{"template":{"metadata":{"labels":{"tier":"gold"}}}}}`)
	require.NoError(t, eve.Patch(ctx, w.MD.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-patch")))
	w.Refresh(t)
	rec, err := revisions.RecordFromAnnotations(w.MD.Annotations)
	require.NoError(t, err)
	assert.EqualValues(t, 2, rec.Revision)
	assert.Equal(t, "eve", rec.ChangedBy)
	assert.Equal(t, "kubectl-patch", rec.FieldManager)
	assert.Equal(t, "in-place", rec.ChangeType)

	// A forged author alone (no change of the template) is put back.
	patch = []byte(`{"metadata":{"annotations":{"rollout-guard.io/changed-by":"someone-else"}}}`)
	require.NoError(t, eve.Patch(ctx, w.MD.DeepCopy(), client.RawPatch(types.MergePatchType, patch)))
	w.Refresh(t)
	assert.Equal(t, "eve", w.MD.Annotations[revisions.AnnotationChangedBy])

	// A v1beta1 client's change.
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("cluster.x-k8s.io/v1beta1")
	u.SetKind("MachineDeployment")
	require.NoError(t, eve.Get(ctx, client.ObjectKeyFromObject(w.MD), u))
	require.NoError(t, unstructured.SetNestedField(u.Object, "tmpl-v1beta1", "spec", "template", "spec", "infrastructureRef", "name"))
	require.NoError(t, eve.Update(ctx, u, client.FieldOwner("legacy-client")))
	w.Refresh(t)
	rec, err = revisions.RecordFromAnnotations(w.MD.Annotations)
	require.NoError(t, err)
	assert.EqualValues(t, 3, rec.Revision)
	assert.Equal(t, "eve", rec.ChangedBy)
	assert.Equal(t, "legacy-client", rec.FieldManager)
	assert.Equal(t, "rollout", rec.ChangeType)
	assert.Contains(t, rec.ChangeCause, "tmpl-v1beta1")

	// Back to revision 2's template: a new number, the same record.
	revs, _, err := history.List(ctx, env.Client, w.Namespace, string(w.MD.UID))
	require.NoError(t, err)
	var rev2 *revisions.Revision
	for i := range revs {
		if revs[i].Record.Revision == 2 {
			rev2 = &revs[i]
		}
	}
	require.NotNil(t, rev2, "revision 2 was not recorded when revision 3 replaced it")
	rollback, err := revisions.RollbackPatch(w.MD, rev2.Snapshot)
	require.NoError(t, err)
	require.NoError(t, eve.Patch(ctx, w.MD.DeepCopy(), client.RawPatch(types.MergePatchType, rollback)))
	w.Refresh(t)
	assert.Equal(t, "4", w.MD.Annotations[revisions.AnnotationRevision])
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		revs, _, err = history.List(ctx, env.Client, w.Namespace, string(w.MD.UID))
		require.NoError(c, err)
		i := slices.IndexFunc(revs, func(r revisions.Revision) bool { return r.Snapshot.Hash == rev2.Snapshot.Hash })
		require.GreaterOrEqual(c, i, 0, "revision 2's template among the recorded: %s", framework.DescribeHistory(revs))
		assert.Equal(c, []int64{2, 4}, revs[i].Record.History)
	}, 20*time.Second, 100*time.Millisecond, "revision 2's template should be one record listing revisions 2 and 4")
	assert.Len(t, revs, 3, "revisions 1, 2+4 and 3: no duplicate record for a template seen twice")

	// A restart is an entry of the live revision, not a new revision.
	restartAt := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"rollout": map[string]any{"after": restartAt}}})
	require.NoError(t, err)
	require.NoError(t, eve.Patch(ctx, w.MD.DeepCopy(), client.RawPatch(types.MergePatchType, data)))
	w.Refresh(t)
	assert.Equal(t, "4", w.MD.Annotations[revisions.AnnotationRevision], "a restart is not a new revision")
	// Recorded from the object as stored (its restart stamp), by the
	// history reconciler: not within the request.
	var restarts []revisions.Restart
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		revs, _, err = history.List(ctx, env.Client, w.Namespace, string(w.MD.UID))
		require.NoError(c, err)
		restarts = nil
		for _, r := range revs {
			if r.Record.Revision == 4 {
				restarts = r.Record.Restarts
			}
		}
		assert.NotEmpty(c, restarts, "the restarts of revision 4:\n%s", framework.DescribeHistory(revs))
	}, 30*time.Second, 100*time.Millisecond, "the restart is never recorded")
	require.Len(t, restarts, 1)
	assert.Equal(t, "eve", restarts[0].By)
	assert.Equal(t, "2030-01-02T03:04:05Z", restarts[0].After)
	assertOwnedBy(t, w.Namespace, w.MD)
}
