package history

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Pruning and recording run at once in every replica: a reconciler prunes
// from a list it read a moment ago while a webhook gives one of the listed
// contents a new number (the object went back to it). These tests play both
// orders of that race.

func raceScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	return s
}

// twelveRevisions is a history of revisions 1 to 12, each its own content;
// unlabelled, their RolloutRevisions lack revisions.LabelRevision, as
// records made before the label existed.
func twelveRevisions(t *testing.T, unlabelled bool) []client.Object {
	t.Helper()
	var objs []client.Object
	for i := 1; i <= 12; i++ {
		kcp := kcpAt(fmt.Sprintf("v1.35.%d", i), i)
		snap, err := revisions.ForKubeadmControlPlane(kcp)
		require.NoError(t, err)
		cr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: int64(i), History: []int64{int64(i)}})
		if unlabelled {
			delete(cr.Labels, revisions.LabelRevision)
		}
		objs = append(objs, cr)
	}
	return objs
}

func TestPruneOnlyAsListed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// unlabelled records were made before revisions.LabelRevision.
		unlabelled bool
		// renumberFirst gives revision 1's content number 13 after the
		// list and before the prune, as a replica's recorder would.
		renumberFirst bool
		wantLeft      []int64
		// wantRequests are the deletes pruning sends, by verb.
		wantRequests requests
	}{
		{"nothing changed since the list: the two oldest go, in one request", false, false,
			[]int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, requests{"deletecollection": 1}},
		{"the oldest was renumbered since: it stays, the next goes", false, true,
			[]int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, requests{"deletecollection": 1}},
		{"records made before the number label: the two oldest go, one by one", true, false,
			[]int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, requests{"delete": 2}},
		{"records made before the number label, the oldest renumbered since: it stays", true, true,
			[]int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, requests{"delete": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			server := fake.NewClientBuilder().WithScheme(raceScheme(t)).WithObjects(twelveRevisions(t, tc.unlabelled)...).Build()
			n := requests{}
			c := counting(server, n)
			r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane, Limit: 10}
			listed, bad, err := List(ctx, c, "ns", "uid-cp")
			require.NoError(t, err)
			require.Empty(t, bad)
			require.Len(t, listed, 12)
			if tc.renumberFirst {
				// As a recorder renumbers content the object went back
				// to: the record's number, stamps and label change at once.
				first := &rgv1alpha1.RolloutRevision{}
				require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: listed[0].Name}, first))
				again := revisions.RolloutRevision(kcpAt("v1.35.1", 13), kinds.KubeadmControlPlane.GVK, listed[0].Snapshot,
					revisions.Merge(listed[0].Record, revisions.Record{Revision: 13, History: []int64{13}}))
				first.Revision, first.Labels, first.Annotations = again.Revision, again.Labels, again.Annotations
				require.NoError(t, c.Update(ctx, first))
			}
			live := kcpAt("v1.35.99", 14)
			snap, err := revisions.ForKubeadmControlPlane(live)
			require.NoError(t, err)

			for k := range n {
				delete(n, k)
			}
			require.NoError(t, r.prune(ctx, live, snap.Hash, listed))
			assert.Equal(t, tc.wantRequests, n, "requests of the prune")

			left, _, err := List(ctx, server, "ns", "uid-cp")
			require.NoError(t, err)
			var numbers []int64
			for _, rev := range left {
				numbers = append(numbers, rev.Record.Revision)
			}
			assert.Equal(t, tc.wantLeft, numbers)
		})
	}
}

func TestRecordCreatesARevisionPrunedBetweenReadAndUpdate(t *testing.T) {
	ctx := context.Background()
	kcp := kcpAt("v1.35.1", 1)
	snap, err := revisions.ForKubeadmControlPlane(kcp)
	require.NoError(t, err)
	existing := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 1, History: []int64{1}})
	prunedOnce := false
	c := fake.NewClientBuilder().WithScheme(raceScheme(t)).WithObjects(existing).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if !prunedOnce {
				// Another replica prunes it right after this one read it.
				prunedOnce = true
				require.NoError(t, c.Delete(ctx, &rgv1alpha1.RolloutRevision{ObjectMeta: existing.ObjectMeta}))
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	r := &Recorder{Client: c, Reader: c}

	// The object went back to revision 1's content, now numbered 5.
	back := kcpAt("v1.35.1", 5)
	require.NoError(t, r.Record(ctx, back, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 5, History: []int64{5}, ChangedBy: "alice"}))

	require.True(t, prunedOnce, "the update raced a prune")
	cr := &rgv1alpha1.RolloutRevision{}
	err = c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: existing.Name}, cr)
	require.NoError(t, err, "recorded again after the prune (NotFound: %v)", apierrors.IsNotFound(err))
	rev, err := revisions.FromRolloutRevision(cr)
	require.NoError(t, err)
	assert.EqualValues(t, 5, rev.Record.Revision)
	assert.Equal(t, "alice", rev.Record.ChangedBy)
}

// One window is left by pruning in one request: the API server lists what
// the selector matches, then deletes each, so a record renumbered between
// those two steps is deleted with its old number. The object then carries
// the new number and its author in its stamps, and the reconcile that
// follows the object's change records its content again from them: the
// live revision is never left unrecorded (what is lost is the record's
// list of earlier numbers and its refused break-glass attempts).
func TestRecordOfARenumberedRevisionDeletedByAPruneComesBack(t *testing.T) {
	ctx := context.Background()
	back := kcpAt("v1.35.1", 13) // the object went back to revision 1's content
	back.Annotations[revisions.AnnotationChangedBy] = "alice"
	c := fake.NewClientBuilder().WithScheme(raceScheme(t)).WithObjects(append(twelveRevisions(t, false), back)...).Build()
	listed, _, err := List(ctx, c, "ns", "uid-cp")
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, &rgv1alpha1.RolloutRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: listed[0].Name}}),
		"the prune's request deletes the record it listed as revision 1")

	r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane, Limit: 10}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
	require.NoError(t, err)

	cr := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: listed[0].Name}, cr), "recorded again")
	rev, err := revisions.FromRolloutRevision(cr)
	require.NoError(t, err)
	assert.EqualValues(t, 13, rev.Record.Revision)
	assert.Equal(t, []int64{13}, rev.Record.History, "the numbers the content was live under before are lost with the record")
	assert.Equal(t, "alice", rev.Record.ChangedBy)
	assert.True(t, rev.Labelled)
}

// TestPruneWithoutDeleteCollection: a guard whose role lacks
// deletecollection (a manifest older than the guard) prunes one by one,
// as before, instead of not at all.
func TestPruneWithoutDeleteCollection(t *testing.T) {
	ctx := context.Background()
	server := fake.NewClientBuilder().WithScheme(raceScheme(t)).WithObjects(twelveRevisions(t, false)...).Build()
	n := requests{}
	forbidden := interceptor.NewClient(server, interceptor.Funcs{
		DeleteAllOf: func(context.Context, client.WithWatch, client.Object, ...client.DeleteAllOfOption) error {
			n["deletecollection"]++
			return apierrors.NewForbidden(appsv1.Resource("rolloutrevisions"), "", fmt.Errorf("deletecollection is not allowed"))
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			n["delete"]++
			return c.Delete(ctx, obj, opts...)
		},
	})
	r := &Reconciler{Client: forbidden, APIReader: server, Recorder: &Recorder{Client: forbidden, Reader: server}, Kind: kinds.KubeadmControlPlane, Limit: 10}
	listed, _, err := List(ctx, server, "ns", "uid-cp")
	require.NoError(t, err)
	live := kcpAt("v1.35.99", 14)
	snap, err := revisions.ForKubeadmControlPlane(live)
	require.NoError(t, err)

	require.NoError(t, r.prune(ctx, live, snap.Hash, listed))
	assert.Equal(t, requests{"deletecollection": 1, "delete": 2}, n)
	left, _, err := List(ctx, server, "ns", "uid-cp")
	require.NoError(t, err)
	assert.Len(t, left, 10)
	assert.EqualValues(t, 3, left[0].Record.Revision, "the two oldest pruned")
}
