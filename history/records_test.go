package history

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	toolscache "k8s.io/client-go/tools/cache"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

const (
	testUID  = "6f1c2a7e-0b1d-4c55-9a3e-000000000001"
	testHash = "0a1b2c3d4e"
	// testDigest is a whole digest whose short hash is testHash.
	testDigest = testHash + "00112233445566778899aabbccddeeff00112233445566778899aa"
	otherHash  = "5f6a7b8c9d"
)

// guardMeta is the metadata of a RolloutRevision as the guard writes it:
// revision n of owner uid named name, content hash.
func guardMeta(namespace, name, uid, hash, n, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: revisions.Name(name, hash), ResourceVersion: rv,
		Labels: map[string]string{revisions.LabelOwnerUID: uid, revisions.LabelOwnerKind: revisions.KindMachineDeployment, revisions.LabelHash: hash,
			revisions.LabelRevision: n},
		Annotations: map[string]string{revisions.AnnotationRevision: n, revisions.AnnotationRevisionHistory: n,
			revisions.AnnotationChangedBy: "alice", revisions.AnnotationChangedAt: "2026-12-01T10:00:00Z", revisions.AnnotationFieldManager: "kubectl-edit",
			revisions.AnnotationChangeCause: "upgrade", revisions.AnnotationChangeType: revisions.ChangeRollout}}}
}

// TestRecordStoreReadsBackWhatItWasGiven: whatever the metadata of a
// RolloutRevision — as the guard writes it, or with values the store
// cannot keep as numbers or derive — it reads back as given, but for the
// refused break-glass attempts, and is found by name and by owner.
func TestRecordStoreReadsBackWhatItWasGiven(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m *metav1.PartialObjectMetadata)
	}{
		{"as the guard writes it", func(*metav1.PartialObjectMetadata) {}},
		{"an owner UID that is not a UUID", func(m *metav1.PartialObjectMetadata) { m.Labels[revisions.LabelOwnerUID] = "uid-cp" }},
		{"an owner UID in capitals", func(m *metav1.PartialObjectMetadata) {
			m.Labels[revisions.LabelOwnerUID] = "6F1C2A7E-0B1D-4C55-9A3E-000000000001"
		}},
		{"an empty owner UID", func(m *metav1.PartialObjectMetadata) { m.Labels[revisions.LabelOwnerUID] = "" }},
		{"a hash that is not 10 hex digits", func(m *metav1.PartialObjectMetadata) {
			m.Labels[revisions.LabelHash] = "XYZ"
			m.Name = revisions.Name("md", "XYZ")
		}},
		{"a name not made of owner and hash", func(m *metav1.PartialObjectMetadata) { m.Name = "restored-by-hand" }},
		{"a name ending in another hash", func(m *metav1.PartialObjectMetadata) { m.Name = "md-" + otherHash }},
		{"no hash", func(m *metav1.PartialObjectMetadata) { delete(m.Labels, revisions.LabelHash) }},
		{"a resourceVersion that is not a number", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion = "opaque-7" }},
		{"a resourceVersion with a leading zero", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion = "07" }},
		{"no resourceVersion", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion = "" }},
		{"a revision that is not a number", func(m *metav1.PartialObjectMetadata) { m.Annotations[revisions.AnnotationRevision] = " 3" }},
		{"a revision too large", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationRevision] = "99999999999"
			m.Labels[revisions.LabelRevision] = "99999999999"
		}},
		{"no revision", func(m *metav1.PartialObjectMetadata) {
			delete(m.Annotations, revisions.AnnotationRevision)
			delete(m.Labels, revisions.LabelRevision)
		}},
		{"a revision label of another number", func(m *metav1.PartialObjectMetadata) { m.Labels[revisions.LabelRevision] = "2" }},
		{"no revision label", func(m *metav1.PartialObjectMetadata) { delete(m.Labels, revisions.LabelRevision) }},
		{"a history of several numbers", func(m *metav1.PartialObjectMetadata) { m.Annotations[revisions.AnnotationRevisionHistory] = "1,3" }},
		{"no history", func(m *metav1.PartialObjectMetadata) { delete(m.Annotations, revisions.AnnotationRevisionHistory) }},
		{"a change time with an offset", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationChangedAt] = "2026-12-01T11:00:00+01:00"
		}},
		{"a change time before 1970", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationChangedAt] = "1969-12-31T23:00:00Z"
		}},
		{"a change time that is not one", func(m *metav1.PartialObjectMetadata) { m.Annotations[revisions.AnnotationChangedAt] = "noon" }},
		{"an override, restarts and a mark", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationOverriddenBy] = "bob"
			m.Annotations[revisions.AnnotationOverrideReason] = "incident 7"
			m.Annotations[revisions.AnnotationOverrideRules] = "EtcdDowngrade"
			m.Annotations[revisions.AnnotationRestarts] = `[{"at":"2026-03-01T11:00:00Z","by":"carol","after":"2026-03-01T11:00:00Z"}]`
			m.Annotations[AnnotationNumberedAbove] = "9"
		}},
		{"labels and annotations of others", func(m *metav1.PartialObjectMetadata) {
			m.Labels["velero.io/restore-name"] = "nightly"
			m.Annotations["example.com/note"] = "a\x00b,\"c\""
			m.Annotations["example.com/empty"] = ""
		}},
		{"no annotations", func(m *metav1.PartialObjectMetadata) { m.Annotations = nil }},
		{"its digest", func(m *metav1.PartialObjectMetadata) { m.Annotations[revisions.AnnotationDigest] = testDigest }},
		{"its digest, no hash label", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationDigest] = testDigest
			delete(m.Labels, revisions.LabelHash)
		}},
		{"a digest its hash label does not begin", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationDigest] = otherHash + testDigest[10:]
		}},
		{"a digest that is not one", func(m *metav1.PartialObjectMetadata) { m.Annotations[revisions.AnnotationDigest] = testHash }},
		{"a digest in capitals", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationDigest] = strings.ToUpper(testDigest)
		}},
		{"the long name of a content whose short hash another holds", func(m *metav1.PartialObjectMetadata) {
			m.Annotations[revisions.AnnotationDigest] = testDigest
			m.Name = revisions.LongName("md", testDigest)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := guardMeta("ns", "md", testUID, testHash, "3", "1234")
			tc.edit(in)
			want := in.DeepCopy()
			in.Annotations = maps.Clone(in.Annotations)
			if in.Annotations == nil {
				in.Annotations = map[string]string{}
			}
			in.Annotations[AnnotationRefusedOverrides] = `[{"by":"eve"}]`

			s := &recordStore{}
			require.NoError(t, s.Add(in))
			got, err := s.get(in.Namespace, in.Name)
			require.NoError(t, err)
			require.NotNil(t, got, "found by name")
			assert.Equal(t, want.ObjectMeta, got.ObjectMeta)

			owned, err := s.byOwnerUID("ns", in.Labels[revisions.LabelOwnerUID])
			require.NoError(t, err)
			require.Len(t, owned, 1, "found by owner")
			assert.Equal(t, want.ObjectMeta, owned[0].ObjectMeta)
			owned, err = s.byOwnerUID("other-ns", in.Labels[revisions.LabelOwnerUID])
			require.NoError(t, err)
			assert.Empty(t, owned, "only in its namespace")

			slimmed, err := slim(in)
			require.NoError(t, err)
			assert.Equal(t, want.ObjectMeta, slimmed.(*metav1.PartialObjectMetadata).ObjectMeta, "the transform keeps what the store reads")
		})
	}
}

// storeOp is one call of the reflector on a recordStore.
type storeOp func(t *testing.T, s *recordStore)

func add(m *metav1.PartialObjectMetadata) storeOp {
	return func(t *testing.T, s *recordStore) { require.NoError(t, s.Add(m)) }
}

func update(m *metav1.PartialObjectMetadata) storeOp {
	return func(t *testing.T, s *recordStore) { require.NoError(t, s.Update(m)) }
}

func del(obj any) storeOp {
	return func(t *testing.T, s *recordStore) { require.NoError(t, s.Delete(obj)) }
}

func replace(ms ...*metav1.PartialObjectMetadata) storeOp {
	return func(t *testing.T, s *recordStore) {
		var items []any
		for _, m := range ms {
			items = append(items, m)
		}
		require.NoError(t, s.Replace(items, "99"))
	}
}

// TestRecordStoreFollowsTheReflector: adds, updates, deletes and relists
// leave the store holding what the API server holds, by name and by
// owner: two owners of the same name (a worker pool and a control plane,
// or a pool deleted and made anew whose old records remain), an update
// that moves a record to another owner, a delete of what it does not
// hold, a relist that drops what is gone.
func TestRecordStoreFollowsTheReflector(t *testing.T) {
	const otherUID = "6f1c2a7e-0b1d-4c55-9a3e-000000000002"
	a1 := guardMeta("ns", "md", testUID, testHash, "1", "10")
	a2 := guardMeta("ns", "md", testUID, otherHash, "2", "11")
	a2v2 := guardMeta("ns", "md", testUID, otherHash, "3", "12")
	a2v2.Annotations[revisions.AnnotationRevisionHistory] = "2,3"
	b1 := guardMeta("ns", "md", otherUID, testHash, "1", "13") // same name as a1, another owner: replaces it
	c1 := guardMeta("ns", "cp", otherUID, otherHash, "1", "14")
	elsewhere := guardMeta("team-b", "md", testUID, testHash, "1", "15")
	odd := guardMeta("ns", "md", testUID, testHash, "4", "16")
	odd.Name = "md"
	for _, tc := range []struct {
		name   string
		ops    []storeOp
		want   []*metav1.PartialObjectMetadata // every record held
		synced bool
	}{
		{"adds", []storeOp{add(a1), add(a2), add(c1), add(elsewhere), add(odd)}, []*metav1.PartialObjectMetadata{a1, a2, c1, elsewhere, odd}, false},
		{"an update", []storeOp{add(a1), add(a2), update(a2v2)}, []*metav1.PartialObjectMetadata{a1, a2v2}, false},
		{"an add of what it holds", []storeOp{add(a2), add(a2v2)}, []*metav1.PartialObjectMetadata{a2v2}, false},
		{"an update to another owner", []storeOp{add(a1), add(a2), update(b1)}, []*metav1.PartialObjectMetadata{b1, a2}, false},
		{"deletes", []storeOp{add(a1), add(a2), add(c1), del(a1), del(c1)}, []*metav1.PartialObjectMetadata{a2}, false},
		{"a delete of the last record of an owner, then an add", []storeOp{add(a1), del(a1), add(a1)}, []*metav1.PartialObjectMetadata{a1}, false},
		{"a delete of a final state unknown", []storeOp{add(a1), add(odd), del(toolscache.DeletedFinalStateUnknown{Key: "ns/md", Obj: odd})},
			[]*metav1.PartialObjectMetadata{a1}, false},
		{"a delete of what it does not hold", []storeOp{add(a1), del(c1), del(elsewhere)}, []*metav1.PartialObjectMetadata{a1}, false},
		{"the first list", []storeOp{replace(a1, a2, c1)}, []*metav1.PartialObjectMetadata{a1, a2, c1}, true},
		{"an empty first list", []storeOp{replace()}, nil, true},
		{"a relist", []storeOp{replace(a1, a2, c1), add(odd), replace(a2v2, elsewhere)}, []*metav1.PartialObjectMetadata{a2v2, elsewhere}, true},
		{"a list of one name twice", []storeOp{replace(a2, a2v2)}, []*metav1.PartialObjectMetadata{a2v2}, true},
		{"adds after a list", []storeOp{replace(a1), add(a2), add(c1), del(a1)}, []*metav1.PartialObjectMetadata{a2, c1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &recordStore{}
			for _, op := range tc.ops {
				op(t, s)
			}
			assert.Equal(t, tc.synced, s.synced.Load())
			assert.Equal(t, len(tc.want), s.len())
			wantByOwner := map[[2]string][]metav1.ObjectMeta{}
			for _, w := range tc.want {
				got, err := s.get(w.Namespace, w.Name)
				require.NoError(t, err)
				require.NotNil(t, got, "%s/%s", w.Namespace, w.Name)
				assert.Equal(t, w.ObjectMeta, got.ObjectMeta)
				key := [2]string{w.Namespace, w.Labels[revisions.LabelOwnerUID]}
				wantByOwner[key] = append(wantByOwner[key], w.ObjectMeta)
			}
			for _, m := range []*metav1.PartialObjectMetadata{a1, a2, b1, c1, elsewhere, odd} {
				key := [2]string{m.Namespace, m.Labels[revisions.LabelOwnerUID]}
				owned, err := s.byOwnerUID(key[0], key[1])
				require.NoError(t, err)
				var got []metav1.ObjectMeta
				for _, o := range owned {
					got = append(got, o.ObjectMeta)
				}
				assert.ElementsMatch(t, wantByOwner[key], got, "the records of %s in %s", key[1], key[0])
			}
			for _, gone := range []*metav1.PartialObjectMetadata{a1, a2, c1, elsewhere, odd} {
				if !heldByName(tc.want, gone) {
					got, err := s.get(gone.Namespace, gone.Name)
					require.NoError(t, err)
					assert.Nil(t, got, "%s/%s is not held", gone.Namespace, gone.Name)
				}
			}
			s.mu.RLock()
			defer s.mu.RUnlock()
			assert.Len(t, s.byName, len(s.byOwner), "both orders hold every group")
			for _, g := range s.byOwner {
				assert.NotEmpty(t, g.records, "no empty group is kept")
			}
		})
	}
}

// heldByName says whether ms holds a record of the name of m.
func heldByName(ms []*metav1.PartialObjectMetadata, m *metav1.PartialObjectMetadata) bool {
	for _, w := range ms {
		if w.Namespace == m.Namespace && w.Name == m.Name {
			return true
		}
	}
	return false
}

// TestRecordStoreRefusesOtherObjects: the store holds metadata only.
func TestRecordStoreRefusesOtherObjects(t *testing.T) {
	s := &recordStore{}
	assert.Error(t, s.Add("not an object"))
	assert.Error(t, s.Replace([]any{42}, "1"))
	assert.NoError(t, s.Resync())
	assert.NotNil(t, s.Transformer())
}

// TestRecordStoreFilledByTheReflector: the Index's reflector lists the
// labelled RolloutRevisions into the store, marks it filled, and follows
// the watch: a new record, a changed one, a deleted one; a RolloutRevision
// without an owner label is not listed.
func TestRecordStoreFilledByTheReflector(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	withType := func(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
		m = m.DeepCopy()
		m.APIVersion, m.Kind = rgv1alpha1.GroupVersion.String(), "RolloutRevision"
		return m
	}
	a1 := withType(guardMeta("ns", "md", testUID, testHash, "1", ""))
	a2 := withType(guardMeta("ns", "md", testUID, otherHash, "2", ""))
	unlabelled := withType(guardMeta("ns", "other", testUID, testHash, "1", ""))
	delete(unlabelled.Labels, revisions.LabelOwnerUID)
	mc := metadatafake.NewSimpleMetadataClient(scheme, a1, unlabelled)
	store := &recordStore{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go newReflector(mc, store).RunWithContext(ctx)
	require.Eventually(t, store.synced.Load, 10*time.Second, 10*time.Millisecond, "the store filled")
	names := func() []string {
		owned, err := store.byOwnerUID("ns", testUID)
		require.NoError(t, err)
		var out []string
		for _, m := range owned {
			out = append(out, m.Name+"@"+m.Annotations[revisions.AnnotationRevision])
		}
		return out
	}
	assert.ElementsMatch(t, []string{a1.Name + "@1"}, names())
	got, err := store.get("ns", unlabelled.Name)
	require.NoError(t, err)
	assert.Nil(t, got, "a RolloutRevision without an owner is not listed")

	revs := mc.Resource(rgv1alpha1.Resource).Namespace("ns")
	_, err = revs.(metadatafake.MetadataClient).CreateFake(a2, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		return assert.ObjectsAreEqual([]string{a1.Name + "@1", a2.Name + "@2"}, names()) ||
			assert.ObjectsAreEqual([]string{a2.Name + "@2", a1.Name + "@1"}, names())
	}, 10*time.Second, 10*time.Millisecond, "a new record")
	a1v2 := a1.DeepCopy()
	a1v2.Annotations[revisions.AnnotationRevision] = "3"
	_, err = revs.(metadatafake.MetadataClient).UpdateFake(a1v2, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, revs.Delete(ctx, a2.Name, metav1.DeleteOptions{}))
	assert.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{a1.Name + "@3"}, names()) }, 10*time.Second, 10*time.Millisecond,
		"a changed record and a deleted one")
}

// TestRecordStoreReadsWhileTheReflectorWrites: the Index's readers read
// while the reflector adds, deletes and relists (run with -race).
func TestRecordStoreReadsWhileTheReflectorWrites(t *testing.T) {
	s := &recordStore{}
	a1 := guardMeta("ns", "md", testUID, testHash, "1", "10")
	a2 := guardMeta("ns", "md", testUID, otherHash, "2", "11")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			_ = s.Add(a1)
			_ = s.Add(a2)
			_ = s.Delete(a1)
			_ = s.Replace([]any{a1, a2}, "1")
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		owned, err := s.byOwnerUID("ns", testUID)
		require.NoError(t, err)
		for _, m := range owned {
			assert.Contains(t, []string{a1.Name, a2.Name}, m.Name)
		}
		_, err = s.get("ns", a2.Name)
		require.NoError(t, err)
	}
}
