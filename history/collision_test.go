package history

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// collidingKCPs returns one control plane at two contents whose digests
// share their short hash (a real collision, found by
// revisionstest.Collide over a nonce label of the machine template): a at
// v1.35.1 stamped revision 1, then b at v1.35.0 stamped revision 2.
func collidingKCPs(t *testing.T) (a, b *controlplanev1.KubeadmControlPlane, sa, sb revisions.Snapshot) {
	t.Helper()
	a, b = kcpAt("v1.35.1", 1), kcpAt("v1.35.0", 2)
	a.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"nonce": "00001c51eb"}
	b.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"nonce": "00000e5b06"}
	sa, sb = mustSnap(t, a), mustSnap(t, b)
	require.Equal(t, revisions.ShortHash(sa.Hash), revisions.ShortHash(sb.Hash),
		"the fixture is a collision of the short hash: find new nonces with revisionstest.Collide if the canonical form changed")
	require.NotEqual(t, sa.Hash, sb.Hash)
	return a, b, sa, sb
}

// earlierRelease is cr as a release that knew only the short hash
// recorded it: without its digest.
func earlierRelease(cr *rgv1alpha1.RolloutRevision) *rgv1alpha1.RolloutRevision {
	delete(cr.Annotations, revisions.AnnotationDigest)
	return cr
}

// TestContentsOfOneShortHashAreRecordedAsTwoRevisions: a control plane
// set to content a, then to content b of the same short hash, has two
// revisions — whether the Recorder reads the Index or the API server,
// whichever content is recorded first, and when a's record was written by
// an earlier release (no digest: its data tells its content) — and
// recording either again adds nothing.
func TestContentsOfOneShortHashAreRecordedAsTwoRevisions(t *testing.T) {
	ctx := context.Background()
	gvk := kinds.KubeadmControlPlane.GVK
	for _, tc := range []struct {
		name    string
		indexed bool
		earlier bool // a's record is an earlier release's
		bFirst  bool // b is recorded before a
	}{
		{name: "from the API server"},
		{name: "from the Index", indexed: true},
		{name: "b first, from the API server", bFirst: true},
		{name: "b first, from the Index", indexed: true, bFirst: true},
		{name: "a recorded by an earlier release, from the API server", earlier: true},
		{name: "a recorded by an earlier release, from the Index", indexed: true, earlier: true},
		{name: "a recorded by an earlier release, b first", indexed: true, earlier: true, bFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, sa, sb := collidingKCPs(t)
			recA := revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "alice"}
			recB := revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "mallory"}
			var objs []client.Object
			if tc.earlier {
				objs = append(objs, earlierRelease(revisions.RolloutRevision(a, gvk, sa, recA)))
			}
			c := fakeWithIndex(t, objs...)
			r := &Recorder{Client: c, Reader: c}
			if tc.indexed {
				r.Index = indexOver(c)
			}
			order := []func() error{
				func() error { return r.Record(ctx, a, gvk, sa, recA) },
				func() error { return r.Record(ctx, b, gvk, sb, recB) },
			}
			if tc.bFirst {
				order[0], order[1] = order[1], order[0]
			}
			for range 2 { // recording again adds nothing
				for _, record := range order {
					require.NoError(t, record())
				}
			}

			revs, bad, err := List(ctx, c, "ns", "uid-cp")
			require.NoError(t, err)
			require.Empty(t, bad)
			require.Len(t, revs, 2, "two contents, two revisions")
			byHash := map[string]revisions.Revision{}
			for _, rev := range revs {
				byHash[rev.Snapshot.Hash] = rev
			}
			require.Contains(t, byHash, sa.Hash)
			require.Contains(t, byHash, sb.Hash)
			assert.Equal(t, []int64{1}, byHash[sa.Hash].Record.History)
			assert.Equal(t, "alice", byHash[sa.Hash].Record.ChangedBy)
			assert.Equal(t, []int64{2}, byHash[sb.Hash].Record.History)
			assert.Equal(t, "mallory", byHash[sb.Hash].Record.ChangedBy)
			first, second := sa, sb
			if tc.bFirst && !tc.earlier {
				first, second = sb, sa
			}
			assert.Equal(t, revisions.Name("cp", first.Hash), byHash[first.Hash].Name, "the first recorded takes the short name")
			assert.Equal(t, revisions.LongName("cp", second.Hash), byHash[second.Hash].Name, "the other its long name")

			// Every record now carries its digest: an earlier release's is
			// given it when its content is recorded again.
			for _, rev := range revs {
				cr := &rgv1alpha1.RolloutRevision{}
				require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: rev.Name}, cr))
				assert.Equal(t, rev.Snapshot.Hash, cr.Annotations[revisions.AnnotationDigest], rev.Name)
			}
		})
	}
}

// TestReconcilerRecordsContentOfARecordedShortHash: the live control plane
// holds content b, stamped revision 2, and its history holds content a of
// the same short hash as revision 1 (under the name b's short hash
// gives): the reconciler records b as revision 2 of its own, and leaves a's
// record as it was.
func TestReconcilerRecordsContentOfARecordedShortHash(t *testing.T) {
	ctx := context.Background()
	gvk := kinds.KubeadmControlPlane.GVK
	for _, tc := range []struct {
		name             string
		indexed, earlier bool
	}{
		{name: "from the API server"},
		{name: "from the Index", indexed: true},
		{name: "a recorded by an earlier release", earlier: true},
		{name: "a recorded by an earlier release, from the Index", indexed: true, earlier: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, sa, sb := collidingKCPs(t)
			recordOfA := revisions.RolloutRevision(a, gvk, sa, revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "alice"})
			if tc.earlier {
				recordOfA = earlierRelease(recordOfA)
			}
			b.Annotations[revisions.AnnotationChangedBy] = "mallory"
			c := fakeWithIndex(t, recordOfA, b)
			r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane}
			if tc.indexed {
				r.Recorder.Index = indexOver(c)
			}
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
			require.NoError(t, err)

			revs, bad, err := List(ctx, c, "ns", "uid-cp")
			require.NoError(t, err)
			require.Empty(t, bad)
			require.Len(t, revs, 2, "the live content is a revision of its own")
			assert.Equal(t, sa.Hash, revs[0].Snapshot.Hash)
			assert.EqualValues(t, 1, revs[0].Record.Revision)
			assert.Equal(t, "alice", revs[0].Record.ChangedBy)
			assert.Equal(t, sb.Hash, revs[1].Snapshot.Hash)
			assert.EqualValues(t, 2, revs[1].Record.Revision)
			assert.Equal(t, "mallory", revs[1].Record.ChangedBy)
			assert.Equal(t, revisions.LongName("cp", sb.Hash), revs[1].Name)
		})
	}
}

// TestPruningKnowsTheLiveContentByItsDigest: of two revisions of one short
// hash, pruning keeps the live one's and may remove the other's.
func TestPruningKnowsTheLiveContentByItsDigest(t *testing.T) {
	short := "0a1b2c3d4e"
	live := revisions.Revision{Snapshot: revisions.Snapshot{Kind: revisions.KindMachineDeployment, Hash: short + "11" + testDigest[12:]}, Record: revisions.Record{Revision: 1}}
	other := revisions.Revision{Snapshot: revisions.Snapshot{Kind: revisions.KindMachineDeployment, Hash: short + "22" + testDigest[12:]}, Record: revisions.Record{Revision: 2}}
	newest := revisions.Revision{Snapshot: revisions.Snapshot{Kind: revisions.KindMachineDeployment, Hash: otherHash + testDigest[10:]}, Record: revisions.Record{Revision: 3}}
	for _, tc := range []struct {
		name  string
		revs  []revisions.Revision
		live  string
		limit int
		want  []int64
	}{
		{"the oldest live", []revisions.Revision{live, other, newest}, live.Snapshot.Hash, 2, []int64{2}},
		{"the other live", []revisions.Revision{live, other, newest}, other.Snapshot.Hash, 2, []int64{1}},
		{"the newest live", []revisions.Revision{live, other, newest}, newest.Snapshot.Hash, 1, []int64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int64
			for _, rev := range pruned(tc.revs, tc.live, tc.limit) {
				got = append(got, rev.Record.Revision)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
