package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

var testStampKey = revisions.StampKey("0123456789abcdef0123456789abcdef")

// signedKCP is kcpAt with the stamps of alice, signed as the guard signs
// them on an update (bound to its UID) under key.
func signedKCP(t *testing.T, key revisions.StampKey, version string, revision int) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	kcp := kcpAt(version, revision)
	kcp.Annotations[revisions.AnnotationChangedBy] = "alice"
	snap, err := revisions.ForKubeadmControlPlane(kcp)
	require.NoError(t, err)
	kcp.Annotations[revisions.AnnotationSignature] = key.Sign(revisions.Signed(kcp.Annotations),
		revisions.Binding{Kind: "KubeadmControlPlane", Namespace: kcp.Namespace, Name: kcp.Name, UID: string(kcp.UID), Hash: snap.Hash}, time.Now())
	return kcp
}

// TestStampsTheGuardDidNotWriteAreNotHistory: stamps count as they say
// only when signed with the guard's key, or when a record the guard did
// not make for unsigned stamps holds them (an earlier release's, or one a
// move brought); others give a record of unknown author, numbered by the
// guard above the object's history.
func TestStampsTheGuardDidNotWriteAreNotHistory(t *testing.T) {
	ctx := context.Background()
	forged := func() *controlplanev1.KubeadmControlPlane {
		kcp := kcpAt("v1.35.2", 99)
		kcp.Annotations[revisions.AnnotationChangedBy] = "system:admin"
		kcp.Annotations[revisions.AnnotationChangeCause] = "approved change"
		kcp.Annotations[revisions.AnnotationHighestRun] = `{"kubernetes":"v1.30.0"}`
		kcp.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		return kcp
	}
	record := func(obj *controlplanev1.KubeadmControlPlane, rec revisions.Record) client.Object {
		snap, err := revisions.ForKubeadmControlPlane(obj)
		require.NoError(t, err)
		return revisions.RolloutRevision(obj, kinds.KubeadmControlPlane.GVK, snap, rec)
	}
	signedElsewhere := signedKCP(t, revisions.StampKey("another key, another cluster......"), "v1.35.2", 4)
	copied := forged()
	copied.Annotations[revisions.AnnotationSignature] = signedKCP(t, testStampKey, "v1.35.1", 99).Annotations[revisions.AnnotationSignature]

	for _, tc := range []struct {
		name        string
		obj         *controlplanev1.KubeadmControlPlane
		records     []client.Object
		wantWritten bool
		want        revisions.Record // compared on Revision, ChangedBy, ChangeCause
	}{
		{name: "no stamps", obj: &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", UID: "uid-cp"}},
			wantWritten: true, want: revisions.Record{Revision: 1, ChangeCause: Adopted(&controlplanev1.KubeadmControlPlane{}).ChangeCause}},
		{name: "signed by the guard", obj: signedKCP(t, testStampKey, "v1.35.2", 4), wantWritten: true, want: revisions.Record{Revision: 4, ChangedBy: "alice"}},
		{name: "forged on a create, no history", obj: forged(), want: revisions.Record{Revision: 1, ChangeCause: UnadmittedCause}},
		{name: "forged on a create, over a history", obj: forged(),
			records: []client.Object{record(kcpAt("v1.35.0", 1), revisions.Record{Revision: 1, ChangedBy: "bob"}), record(kcpAt("v1.35.1", 2), revisions.Record{Revision: 2, ChangedBy: "bob"})},
			want:    revisions.Record{Revision: 3, ChangeCause: UnadmittedCause}},
		{name: "forged, already recorded as unknown", obj: forged(),
			records: []client.Object{record(forged(), Unadmitted(7, time.Now()))}, want: revisions.Record{Revision: 7, ChangeCause: UnadmittedCause}},
		{name: "a signature copied from other content", obj: copied, want: revisions.Record{Revision: 1, ChangeCause: UnadmittedCause}},
		{name: "signed with another cluster's key, its record moved along", obj: signedElsewhere,
			records:     []client.Object{record(signedElsewhere, revisions.Record{Revision: 4, History: []int64{2, 4}, ChangedBy: "alice"})},
			wantWritten: true, want: revisions.Record{Revision: 4, ChangedBy: "alice"}},
		{name: "unsigned stamps of an earlier release, a record holding them", obj: func() *controlplanev1.KubeadmControlPlane {
			kcp := kcpAt("v1.35.2", 2)
			kcp.Annotations[revisions.AnnotationChangedBy] = "alice"
			return kcp
		}(), records: []client.Object{record(kcpAt("v1.35.2", 2), revisions.Record{Revision: 2, ChangedBy: "alice"})},
			wantWritten: true, want: revisions.Record{Revision: 2, ChangedBy: "alice"}},
		{name: "a record of the content under another number", obj: forged(),
			records: []client.Object{record(forged(), revisions.Record{Revision: 3, ChangedBy: "bob"})},
			want:    revisions.Record{Revision: 3, ChangedBy: "bob"}},
	} {
		for _, indexed := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: ", from the index"}[indexed], func(t *testing.T) {
				c := fakeWithIndex(t, tc.records...)
				r := &Recorder{Client: c, Reader: c}
				if indexed {
					r.Index = indexOver(c)
				}
				s := &Stamps{Key: testStampKey, Recorder: r}
				snap, err := revisions.ForKubeadmControlPlane(tc.obj)
				require.NoError(t, err)
				got, written, err := s.Of(ctx, tc.obj, "KubeadmControlPlane", snap.Hash)
				require.NoError(t, err)
				assert.Equal(t, tc.wantWritten, written)
				assert.Equal(t, tc.want.Revision, got.Revision, "revision")
				assert.Equal(t, tc.want.ChangedBy, got.ChangedBy, "author")
				if tc.want.ChangeCause != "" {
					assert.Equal(t, tc.want.ChangeCause, got.ChangeCause)
				}
			})
		}
	}
}

// TestInPlaceRevisionsNeverFlushTheRollouts: 29 in-place edits (labels of
// the machine template, one edit each) after a few rollouts prune
// in-place revisions, never the rollouts an undo goes back to; with more
// rollouts than the limit, the newest of them are kept.
func TestInPlaceRevisionsNeverFlushTheRollouts(t *testing.T) {
	rev := func(n int64, changeType string) revisions.Revision {
		return revisions.Revision{Name: fmt.Sprint("r", n), Snapshot: revisions.Snapshot{Hash: fmt.Sprint("h", n)},
			Record: revisions.Record{Revision: n, History: []int64{n}, ChangeType: changeType}}
	}
	numbers := func(revs []revisions.Revision) []int64 {
		var out []int64
		for _, r := range revs {
			out = append(out, r.Record.Revision)
		}
		return out
	}
	var revs []revisions.Revision
	for n := int64(1); n <= 3; n++ {
		revs = append(revs, rev(n, revisions.ChangeRollout))
	}
	for n := int64(4); n <= 32; n++ {
		revs = append(revs, rev(n, revisions.ChangeInPlace))
	}
	victims := numbers(pruned(revs, "h32", 20))
	assert.Len(t, victims, 12)
	assert.NotContains(t, victims, int64(1))
	assert.NotContains(t, victims, int64(2))
	assert.NotContains(t, victims, int64(3))
	assert.Equal(t, []int64{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, victims, "the oldest in-place revisions")

	revs = nil
	for n := int64(1); n <= 25; n++ {
		revs = append(revs, rev(n, revisions.ChangeRollout))
	}
	for n := int64(26); n <= 54; n++ {
		revs = append(revs, rev(n, revisions.ChangeInPlace))
	}
	victims = numbers(pruned(revs, "h54", 20))
	assert.Len(t, victims, 34)
	for n := int64(7); n <= 25; n++ {
		assert.NotContains(t, victims, n, "the newest rollouts stay")
	}
}
