package history

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// The reconciler's pruning is pure bookkeeping over a list of records: these
// tests run it against an in-memory client. test/e2e checks recording against
// a real API server.

func kcpAt(version string, revision int) *controlplanev1.KubeadmControlPlane {
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", UID: types.UID("uid-cp"),
			Annotations: map[string]string{revisions.AnnotationRevision: fmt.Sprint(revision)}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Version: version},
	}
	return kcp
}

func TestReconcilerRecordsLiveAndPrunes(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))

	// History: 25 revisions; revision 3 ran v1.36 (the highest), the others v1.35.x.
	var objs []runtime.Object
	for i := 1; i <= 25; i++ {
		version := fmt.Sprintf("v1.35.%d", i)
		if i == 3 {
			version = "v1.36.0"
		}
		old := kcpAt(version, i)
		snap, err := revisions.ForKubeadmControlPlane(old)
		require.NoError(t, err)
		objs = append(objs, revisions.RolloutRevision(old, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: int64(i), History: []int64{int64(i)}}))
	}
	live := kcpAt("v1.35.99", 26)
	objs = append(objs, live)
	c := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(objs...).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane, Limit: 10}

	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
	require.NoError(t, err)

	revs, bad, err := List(context.Background(), c, "ns", "uid-cp")
	require.NoError(t, err)
	require.Empty(t, bad)
	var numbers []int64
	for _, rev := range revs {
		numbers = append(numbers, rev.Record.Revision)
	}
	// Kept: the live revision 26, revision 3 (highest Kubernetes and etcd run),
	// and the newest others up to the limit of 10.
	assert.Equal(t, []int64{3, 18, 19, 20, 21, 22, 23, 24, 25, 26}, numbers)
}

func TestReconcilerAdoptsAnUnstampedObject(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	kcp := kcpAt("v1.35.1", 0)
	kcp.Annotations = nil
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(kcp).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
	require.NoError(t, err)
	revs, _, err := List(context.Background(), c, "ns", "uid-cp")
	require.NoError(t, err)
	require.Len(t, revs, 1)
	assert.EqualValues(t, 1, revs[0].Record.Revision)
	assert.Equal(t, revisions.ChangeAdopted, revs[0].Record.ChangeType)

	// Reconciling again changes nothing.
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
	require.NoError(t, err)
	again, _, err := List(context.Background(), c, "ns", "uid-cp")
	require.NoError(t, err)
	assert.Equal(t, revs, again)
}

// TestReconcilerPrunesFromTheIndex: with an Index, pruning a
// MachineDeployment's history needs no List (its revisions run no control
// plane, so their data is not needed), while a control plane's history is
// listed whole once, to keep the revision that raised its highest version;
// both are pruned to the limit exactly as from a whole List, in one
// DeleteCollection request — and not before the history holds PruneBatch
// revisions beyond the limit.
func TestReconcilerPrunesFromTheIndex(t *testing.T) {
	all := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	for _, tc := range []struct {
		kind       kinds.Kind
		batch      int
		wantLists  int
		wantDelete int
		want       []int64
	}{
		{kind: kinds.MachineDeployment, batch: 3, wantLists: 0, wantDelete: 1, want: []int64{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{kind: kinds.KubeadmControlPlane, batch: 3, wantLists: 1, wantDelete: 1, want: []int64{3, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{kind: kinds.MachineDeployment, batch: 4, wantLists: 0, wantDelete: 0, want: all},
		{kind: kinds.KubeadmControlPlane, batch: 4, wantLists: 0, wantDelete: 0, want: all},
		{kind: kinds.MachineDeployment, batch: 1, wantLists: 0, wantDelete: 1, want: []int64{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
	} {
		t.Run(fmt.Sprintf("%s batch %d", tc.kind.GVK.Kind, tc.batch), func(t *testing.T) {
			var objs []client.Object
			var live client.Object
			for i := 1; i <= 13; i++ {
				var obj client.Object
				var snap revisions.Snapshot
				var err error
				if tc.kind.GVK.Kind == "MachineDeployment" {
					md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", UID: types.UID("uid-cp"),
						Annotations: map[string]string{revisions.AnnotationRevision: fmt.Sprint(i)}}}
					md.Spec.Template.Spec.Version = fmt.Sprintf("v1.35.%d", i)
					obj = md
					snap, err = revisions.ForMachineDeployment(md)
				} else {
					version := fmt.Sprintf("v1.35.%d", i)
					if i == 3 {
						version = "v1.36.0" // the highest run: kept
					}
					kcp := kcpAt(version, i)
					obj = kcp
					snap, err = revisions.ForKubeadmControlPlane(kcp)
				}
				require.NoError(t, err)
				if i == 13 {
					live = obj // recorded by the reconcile below
					continue
				}
				objs = append(objs, revisions.RolloutRevision(obj, tc.kind.GVK, snap, revisions.Record{Revision: int64(i), History: []int64{int64(i)}}))
			}
			server := fakeWithIndex(t, append(objs, live)...)
			n := requests{}
			c := counting(server, n)
			r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c, Index: indexOver(server)}, Kind: tc.kind, Limit: 10, PruneBatch: tc.batch}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
			require.NoError(t, err)
			assert.Equal(t, tc.wantLists, n["list"], "Lists of RolloutRevisions")
			assert.Equal(t, tc.wantDelete, n["deletecollection"], "DeleteCollections of RolloutRevisions")
			assert.Zero(t, n["delete"], "single deletes")
			assert.Equal(t, 1, n["create"], "the live revision recorded")
			revs, _, err := List(context.Background(), server, "ns", "uid-cp")
			require.NoError(t, err)
			var numbers []int64
			for _, rev := range revs {
				numbers = append(numbers, rev.Record.Revision)
			}
			assert.Equal(t, tc.want, numbers)
		})
	}
}

// TestReconcilerReadsTheObjectFromObjectReader: a control plane cached
// without its kubeadmConfigSpec is recorded as the API server holds it,
// whole, when the reconciler reads objects from there (ObjectReader); read
// from the cache, the record would be of content no machine runs.
func TestReconcilerReadsTheObjectFromObjectReader(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	whole := kcpAt("v1.35.2", 4)
	whole.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{"sysctl --system"}
	whole.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.5-0"
	cachedCopy := whole.DeepCopy()
	cachedCopy.Spec.KubeadmConfigSpec.PreKubeadmCommands = nil
	wholeSnap, err := revisions.ForKubeadmControlPlane(whole)
	require.NoError(t, err)
	cachedSnap, err := revisions.ForKubeadmControlPlane(cachedCopy)
	require.NoError(t, err)
	require.NotEqual(t, wholeSnap.Hash, cachedSnap.Hash)

	for _, tc := range []struct {
		name     string
		fromLive bool
		want     string
	}{
		{"from the API server", true, wholeSnap.Hash},
		{"from the cache", false, cachedSnap.Hash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := fake.NewClientBuilder().WithScheme(s).WithObjects(whole.DeepCopy()).Build()
			cache := fake.NewClientBuilder().WithScheme(s).WithObjects(cachedCopy.DeepCopy()).Build()
			r := &Reconciler{Client: cache, APIReader: live, Recorder: &Recorder{Client: live, Reader: live}, Kind: kinds.KubeadmControlPlane}
			if tc.fromLive {
				r.ObjectReader = live
			}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
			require.NoError(t, err)
			revs, bad, err := List(context.Background(), live, "ns", "uid-cp")
			require.NoError(t, err)
			require.Empty(t, bad)
			require.Len(t, revs, 1)
			assert.Equal(t, tc.want, revs[0].Snapshot.Hash)
			assert.Equal(t, int64(4), revs[0].Record.Revision)
		})
	}
}

// TestReconcilerWaitsForTheIndex: a reconcile that starts before the
// revision Index has filled waits for it, and then reads no history from
// the API server; one whose context ends while it waits records nothing.
func TestReconcilerWaitsForTheIndex(t *testing.T) {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md", UID: types.UID("uid-md"),
		Annotations: map[string]string{revisions.AnnotationRevision: "2"}}}
	md.Spec.Template.Spec.Version = "v1.35.2"
	old := md.DeepCopy()
	old.Spec.Template.Spec.Version = "v1.35.1"
	snap, err := revisions.ForMachineDeployment(old)
	require.NoError(t, err)
	recorded := revisions.RolloutRevision(old, kinds.MachineDeployment.GVK, snap, revisions.Record{Revision: 1, History: []int64{1}})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "md"}}

	t.Run("filled while it waits", func(t *testing.T) {
		server := fakeWithIndex(t, md.DeepCopy(), recorded.DeepCopy())
		n := requests{}
		c := counting(server, n)
		index := indexOver(server)
		var filled atomic.Bool
		index.synced = filled.Load
		time.AfterFunc(300*time.Millisecond, func() { filled.Store(true) })
		r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c, Index: index}, Kind: kinds.MachineDeployment}
		_, err := r.Reconcile(context.Background(), req)
		require.NoError(t, err)
		assert.True(t, filled.Load())
		assert.Equal(t, requests{"get": 1, "create": 1}, n, "the object read, its live revision created, no history read from the API server")
	})
	t.Run("context ends first", func(t *testing.T) {
		server := fakeWithIndex(t, md.DeepCopy(), recorded.DeepCopy())
		n := requests{}
		c := counting(server, n)
		index := indexOver(server)
		index.synced = func() bool { return false }
		r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c, Index: index}, Kind: kinds.MachineDeployment}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := r.Reconcile(ctx, req)
		require.ErrorContains(t, err, "waiting for the revision index to fill")
		assert.Empty(t, n, "nothing read or written")
	})
}

// TestReconcilerKnowsRecordedContentByItsCachedHash: an object the cache
// keeps without all of its revision content (a reconciler with an
// ObjectReader) carries the hash of that content in its cached copy. When
// the content's record already holds the object's stamps, reconciling it
// sends no request at all — the guard's start, with every object recorded,
// reads none of them again; otherwise the whole object is read and its
// content recorded, never the trimmed copy's. A reconciler that reads the
// cache whole ignores the note.
func TestReconcilerKnowsRecordedContentByItsCachedHash(t *testing.T) {
	whole := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md", UID: types.UID("uid-md"), ResourceVersion: "7",
		Annotations: map[string]string{revisions.AnnotationRevision: "2", revisions.AnnotationChangedBy: "alice"}}}
	whole.Spec.ClusterName = "c1"
	whole.Spec.Template.Spec.Version = "v1.35.2"
	whole.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "md-2"}
	wholeSnap, err := revisions.ForMachineDeployment(whole)
	require.NoError(t, err)
	stamps, err := revisions.RecordFromAnnotations(whole.Annotations)
	require.NoError(t, err)
	trimmed := func(hash string) *clusterv1.MachineDeployment {
		c := whole.DeepCopy()
		c.Spec = clusterv1.MachineDeploymentSpec{ClusterName: "c1"}
		c.Spec.Template.Spec.Version = "v1.35.2"
		if hash != "" {
			c.Annotations[AnnotationCachedHash] = CachedHashValue(hash)
		}
		return c
	}
	trimmedSnap, err := revisions.ForMachineDeployment(trimmed(""))
	require.NoError(t, err)
	require.NotEqual(t, wholeSnap.Hash, trimmedSnap.Hash)
	asStamped := revisions.RolloutRevision(whole, kinds.MachineDeployment.GVK, wholeSnap, stamps)
	asOne := revisions.RolloutRevision(whole, kinds.MachineDeployment.GVK, wholeSnap, revisions.Record{Revision: 1, History: []int64{1}})
	other := whole.DeepCopy()
	other.Spec.Template.Spec.Version = "v1.35.1"
	otherSnap, err := revisions.ForMachineDeployment(other)
	require.NoError(t, err)
	// Other content recorded under the number the object's stamps give:
	// were the note read, the record would hold the stamps and nothing be
	// sent; read whole, the live content is recorded, numbered above it
	// (3) as content the guard did not admit — the number and the mark on
	// the other record are the reads and writes of that.
	otherRecorded := revisions.RolloutRevision(other, kinds.MachineDeployment.GVK, otherSnap, stamps)

	for _, tc := range []struct {
		name       string
		cached     *clusterv1.MachineDeployment
		recorded   []client.Object
		wholeCache bool // the reconciler reads the cache whole: no ObjectReader
		want       requests
		wantNumber []int64 // the numbers the whole content's record then holds
		kept       *revisions.Snapshot
		stillKept  int // objects whose content Pending holds afterwards
	}{
		{"recorded as stamped: nothing sent", trimmed(wholeSnap.Hash), []client.Object{asStamped}, false, requests{}, []int64{2}, nil, 0},
		{"not recorded: read whole and recorded", trimmed(wholeSnap.Hash), nil, false, requests{"get": 1, "create": 1}, []int64{2}, nil, 0},
		{"recorded under another number: read whole and renumbered", trimmed(wholeSnap.Hash), []client.Object{asOne}, false, requests{"get": 1, "patch": 1}, []int64{1, 2}, nil, 0},
		{"no hash noted: read whole", trimmed(""), []client.Object{asStamped}, false, requests{"get": 1}, []int64{2}, nil, 0},
		{"a note this cache did not write: read whole", func() *clusterv1.MachineDeployment {
			c := trimmed("")
			c.Annotations[AnnotationCachedHash] = wholeSnap.Hash
			return c
		}(), []client.Object{asStamped}, false, requests{"get": 1}, []int64{2}, nil, 0},
		{"cache read whole: the note is not read", func() *clusterv1.MachineDeployment {
			c := whole.DeepCopy()
			c.Annotations[AnnotationCachedHash] = CachedHashValue(otherSnap.Hash)
			return c
		}(), []client.Object{otherRecorded}, true, requests{"create": 1, "get": 2, "update": 1}, []int64{3}, nil, 0},
		{"not recorded, the content the cache saw kept: recorded from it, nothing read", trimmed(wholeSnap.Hash), nil, false, requests{"create": 1}, []int64{2}, &wholeSnap, 0},
		{"recorded under another number, its content kept: renumbered, nothing read", trimmed(wholeSnap.Hash), []client.Object{asOne}, false, requests{"patch": 1}, []int64{1, 2}, &wholeSnap, 0},
		{"recorded as stamped, its content kept: nothing sent, and forgotten", trimmed(wholeSnap.Hash), []client.Object{asStamped}, false, requests{}, []int64{2}, &wholeSnap, 0},
		{"other content kept (a later change): read whole, the other kept", trimmed(wholeSnap.Hash), nil, false, requests{"get": 1, "create": 1}, []int64{2}, &otherSnap, 1},
		{"kept, but the note is not this cache's: read whole", func() *clusterv1.MachineDeployment {
			c := trimmed("")
			c.Annotations[AnnotationCachedHash] = wholeSnap.Hash
			return c
		}(), nil, false, requests{"get": 1, "create": 1}, []int64{2}, &wholeSnap, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := fakeWithIndex(t, append([]client.Object{whole.DeepCopy()}, tc.recorded...)...)
			n := requests{}
			c := counting(server, n)
			cache := fakeWithIndex(t, tc.cached.DeepCopy())
			r := &Reconciler{Client: cache, APIReader: c, Recorder: &Recorder{Client: c, Reader: c, Index: indexOver(server)}, Kind: kinds.MachineDeployment}
			if !tc.wholeCache {
				r.ObjectReader = c
			}
			if tc.kept != nil {
				r.Pending = NewPending(0)
				r.Pending.Keep(whole, *tc.kept)
			}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "md"}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
			assert.Equal(t, tc.stillKept, r.Pending.Len(), "objects whose content is still kept")
			revs, bad, err := List(context.Background(), server, "ns", "uid-md")
			require.NoError(t, err)
			require.Empty(t, bad)
			var held []int64
			for _, rev := range revs {
				assert.NotEqual(t, trimmedSnap.Hash, rev.Snapshot.Hash, "the trimmed copy's content recorded")
				if rev.Snapshot.Hash == wholeSnap.Hash {
					held = rev.Record.History
				}
			}
			assert.Equal(t, tc.wantNumber, held)
		})
	}
}

// TestReconcilerRecordsTheStampedRestart: a restart is recorded from the
// object as stored, its restart stamp (revisions.AnnotationRestart), onto
// the live revision; reconciling again changes nothing.
func TestReconcilerRecordsTheStampedRestart(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	kcp := kcpAt("v1.35.1", 3)
	restart := revisions.Restart{At: time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC), By: "alice", After: "2031-05-06T07:08:09Z"}
	stamp, err := revisions.RestartStamp(restart)
	require.NoError(t, err)
	kcp.Annotations[revisions.AnnotationRestart] = stamp
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(kcp).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}}
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	revs, _, err := List(context.Background(), c, "ns", "uid-cp")
	require.NoError(t, err)
	require.Len(t, revs, 1)
	assert.EqualValues(t, 3, revs[0].Record.Revision)
	assert.Equal(t, []revisions.Restart{restart}, revs[0].Record.Restarts)

	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	again, _, err := List(context.Background(), c, "ns", "uid-cp")
	require.NoError(t, err)
	assert.Equal(t, revs, again)
}

// TestReconcilerLeavesATerminatingNamespaceAlone: where the API server
// refuses new history because the namespace is being deleted, the
// reconciler gives up quietly (the deletion takes the object with it);
// any other refusal, such as a missing right, is still an error, retried.
func TestReconcilerLeavesATerminatingNamespaceAlone(t *testing.T) {
	terminating := apierrors.NewForbidden(appsv1.Resource("rolloutrevisions"), "cp-1",
		fmt.Errorf("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
	missingRight := apierrors.NewForbidden(appsv1.Resource("rolloutrevisions"), "cp-1",
		fmt.Errorf(`User "guard" cannot create resource "rolloutrevisions"`))
	cases := []struct {
		name    string
		refusal error
		wantErr bool
	}{
		{name: "the namespace is being deleted", refusal: terminating},
		{name: "a right is missing", refusal: missingRight, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, controlplanev1.AddToScheme(s))
			require.NoError(t, rgv1alpha1.AddToScheme(s))
			creates := 0
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(kcpAt("v1.35.1", 0)).
				WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*rgv1alpha1.RolloutRevision); ok {
						creates++
						return tc.refusal
					}
					return c.Create(ctx, obj, opts...)
				}}).Build()
			r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}})
			assert.Equal(t, 1, creates, "the reconciler tried to record the revision")
			if tc.wantErr {
				require.Error(t, err)
				assert.True(t, apierrors.IsForbidden(err), "error: %v", err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// TestReconcilerWaitsWhileTheClusterIsPaused: the live revision of an object
// whose Cluster is paused (as clusterctl keeps it while it moves or restores
// the cluster) is not recorded, and the reconciler looks again later; once
// the Cluster is unpaused it is.
func TestReconcilerWaitsWhileTheClusterIsPaused(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	live := kcpAt("v1.35.2", 4)
	live.Labels = map[string]string{clusterv1.ClusterNameLabel: "c1"}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(live, cluster).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.KubeadmControlPlane}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cp"}}

	res, err := r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, PausedRecheck, res.RequeueAfter, "looks again later")
	revs, _, err := List(ctx, c, "ns", "uid-cp")
	require.NoError(t, err)
	assert.Empty(t, revs, "recorded while the Cluster is paused")

	cluster.Spec.Paused = ptr.To(false)
	require.NoError(t, c.Update(ctx, cluster))
	res, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
	revs, _, err = List(ctx, c, "ns", "uid-cp")
	require.NoError(t, err)
	require.Len(t, revs, 1, "recorded once the Cluster is unpaused")
	assert.Equal(t, int64(4), revs[0].Record.Revision)
}

// TestReconcilerRecordsTopologiesOnly: a topology Cluster's live topology
// is recorded, owned by the Cluster; a Cluster without a topology has no
// revisions, so nothing is recorded of it.
func TestReconcilerRecordsTopologiesOnly(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	withTopology := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cc", UID: "uid-cc"}}
	withTopology.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "demo-class"}, Version: "v1.35.2"}
	plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "uid-plain"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(withTopology, plain).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: &Recorder{Client: c, Reader: c}, Kind: kinds.Cluster}
	for _, name := range []string{"cc", "plain"} {
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
		require.NoError(t, err)
	}
	revs, _, err := List(context.Background(), c, "ns", "uid-cc")
	require.NoError(t, err)
	require.Len(t, revs, 1)
	assert.Equal(t, revisions.KindCluster, revs[0].Snapshot.Kind)
	assert.Equal(t, revisions.ChangeAdopted, revs[0].Record.ChangeType)
	revs, _, err = List(context.Background(), c, "ns", "uid-plain")
	require.NoError(t, err)
	assert.Empty(t, revs)
}
