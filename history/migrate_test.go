package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// asControllerRevision is rr as an earlier release recorded it: an apps/v1
// ControllerRevision of the same name, metadata, data and number.
func asControllerRevision(rr *rgv1alpha1.RolloutRevision) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{ObjectMeta: *rr.ObjectMeta.DeepCopy(), Data: *rr.Data.DeepCopy(), Revision: rr.Revision}
}

// TestMigrationMovesEarlierHistory: the guard's ControllerRevisions become
// RolloutRevisions that decode to the same revisions and are deleted (one
// merged into the thinner record of its content made before it); a
// ControllerRevision of a StatefulSet is not the guard's and stays; a
// RolloutRevision whose owner label names an owner's old UID gets the
// owner reference's; a second run changes nothing.
func TestMigrationMovesEarlierHistory(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	var want []revisions.Revision
	for i := 1; i <= 3; i++ {
		kcp := kcpAt(fmt.Sprintf("v1.35.%d", i), i)
		snap, err := revisions.ForKubeadmControlPlane(kcp)
		require.NoError(t, err)
		rec := revisions.Record{Revision: int64(i), History: []int64{int64(i)}, ChangedBy: "alice", ChangeCause: "upgrade"}
		if i == 3 {
			// The live revision, restarted once, and already recorded
			// from the object's stamps alone (by the reconciler of the
			// upgraded guard) before the migration: merged, not lost.
			rec.Restarts = []revisions.Restart{{At: time.Date(2026, 12, 1, 2, 3, 4, 0, time.UTC), By: "bob", FieldManager: "rollout", After: "2026-12-01T02:03:04Z"}}
			objs = append(objs, revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 3, History: []int64{3}}))
		}
		rr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap, rec)
		rev, err := revisions.FromRolloutRevision(rr)
		require.NoError(t, err)
		want = append(want, rev)
		objs = append(objs, asControllerRevision(rr))
	}
	statefulSets := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-6d4b9", Labels: map[string]string{"app": "web"}}, Revision: 4}
	moved := revisions.RolloutRevision(kcpAt("v1.36.0", 4), kinds.KubeadmControlPlane.GVK, mustSnap(t, kcpAt("v1.36.0", 4)), revisions.Record{Revision: 4, History: []int64{4}})
	moved.Name = "moved"
	moved.Labels[revisions.LabelOwnerUID] = "uid-in-the-old-management-cluster"
	objs = append(objs, statefulSets, moved)

	s := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()

	for run := 1; run <= 2; run++ {
		m := Migration{Client: c, Reader: c, Recorder: &Recorder{Client: c, Reader: c}}
		n, err := m.moveControllerRevisions(ctx)
		require.NoError(t, err)
		labelled, err := m.setOwnerLabels(ctx)
		require.NoError(t, err)
		if run == 1 {
			assert.Equal(t, 3, n, "ControllerRevisions moved")
			assert.Equal(t, 1, labelled, "owner labels set")
		} else {
			assert.Zero(t, n, "a second run moves nothing")
			assert.Zero(t, labelled, "a second run labels nothing")
		}
	}

	crs := &appsv1.ControllerRevisionList{}
	require.NoError(t, c.List(ctx, crs))
	require.Len(t, crs.Items, 1, "only the StatefulSet's ControllerRevision is left")
	assert.Equal(t, "web-6d4b9", crs.Items[0].Name)

	got, bad, err := List(ctx, c, "ns", string(revisions.OwnerUID(moved)))
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, got, 4, "the three migrated revisions and the moved one, found by their owner")
	for i, w := range want {
		assert.Equal(t, w.Snapshot, got[i].Snapshot, "revision %d", i+1)
		assert.Equal(t, w.Record, got[i].Record, "revision %d", i+1)
		assert.Equal(t, w.Name, got[i].Name, "revision %d keeps its name", i+1)
	}
}

func mustSnap(t *testing.T, obj client.Object) revisions.Snapshot {
	t.Helper()
	snap, err := kinds.KubeadmControlPlane.Snapshot(obj)
	require.NoError(t, err)
	return snap
}

// TestMigrationTriesAgain: a Migration whose first tries fail (the
// RolloutRevision CRD not yet served) tries again until it is done.
func TestMigrationTriesAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	kcp := kcpAt("v1.35.1", 1)
	rr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, mustSnap(t, kcp), revisions.Record{Revision: 1, History: []int64{1}})
	failures := 2
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(asControllerRevision(rr)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*rgv1alpha1.RolloutRevision); ok && failures > 0 {
				failures--
				return apierrors.NewNotFound(rgv1alpha1.Resource.GroupResource(), obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	done := make(chan error, 1)
	go func() { done <- Migration{Client: c, Reader: c, Recorder: &Recorder{Client: c, Reader: c}}.Start(ctx) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the Migration did not finish after its tries failed twice")
	}
	assert.Zero(t, failures, "tries that failed")
	got, _, err := List(ctx, c, "ns", "uid-cp")
	require.NoError(t, err)
	assert.Len(t, got, 1, "migrated once the CRD is served")
}

// TestMigrationSetsTheDigestOfEarlierRecords: the records an earlier
// release wrote with a short hash alone get the whole digest of their
// data, once, so that the Index knows their content; a record whose data
// does not match its hash label is left alone.
func TestMigrationSetsTheDigestOfEarlierRecords(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	for i := 1; i <= 3; i++ {
		kcp := kcpAt(fmt.Sprintf("v1.35.%d", i), i)
		cr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, mustSnap(t, kcp), revisions.Record{Revision: int64(i), History: []int64{int64(i)}})
		if i < 3 {
			cr = earlierRelease(cr)
		}
		objs = append(objs, cr)
	}
	damaged := earlierRelease(revisions.RolloutRevision(kcpAt("v1.36.0", 4), kinds.KubeadmControlPlane.GVK, mustSnap(t, kcpAt("v1.36.0", 4)), revisions.Record{Revision: 4}))
	damaged.Data.Raw = []byte(`{"version":"v1.30.0"}`)
	objs = append(objs, damaged)
	s := runtime.NewScheme()
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()

	m := Migration{Client: c, Reader: c, Recorder: &Recorder{Client: c, Reader: c}}
	n, err := m.setDigests(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the two earlier records")
	n, err = m.setDigests(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a second run sets nothing")

	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(ctx, list))
	for i := range list.Items {
		cr := &list.Items[i]
		if cr.Name == damaged.Name {
			assert.NotContains(t, cr.Annotations, revisions.AnnotationDigest, "a damaged record is not vouched for")
			continue
		}
		whole, err := revisions.FromRolloutRevision(cr)
		require.NoError(t, err)
		meta, err := revisions.FromMetadata(cr)
		require.NoError(t, err, "the Index can read it")
		assert.Equal(t, whole.Snapshot.Hash, meta.Snapshot.Hash, cr.Name)
	}
}
