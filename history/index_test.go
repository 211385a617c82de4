package history

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// fakeWithIndex returns a fake API server holding objs, with the owner
// index the revision Index uses.
func fakeWithIndex(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&rgv1alpha1.RolloutRevision{}, revisions.LabelOwnerUID, func(obj client.Object) []string {
			return []string{obj.GetLabels()[revisions.LabelOwnerUID]}
		}).Build()
}

// indexOver is an Index that reads c through the Index's own conversion
// (recordStore), always filled: as the reflector of a guard that missed no event.
func indexOver(c client.Reader) *Index {
	return &Index{entries: readerStore{c}, synced: func() bool { return true }}
}

// readerStore is an entryStore that reads the RolloutRevisions of a
// client and keeps each as the Index's store does.
type readerStore struct{ reader client.Reader }

func (s readerStore) byOwner(namespace, ownerUID string) ([]*metav1.PartialObjectMetadata, error) {
	list := &rgv1alpha1.RolloutRevisionList{}
	if err := s.reader.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{revisions.LabelOwnerUID: ownerUID}); err != nil {
		return nil, err
	}
	var out []*metav1.PartialObjectMetadata
	for n := range list.Items {
		out = append(out, entryOf(&list.Items[n]))
	}
	return out, nil
}

func (s readerStore) get(namespace, name string) (*metav1.PartialObjectMetadata, error) {
	cr := &rgv1alpha1.RolloutRevision{}
	if err := s.reader.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cr); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return entryOf(cr), nil
}

// entryOf is the metadata of cr as the Index's store keeps and gives it
// back.
func entryOf(cr *rgv1alpha1.RolloutRevision) *metav1.PartialObjectMetadata {
	s := &recordStore{}
	if err := s.Add(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rollout-guard.io/v1alpha1", Kind: "RolloutRevision"}, ObjectMeta: *cr.ObjectMeta.DeepCopy()}); err != nil {
		panic(err)
	}
	out, _ := s.get(cr.Namespace, cr.Name)
	return out
}

// fixedStore is an entryStore holding one record.
type fixedStore struct{ entry *metav1.PartialObjectMetadata }

func (s fixedStore) byOwner(namespace, ownerUID string) ([]*metav1.PartialObjectMetadata, error) {
	if s.entry.Namespace == namespace && s.entry.Labels[revisions.LabelOwnerUID] == ownerUID {
		return []*metav1.PartialObjectMetadata{s.entry}, nil
	}
	return nil, nil
}

func (s fixedStore) get(namespace, name string) (*metav1.PartialObjectMetadata, error) {
	if s.entry.Namespace == namespace && s.entry.Name == name {
		return s.entry, nil
	}
	return nil, nil
}

// requests counts the requests a client sends, by verb.
type requests map[string]int

func counting(c client.WithWatch, n requests) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n["get"]++
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n["list"]++
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n["create"]++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			n["update"]++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			n["patch"]++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			n["delete"]++
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			n["deletecollection"]++
			return c.DeleteAllOf(ctx, obj, opts...)
		},
	})
}

// TestIndexListsAsAListOfWholeRevisions: the Index gives an object's
// history as a List of whole RolloutRevisions does — same names,
// numbers, records and hashes, in the same order — without the data; and
// nothing before it is filled. Both read a fake client here; the same
// comparison with kube-apiserver is test/e2e's TestIndexListsAsTheAPIServer.
func TestIndexListsAsAListOfWholeRevisions(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	for i, v := range []string{"v1.35.1", "v1.35.2", "v1.36.0"} {
		kcp := kcpAt(v, i+1)
		snap, err := revisions.ForKubeadmControlPlane(kcp)
		require.NoError(t, err)
		n := int64(i + 1)
		objs = append(objs, revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap,
			revisions.Record{Revision: n, History: []int64{n}, ChangedBy: "alice", ChangedAt: time.Date(2026, 3, 1, 10, i, 0, 0, time.UTC)}))
	}
	other := kcpAt("v1.35.1", 1)
	other.Name, other.UID = "cp-other", "uid-other"
	snap, err := revisions.ForKubeadmControlPlane(other)
	require.NoError(t, err)
	objs = append(objs, revisions.RolloutRevision(other, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 1}))
	c := fakeWithIndex(t, objs...)

	whole, bad, err := List(ctx, c, "ns", "uid-cp")
	require.NoError(t, err)
	require.Empty(t, bad)
	fromIndex, ok, err := indexOver(c).List(ctx, "ns", "uid-cp")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, fromIndex, 3)
	for i := range whole {
		assert.Equal(t, whole[i].Name, fromIndex[i].Name)
		assert.Equal(t, whole[i].Record, fromIndex[i].Record)
		assert.Equal(t, whole[i].Snapshot.Hash, fromIndex[i].Snapshot.Hash)
		assert.Empty(t, fromIndex[i].Snapshot.Data)
	}

	empty := &Index{entries: readerStore{c}, synced: func() bool { return false }}
	_, ok, err = empty.List(ctx, "ns", "uid-cp")
	require.NoError(t, err)
	assert.False(t, ok, "an Index not filled yet does not answer")
	var none *Index
	assert.False(t, none.Synced())
}

// TestRecordingFromTheIndex counts the requests recording costs with an
// Index: a new revision is one create (no read), a revision recorded as
// asked costs nothing, a record to extend is one patch; an Index that is
// behind (it misses a record just made) costs a failed create and the
// reads of before, and loses nothing.
func TestRecordingFromTheIndex(t *testing.T) {
	ctx := context.Background()
	a, b := kcpAt("v1.35.2", 1), kcpAt("v1.36.0", 2)
	snapA, err := revisions.ForKubeadmControlPlane(a)
	require.NoError(t, err)
	snapB, err := revisions.ForKubeadmControlPlane(b)
	require.NoError(t, err)
	server := fakeWithIndex(t, revisions.RolloutRevision(a, kinds.KubeadmControlPlane.GVK, snapA, revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "alice"}))
	n := requests{}
	r := &Recorder{Client: counting(server, n), Reader: counting(server, n), Index: indexOver(server)}

	// The reconciler records B, stamped 2, as it becomes live.
	recB := revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "bob"}
	done, err := r.record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, recB)
	require.NoError(t, err)
	assert.Equal(t, requests{"create": 1}, n, "a new revision is one create")
	assert.Equal(t, int64(2), done.listedHighest(), "numbering saw the history, from the Index")

	// The next admission records B as replaced: recorded already (a fresh
	// Recorder, so no memo spares the look).
	clear(n)
	fresh := &Recorder{Client: counting(server, n), Reader: counting(server, n), Index: indexOver(server)}
	highest, err := fresh.RecordReplaced(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, recB)
	require.NoError(t, err)
	assert.Equal(t, int64(2), highest)
	assert.Empty(t, n, "a revision recorded as asked costs no request")

	// A restart of B extends its record: one patch.
	restart := recB
	restart.Restarts = []revisions.Restart{{At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), By: "carol", After: "2026-03-01T12:00:00Z"}}
	require.NoError(t, fresh.Record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, restart))
	assert.Equal(t, requests{"patch": 1}, n)
	revs, _ := historyOf(t, server)
	require.Len(t, revs, 2)
	assert.Equal(t, restart.Restarts, revs[1].Record.Restarts, "the patch stored the restart")
	assert.Equal(t, "bob", revs[1].Record.ChangedBy, "and kept the record")
	assert.Equal(t, snapB.Data, revs[1].Snapshot.Data, "and the data")

	// An Index that is behind: it has not seen B's record.
	behind := fakeWithIndex(t)
	clear(n)
	late := &Recorder{Client: counting(server, n), Reader: counting(server, n), Index: indexOver(behind)}
	require.NoError(t, late.Record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, recB))
	assert.Equal(t, 1, n["create"], "the create fails: the record exists")
	assert.Equal(t, 1, n["get"], "then the record is read from the API server")
	revs, got := historyOf(t, server)
	assert.Equal(t, map[string][]int64{snapA.Hash: {1}, snapB.Hash: {2}}, got)
	assert.Equal(t, restart.Restarts, revs[1].Record.Restarts, "nothing lost")
}

// TestRecordFromTheIndexPatchesOnlyTheVersionItRead: a record changed since
// the Index read it is not overwritten: the patch carries the
// resourceVersion read, fails, and the record is read again and merged.
func TestRecordFromTheIndexPatchesOnlyTheVersionItRead(t *testing.T) {
	ctx := context.Background()
	b := kcpAt("v1.36.0", 2)
	snapB, err := revisions.ForKubeadmControlPlane(b)
	require.NoError(t, err)
	server := fakeWithIndex(t, revisions.RolloutRevision(b, kinds.KubeadmControlPlane.GVK, snapB, revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "bob"}))
	// The Index holds the record as it was; then another replica adds a restart.
	stale := fakeWithIndex(t, revisions.RolloutRevision(b, kinds.KubeadmControlPlane.GVK, snapB, revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "bob"}))
	cr := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: revisions.Name(b.Name, snapB.Hash)}, cr))
	cr.Annotations[revisions.AnnotationRestarts] = `[{"at":"2026-03-01T11:00:00Z","by":"dave","after":"2026-03-01T11:00:00Z"}]`
	require.NoError(t, server.Update(ctx, cr))
	staleCR := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, stale.Get(ctx, client.ObjectKeyFromObject(cr), staleCR))
	require.NotEqual(t, cr.ResourceVersion, staleCR.ResourceVersion, "the Index holds an older version")

	n := requests{}
	r := &Recorder{Client: counting(server, n), Reader: counting(server, n), Index: indexOver(stale)}
	restart := revisions.Record{Revision: 2, History: []int64{2}, Restarts: []revisions.Restart{{At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), By: "carol", After: "2026-03-01T12:00:00Z"}}}
	require.NoError(t, r.Record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, restart))
	assert.Equal(t, 1, n["patch"], "the patch of the version the Index read fails")
	assert.Equal(t, 1, n["update"], "the record read again is updated")
	revs, _ := historyOf(t, server)
	require.Len(t, revs, 1)
	var by []string
	for _, rs := range revs[0].Record.Restarts {
		by = append(by, rs.By)
	}
	assert.ElementsMatch(t, []string{"dave", "carol"}, by, "both restarts kept")
}

// TestIndexRecord: the Index keeps what it reads — the record decodes the
// same, name, namespace, resourceVersion, labels and every other
// annotation stay — and drops the rest, the refused break-glass attempts
// included.
func TestIndexRecord(t *testing.T) {
	b := kcpAt("v1.36.0", 2)
	snap, err := revisions.ForKubeadmControlPlane(b)
	require.NoError(t, err)
	cr := revisions.RolloutRevision(b, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 2, History: []int64{1, 2}, ChangedBy: "bob", FieldManager: "rollout",
		ChangeCause: "rollout kcp/cp --version v1.36.0", ChangeType: revisions.ChangeRollout, ChangedAt: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		Restarts: []revisions.Restart{{At: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC), By: "carol", After: "2026-03-01T11:00:00Z"}}})
	cr.Annotations[AnnotationRefusedOverrides] = `[{"at":"2026-03-01T12:00:00Z","by":"eve","reason":"x","rules":["EtcdDowngrade"]}]`
	cr.Annotations[AnnotationNumberedAbove] = "5"
	cr.ResourceVersion, cr.UID, cr.Finalizers = "42", "uid-cr", []string{"x"}
	in := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rollout-guard.io/v1alpha1", Kind: "RolloutRevision"}, ObjectMeta: *cr.ObjectMeta.DeepCopy()}

	out := entryOf(cr)
	want, err := revisions.FromMetadata(in)
	require.NoError(t, err)
	kept, err := revisions.FromMetadata(out)
	require.NoError(t, err)
	assert.Equal(t, want, kept, "the record, name, hash and resourceVersion")
	assert.Equal(t, cr.Namespace, out.Namespace)
	assert.Equal(t, cr.Labels, out.Labels)
	assert.Equal(t, "5", out.Annotations[AnnotationNumberedAbove])
	assert.NotContains(t, out.Annotations, AnnotationRefusedOverrides)
	wantAnnotations := maps.Clone(cr.Annotations)
	delete(wantAnnotations, AnnotationRefusedOverrides)
	assert.Equal(t, wantAnnotations, out.Annotations, "every other annotation as stored")
	assert.Empty(t, out.UID)
	assert.Empty(t, out.OwnerReferences)
	assert.Empty(t, out.Finalizers)
}

// TestRecordFromTheIndexKeepsWhatItDoesNotHold: a patch made from the
// Index's copy, which lacks the refused break-glass attempts, leaves them
// on the record.
func TestRecordFromTheIndexKeepsWhatItDoesNotHold(t *testing.T) {
	ctx := context.Background()
	b := kcpAt("v1.36.0", 2)
	snapB, err := revisions.ForKubeadmControlPlane(b)
	require.NoError(t, err)
	full := revisions.RolloutRevision(b, kinds.KubeadmControlPlane.GVK, snapB, revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "bob"})
	full.Annotations[AnnotationRefusedOverrides] = `[{"at":"2026-03-01T12:00:00Z","by":"eve","reason":"x","rules":["EtcdDowngrade"]}]`
	server := fakeWithIndex(t, full)
	// The Index's copy, at the same resourceVersion, without the attempts.
	stored := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKeyFromObject(full), stored))
	index := &Index{entries: fixedStore{entryOf(stored)}, synced: func() bool { return true }}

	n := requests{}
	r := &Recorder{Client: counting(server, n), Reader: counting(server, n), Index: index}
	restart := revisions.Record{Revision: 2, History: []int64{2}, Restarts: []revisions.Restart{{At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), By: "carol", After: "2026-03-01T12:00:00Z"}}}
	require.NoError(t, r.Record(ctx, b, kinds.KubeadmControlPlane.GVK, snapB, restart))
	assert.Equal(t, requests{"patch": 1}, n)
	after := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, server.Get(ctx, client.ObjectKeyFromObject(full), after))
	assert.Equal(t, full.Annotations[AnnotationRefusedOverrides], after.Annotations[AnnotationRefusedOverrides])
	assert.Contains(t, after.Annotations[revisions.AnnotationRestarts], "carol")
}
