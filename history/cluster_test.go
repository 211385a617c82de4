package history

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// ownedBy gives kcp the owner reference to Cluster name that Cluster
// API's Cluster controller sets, and a cluster-name label.
func ownedBy(kcp client.Object, name, label string) {
	kcp.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: "uid-" + "c"}})
	if label != "" {
		kcp.SetLabels(map[string]string{clusterv1.ClusterNameLabel: label})
	}
}

// A control plane's records name its Cluster as the stored object does
// (its owner, whatever its label says), and what each revision runs; the
// Cluster a record names never changes after, whatever the control plane's
// label or owner later say.
func TestRecordsNameTheirCluster(t *testing.T) {
	ctx := context.Background()
	a, b := kcpAt("v1.34.3", 1), kcpAt("v1.35.2", 2)
	ownedBy(a, "demo", "nope")
	ownedBy(b, "demo", "nope")
	snapA, err := revisions.ForKubeadmControlPlane(a)
	require.NoError(t, err)
	snapB, err := revisions.ForKubeadmControlPlane(b)
	require.NoError(t, err)
	server := fakeWithIndex(t)
	r := &Recorder{Client: server, Reader: server}
	require.NoError(t, r.Record(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "alice"}))

	stored := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: revisions.Name("cp", snapA.Hash)}, stored))
	assert.Equal(t, "demo", stored.Labels[revisions.LabelCluster], "its owner Cluster, not its label")
	assert.Equal(t, "v1.34.3 etcd 3.6.5", stored.Annotations[revisions.AnnotationRun])

	// Re-pointed (owner and label) and recorded again, from the API
	// server and from the Index: the record keeps its Cluster; a new
	// record names the new one.
	ownedBy(a, "other", "other")
	ownedBy(b, "other", "other")
	require.NoError(t, r.Record(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 3, History: []int64{3}, ChangedBy: "bob"}))
	fromIndex := &Recorder{Client: server, Reader: server, Index: indexOver(server)}
	require.NoError(t, fromIndex.Record(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "carol"}))
	require.NoError(t, server.Get(ctx, client.ObjectKeyFromObject(stored), stored))
	assert.Equal(t, "demo", stored.Labels[revisions.LabelCluster], "a record's Cluster never moves")
	assert.Equal(t, "4", stored.Annotations[revisions.AnnotationRevision], "the record was updated")
	require.NoError(t, r.Record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, revisions.Record{Revision: 5, History: []int64{5}, ChangedBy: "dave"}))
	storedB := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: revisions.Name("cp", snapB.Hash)}, storedB))
	assert.Equal(t, "other", storedB.Labels[revisions.LabelCluster])
}

// A record made while its control plane named no Cluster gets one when it
// is recorded again and the control plane names one; a worker pool's
// records name none.
func TestRecordNamesItsClusterOnceKnown(t *testing.T) {
	ctx := context.Background()
	a := kcpAt("v1.34.3", 1)
	snapA, err := revisions.ForKubeadmControlPlane(a)
	require.NoError(t, err)
	server := fakeWithIndex(t)
	r := &Recorder{Client: server, Reader: server, Index: indexOver(server)}
	require.NoError(t, r.Record(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 1, History: []int64{1}}))
	stored := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: revisions.Name("cp", snapA.Hash)}, stored))
	assert.NotContains(t, stored.Labels, revisions.LabelCluster)

	ownedBy(a, "demo", "")
	fresh := &Recorder{Client: server, Reader: server, Index: indexOver(server)}
	held, err := fresh.holds(ctx, a, kinds.KubeadmControlPlane.GVK, snapA.Hash, revisions.Record{Revision: 1, History: []int64{1}})
	require.NoError(t, err)
	assert.False(t, held, "a record without the Cluster its control plane now names is not as it should be")
	require.NoError(t, fresh.Record(ctx, a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 1, History: []int64{1}}))
	require.NoError(t, server.Get(ctx, client.ObjectKeyFromObject(stored), stored))
	assert.Equal(t, "demo", stored.Labels[revisions.LabelCluster])
	held, err = fresh.holds(ctx, a, kinds.KubeadmControlPlane.GVK, snapA.Hash, revisions.Record{Revision: 1, History: []int64{1}})
	require.NoError(t, err)
	assert.True(t, held, "then it holds, its run read from its metadata")
}

// The Index finds what a Cluster's control planes ran by the Cluster its
// records name, whatever their owners (a control plane deleted with
// --cascade=orphan leaves records with a dead owner UID), and only in
// their namespace; the API server's List finds the same.
func TestIndexFindsAClustersRuns(t *testing.T) {
	ctx := context.Background()
	record := func(ns, owner, uid, cluster, version string) *rgv1alpha1.RolloutRevision {
		kcp := kcpAt(version, 1)
		kcp.Namespace, kcp.Name, kcp.UID = ns, owner, types.UID("6f1c2a7e-0b1d-4c55-9a3e-00000000000"+uid)
		snap, err := revisions.ForKubeadmControlPlane(kcp)
		require.NoError(t, err)
		cr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 1, History: []int64{1}})
		if cluster != "" {
			cr.Labels[revisions.LabelCluster] = cluster
		}
		cr.OwnerReferences = nil // orphaned
		return cr
	}
	all := []*rgv1alpha1.RolloutRevision{
		record("ns", "demo-cp", "1", "demo", "v1.34.3"),
		record("ns", "demo-cp-old", "2", "demo", "v1.33.7"),
		record("ns", "demo2-cp", "3", "demo2", "v1.36.1"),  // a Cluster whose name begins alike
		record("other", "demo-cp", "4", "demo", "v1.36.1"), // another namespace
		record("ns", "earlier", "5", "", "v1.36.1"),        // an earlier release's: no Cluster
	}
	store := &recordStore{}
	var objs []client.Object
	var list []any
	for _, cr := range all {
		objs = append(objs, cr)
		list = append(list, &metav1.PartialObjectMetadata{ObjectMeta: *cr.ObjectMeta.DeepCopy()})
	}
	require.NoError(t, store.Replace(list, "1"))
	index := &Index{entries: storeEntries{store}, synced: store.synced.Load}
	runs, ok := index.ClusterRuns(ctx, "ns", "demo")
	require.True(t, ok)
	var got []string
	for _, r := range runs {
		got = append(got, revisions.FormatRun(r.Run))
	}
	assert.ElementsMatch(t, []string{"v1.34.3 etcd 3.6.5", "v1.33.7 etcd 3.5.24"}, got)

	server := fakeWithIndex(t, objs...)
	listed, err := ListClusterRuns(ctx, server, "ns", "demo")
	require.NoError(t, err)
	assert.ElementsMatch(t, runs, listed, "the API server's List finds the same")

	_, ok = (&Index{entries: storeEntries{&recordStore{}}, synced: func() bool { return false }}).ClusterRuns(ctx, "ns", "demo")
	assert.False(t, ok, "an Index not filled cannot answer")
	via, err := ClusterHistory{Index: nil, Reader: server}.ClusterRuns(ctx, "ns", "demo")
	require.NoError(t, err)
	assert.ElementsMatch(t, runs, via, "without an Index, from the API server")
}

// At start, the records an earlier release made of a control plane that
// still exists are given its Cluster, as stored, and their runs; an
// orphaned record (its control plane gone) and a worker pool's are left
// alone, and a second run sets nothing.
func TestMigrationNamesTheClusterOfEarlierRecords(t *testing.T) {
	ctx := context.Background()
	live := kcpAt("v1.34.3", 2)
	ownedBy(live, "demo", "nope")
	earlier := func(kcp *controlplanev1.KubeadmControlPlane, n int64) *rgv1alpha1.RolloutRevision {
		cr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, mustSnap(t, kcp), revisions.Record{Revision: n, History: []int64{n}})
		delete(cr.Annotations, revisions.AnnotationRun) // as an earlier release wrote it
		return cr
	}
	older := kcpAt("v1.33.7", 1)
	ownedBy(older, "demo", "nope")
	rec1, rec2 := earlier(older, 1), earlier(live, 2)
	gone := kcpAt("v1.35.2", 3)
	gone.Name, gone.UID = "gone", "uid-gone"
	orphan := earlier(gone, 3)
	orphan.OwnerReferences = nil
	server := fakeWithIndex(t, live, rec1, rec2, orphan)
	m := Migration{Client: server, Reader: server}
	n, err := m.setClusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the two records of the live control plane")
	n, err = m.setClusters(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a second run sets nothing")

	runs, err := ListClusterRuns(ctx, server, "ns", "demo")
	require.NoError(t, err)
	var got []string
	for _, r := range runs {
		got = append(got, revisions.FormatRun(r.Run))
	}
	assert.ElementsMatch(t, []string{"v1.33.7 etcd 3.5.24", "v1.34.3 etcd 3.6.5"}, got, "named after the owner, not the label")
	stored := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKeyFromObject(orphan), stored))
	assert.NotContains(t, stored.Labels, revisions.LabelCluster, "an orphaned record's Cluster is not known")
}
