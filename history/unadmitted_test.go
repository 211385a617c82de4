package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestNumberingOfUnadmittedContent: content that became live without the
// guard still carries the stamps of the revision before; it must not be
// recorded under that revision's number (which names other content), but
// under a number of its own above every recorded one — whichever of the
// reconciler (Record) or the next admission (RecordReplaced) gets there
// first, and however often. test/faults checks the same against a real API
// server and the real guard.
func TestNumberingOfUnadmittedContent(t *testing.T) {
	// History: revisions 1 (v1.35.1) and 2 (v1.35.2); the live object was
	// changed to v1.35.3 without the guard and is still stamped 2.
	rev1, rev2, slipped := kcpAt("v1.35.1", 1), kcpAt("v1.35.2", 2), kcpAt("v1.35.3", 2)
	for _, tc := range []struct {
		name string
		// record is what happens, in order: "reconcile" (Record of the live
		// object with its stamps) or "replace" (RecordReplaced, as the next
		// admitted change does).
		record []string
		// highest is what RecordReplaced returned (0: not called).
		highest int64
	}{
		{name: "reconciler first", record: []string{"reconcile"}},
		{name: "next admission first", record: []string{"replace"}, highest: 3},
		{name: "reconciler, then next admission", record: []string{"reconcile", "replace"}, highest: 3},
		{name: "next admission, then reconciler", record: []string{"replace", "reconcile"}, highest: 3},
		{name: "reconciler twice", record: []string{"reconcile", "reconcile"}},
	} {
		for _, indexed := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: ", read from the index"}[indexed], func(t *testing.T) {
				ctx := context.Background()
				var objs []client.Object
				for i, old := range []*controlplanev1.KubeadmControlPlane{rev1, rev2} {
					snap, err := revisions.ForKubeadmControlPlane(old)
					require.NoError(t, err)
					n := int64(i + 1)
					objs = append(objs, revisions.RolloutRevision(old, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: n, History: []int64{n}, ChangedBy: "alice"}))
				}
				c := fakeWithIndex(t, objs...)
				r := &Recorder{Client: c, Reader: c}
				if indexed {
					r.Index = indexOver(c)
				}
				snap, err := revisions.ForKubeadmControlPlane(slipped)
				require.NoError(t, err)
				stamps, err := revisions.RecordFromAnnotations(slipped.Annotations)
				require.NoError(t, err)
				var highest int64
				for _, step := range tc.record {
					switch step {
					case "reconcile":
						require.NoError(t, r.Record(ctx, slipped, kinds.KubeadmControlPlane.GVK, snap, stamps))
					case "replace":
						highest, err = r.RecordReplaced(ctx, slipped, kinds.KubeadmControlPlane.GVK, snap, stamps)
						require.NoError(t, err)
					}
				}
				assert.Equal(t, tc.highest, highest, "RecordReplaced's highest revision")

				revs, got := historyOf(t, c)
				snap1, err := revisions.ForKubeadmControlPlane(rev1)
				require.NoError(t, err)
				snap2, err := revisions.ForKubeadmControlPlane(rev2)
				require.NoError(t, err)
				assert.Equal(t, map[string][]int64{snap1.Hash: {1}, snap2.Hash: {2}, snap.Hash: {3}}, got)
				missed := revs[len(revs)-1]
				assert.Equal(t, snap.Hash, missed.Snapshot.Hash)
				assert.Equal(t, UnadmittedCause, missed.Record.ChangeCause)
				assert.Equal(t, revisions.ChangeAdopted, missed.Record.ChangeType)
				assert.Empty(t, missed.Record.ChangedBy, "the author of an unadmitted change is unknown")
			})
		}
	}
}

// TestContentBackAfterAnUnadmittedChange: A stamped 2; B, not admitted,
// recorded as 3; then A again, still stamped 2. The reconciler renumbers A
// above B, so the next admitted change, numbered from A's record without
// listing the history, is numbered above both.
func TestContentBackAfterAnUnadmittedChange(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	a, b := kcpAt("v1.35.2", 2), kcpAt("v1.35.3", 2)
	snapA, err := revisions.ForKubeadmControlPlane(a)
	require.NoError(t, err)
	snapB, err := revisions.ForKubeadmControlPlane(b)
	require.NoError(t, err)
	lists := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(a.DeepCopy(),
		revisions.RolloutRevision(a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "alice"}),
		revisions.RolloutRevision(b, kinds.KubeadmControlPlane.GVK, snapB, Unadmitted(3, time.Now())),
	).Build(), interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		lists++
		return c.List(ctx, list, opts...)
	}})
	recorder := &Recorder{Client: c, Reader: c}
	stamps := revisions.Record{Revision: 2, History: []int64{2}}

	// Without the reconciler, A's record agrees with its stamps: the next
	// admission would take 2 as the highest, and number its change 3 like B.
	highest, err := recorder.RecordReplaced(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, stamps)
	require.NoError(t, err)
	assert.Equal(t, int64(2), highest, "A's own record, read without listing")
	assert.Zero(t, lists, "a record that agrees with its stamps is read, the history not listed")

	r := &Reconciler{Client: c, APIReader: c, Recorder: recorder, Kind: kinds.KubeadmControlPlane}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
	require.NoError(t, err)
	_, got := historyOf(t, c)
	assert.Equal(t, map[string][]int64{snapA.Hash: {2, 4}, snapB.Hash: {3}}, got, "A renumbered above B")

	lists = 0
	highest, err = recorder.RecordReplaced(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, stamps)
	require.NoError(t, err)
	assert.Equal(t, int64(4), highest, "the next change is numbered 5, above B's 3 and A's 4")
	assert.Zero(t, lists)

	// Reconciling again changes nothing: A holds the highest number.
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
	require.NoError(t, err)
	revs, _ := historyOf(t, c)
	assert.Equal(t, int64(4), Highest(revs))
}

// historyOf lists the history of the kinds.KubeadmControlPlane of kcpAt, all of
// it decodable, and the revision numbers each content holds, by hash.
func historyOf(t *testing.T, c client.Reader) ([]revisions.Revision, map[string][]int64) {
	t.Helper()
	revs, bad, err := List(context.Background(), c, "ns", "uid-cp")
	require.NoError(t, err)
	require.Empty(t, bad)
	numbers := map[string][]int64{}
	for _, rev := range revs {
		numbers[rev.Snapshot.Hash] = rev.Record.History
	}
	return revs, numbers
}

// TestNoNumberReuseAfterSlipSlipAdmit: A is live as revision n; B becomes
// live without the guard and is recorded (by the reconciler, or by the next
// admission) as n+1; A comes back without the guard, still stamped n; and an
// admitted change comes before the reconciler sees A. That change must be
// numbered above n+1, never n+1 again: no number may name two contents.
// Twenty rounds, each on the history the last one left, with both orders
// of who records B.
// It runs with the history read from the API server and from an Index.
func TestNoNumberReuseAfterSlipSlipAdmit(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		t.Run(map[bool]string{false: "read from the API server", true: "read from the index"}[indexed], func(t *testing.T) {
			noNumberReuseAfterSlipSlipAdmit(t, indexed)
		})
	}
}

func noNumberReuseAfterSlipSlipAdmit(t *testing.T, indexed bool) {
	ctx := context.Background()
	live := kcpAt("v1.35.0", 1)
	snap0, err := revisions.ForKubeadmControlPlane(live)
	require.NoError(t, err)
	c := fakeWithIndex(t,
		revisions.RolloutRevision(live, kinds.KubeadmControlPlane.GVK, snap0, revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "alice"}),
	)
	stamped := int64(1)
	for round := range 20 {
		// Each round its own recorder: a fresh guard process, no memory.
		recorder := &Recorder{Client: c, Reader: c}
		if indexed {
			recorder.Index = indexOver(c)
		}
		a := kcpAt(live.Spec.Version, int(stamped))
		b := kcpAt(fmt.Sprintf("v1.35.%d-slipped", round), int(stamped)) // B, still stamped as A
		snapA, err := revisions.ForKubeadmControlPlane(a)
		require.NoError(t, err)
		snapB, err := revisions.ForKubeadmControlPlane(b)
		require.NoError(t, err)
		stamps := revisions.Record{Revision: stamped, History: []int64{stamped}}
		if round%2 == 0 {
			require.NoError(t, recorder.Record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, stamps), "round %d: the reconciler records B", round)
		} else {
			_, err := recorder.RecordReplaced(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, stamps)
			require.NoError(t, err, "round %d: an admission dry-run reads B", round)
		}
		revs, _ := historyOf(t, c)
		numberOfB := Highest(revs)
		require.Greater(t, numberOfB, stamped, "round %d: B is numbered above A", round)

		// A again, stamped as before; the admitted change comes first.
		highest, err := recorder.RecordReplaced(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, stamps)
		require.NoError(t, err)
		next := highest + 1
		assert.Greater(t, next, numberOfB, "round %d: the admitted change is numbered %d, above B's %d", round, next, numberOfB)

		// The admitted change C becomes live as next; the next round starts from it.
		live = kcpAt(fmt.Sprintf("v1.36.%d", round), int(next))
		snapC, err := revisions.ForKubeadmControlPlane(live)
		require.NoError(t, err)
		require.NoError(t, recorder.Record(ctx, live, kinds.KubeadmControlPlane.GVK, snapC, revisions.Record{Revision: next, History: []int64{next}, ChangedBy: "alice"}))
		stamped = next

		// No number names two contents (byNumber fails on one that does).
		revs, _ = historyOf(t, c)
		byNumber := map[int64]string{}
		for _, rev := range revs {
			for _, n := range rev.Record.History {
				if other, ok := byNumber[n]; ok {
					require.Failf(t, "a number names two contents", "round %d: revision %d names %s and %s", round, n, other, rev.Snapshot.Hash)
				}
				byNumber[n] = rev.Snapshot.Hash
			}
		}
	}
}
