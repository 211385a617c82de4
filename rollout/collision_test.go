package rollout

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// collisionWorld is gitOpsWorld with the control plane's two revisions
// made of contents whose digests share their short hash (a real
// collision, found by revisionstest.Collide over a nonce label of the
// machine template): revision 1, tier "old", recorded under the short
// name; revision 2, tier "new", live, under its long name, as the guard
// records the second content of one short hash.
func collisionWorld(t *testing.T) []client.Object {
	t.Helper()
	objs := gitOpsWorld(t, nil)
	var kcp *controlplanev1.KubeadmControlPlane
	var out []client.Object
	for _, o := range objs {
		if k, ok := o.(*controlplanev1.KubeadmControlPlane); ok {
			kcp = k
		}
	}
	require.NotNil(t, kcp)
	snap := func(tier, nonce string) revisions.Snapshot {
		k := kcp.DeepCopy()
		k.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": tier, "nonce": nonce}
		s, err := revisions.ForKubeadmControlPlane(k)
		require.NoError(t, err)
		return s
	}
	old, live := snap("old", "000007d5bf"), snap("new", "00000eec3e")
	require.Equal(t, revisions.ShortHash(old.Hash), revisions.ShortHash(live.Hash),
		"the fixture is a collision of the short hash: find new nonces with revisionstest.Collide if the canonical form changed")
	for _, o := range objs {
		if rr, ok := o.(interface{ GetLabels() map[string]string }); ok && rr.GetLabels()[revisions.LabelOwnerUID] == string(kcp.UID) {
			continue // the world's own control-plane revision
		}
		out = append(out, o)
	}
	kcp.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "new", "nonce": "00000eec3e"}
	stamps, err := revisions.RecordFromAnnotations(kcp.Annotations)
	require.NoError(t, err)
	first := stamps
	first.Revision, first.History, first.ChangeCause = 1, []int64{1}, "created"
	second := revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, live, stamps)
	second.Name = revisions.LongName(kcp.Name, live.Hash)
	return append(out, revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, old, first), second)
}

// TestUndoToContentOfTheLiveShortHash: undo to a revision whose content
// shares the live content's short hash rolls back — the whole digest
// decides whether the target is live — and history lists both.
func TestUndoToContentOfTheLiveShortHash(t *testing.T) {
	cl, w := newWriteRecordingClient(collisionWorld(t)...)

	out, errOut, code := runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane", "-o", "json")
	require.Equal(t, core.ExitOK, code, errOut)
	var hist v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(out), &hist))
	require.Len(t, hist.Revisions, 2, "two contents, two revisions")
	assert.EqualValues(t, 2, hist.LiveRevision)
	assert.Equal(t, hist.Revisions[0].Hash, hist.Revisions[1].Hash, "one short hash")
	assert.NotEqual(t, hist.Revisions[0].RolloutRevision, hist.Revisions[1].RolloutRevision, "two records")
	assert.False(t, hist.Revisions[0].Live, "revision 1 is not live")
	assert.True(t, hist.Revisions[1].Live)

	for _, args := range [][]string{
		{"undo", "kcp/c1-control-plane"},
		{"undo", "kcp/c1-control-plane", "--to-revision", "1"},
	} {
		out, errOut, code = runFake(t, cl, gitOpsNow, append(args, "--dry-run=client")...)
		require.Equal(t, core.ExitOK, code, errOut)
		assert.Contains(t, out, "would roll back from revision 2 to revision 1", args)
		assert.NotContains(t, out, "already at", args)
	}
	assert.Empty(t, w.all(), "dry runs send nothing")

	out, errOut, code = runFake(t, cl, gitOpsNow, "undo", "kcp/c1-control-plane", "--to-revision", "1")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, "rolled back to revision 1")
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Namespace, kcp.Name = topoNS, "c1-control-plane"
	getObj(t, cl, kcp)
	assert.Equal(t, map[string]string{"tier": "old", "nonce": "000007d5bf"}, kcp.Spec.MachineTemplate.ObjectMeta.Labels)

	out, errOut, code = runFake(t, cl, gitOpsNow, "undo", "kcp/c1-control-plane", "--to-revision", "1")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, "skipped rollback: already at revision 1", "now it is")
}
