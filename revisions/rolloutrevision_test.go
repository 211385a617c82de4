package revisions_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

var (
	mdGVK  = clusterv1.GroupVersion.WithKind("MachineDeployment")
	kcpGVK = controlplanev1.GroupVersion.WithKind("KubeadmControlPlane")
)

func fullRecord() revisions.Record {
	return revisions.Record{
		Revision:     4,
		History:      []int64{1, 4},
		ChangedBy:    "alice@example.com",
		ChangedAt:    t0,
		FieldManager: "rollout",
		ChangeCause:  "undo to revision 1",
		ChangeType:   revisions.ChangeRollout,
		Restarts:     []revisions.Restart{{At: t1, By: "bob", FieldManager: "rollout", After: "2026-03-01T11:00:00Z"}},
		Override:     &revisions.Override{By: "alice@example.com", Reason: "INC-42", Rules: []string{"EtcdDowngrade"}},
	}
}

func TestRolloutRevision(t *testing.T) {
	md := newMD()
	snap := mdSnap(t, md)
	cr := revisions.RolloutRevision(md, mdGVK, snap, fullRecord())

	assert.Equal(t, "md-0-"+revisions.ShortHash(snap.Hash), cr.Name)
	assert.Equal(t, "default", cr.Namespace)
	assert.Equal(t, map[string]string{
		revisions.LabelOwnerUID:  string(md.UID),
		revisions.LabelOwnerKind: "MachineDeployment",
		revisions.LabelHash:      revisions.ShortHash(snap.Hash),
		revisions.LabelRevision:  "4",
	}, cr.Labels)
	require.Len(t, cr.OwnerReferences, 1)
	ref := cr.OwnerReferences[0]
	assert.Equal(t, "cluster.x-k8s.io/v1beta2", ref.APIVersion)
	assert.Equal(t, "MachineDeployment", ref.Kind)
	assert.Equal(t, "md-0", ref.Name)
	assert.Equal(t, md.UID, ref.UID)
	require.NotNil(t, ref.Controller)
	assert.True(t, *ref.Controller)
	assert.Nil(t, ref.BlockOwnerDeletion)
	assert.Equal(t, int64(4), cr.Revision)
	assert.Equal(t, snap.Data, cr.Data.Raw)
	assert.Equal(t, "1,4", cr.Annotations[revisions.AnnotationRevisionHistory])
	assert.JSONEq(t, `[{"at":"2026-03-01T11:00:00Z","by":"bob","fieldManager":"rollout","after":"2026-03-01T11:00:00Z"}]`, cr.Annotations[revisions.AnnotationRestarts])
	assert.Equal(t, "alice@example.com", cr.Annotations[revisions.AnnotationChangedBy])
	assert.Equal(t, "EtcdDowngrade", cr.Annotations[revisions.AnnotationOverrideRules])
	assert.Equal(t, snap.Hash, cr.Annotations[revisions.AnnotationDigest], "the whole digest")

	// Empty stamps are not written on a RolloutRevision.
	bare := revisions.RolloutRevision(md, mdGVK, snap, revisions.Record{Revision: 2})
	assert.Equal(t, map[string]string{revisions.AnnotationDigest: snap.Hash, revisions.AnnotationRevision: "2", revisions.AnnotationRevisionHistory: "2"}, bare.Annotations)
}

func TestRolloutRevisionRoundTrip(t *testing.T) {
	md, kcp := newMD(), newKCP()
	cases := []struct {
		name string
		snap revisions.Snapshot
		cr   *rgv1alpha1.RolloutRevision
		rec  revisions.Record
	}{
		{"machine deployment", mdSnap(t, md), revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), fullRecord()), fullRecord()},
		{"control plane", kcpSnap(t, kcp), revisions.RolloutRevision(kcp, kcpGVK, kcpSnap(t, kcp), fullRecord()), fullRecord()},
		{"bare record", mdSnap(t, md), revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), revisions.Record{Revision: 1}),
			revisions.Record{Revision: 1, History: []int64{1}}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := revisions.FromRolloutRevision(tt.cr)
			require.NoError(t, err)
			assert.Equal(t, revisions.Revision{Snapshot: tt.snap, Record: tt.rec, Name: tt.cr.Name, Labelled: true}, got)

			// Through the API server's JSON encoding and back.
			raw, err := json.Marshal(tt.cr)
			require.NoError(t, err)
			var back rgv1alpha1.RolloutRevision
			require.NoError(t, json.Unmarshal(raw, &back))
			got, err = revisions.FromRolloutRevision(&back)
			require.NoError(t, err)
			assert.Equal(t, tt.snap, got.Snapshot)
		})
	}
}

// Pruning removes by number only records whose number label says the
// number they hold: records made before the label existed, or whose label
// disagrees, are removed one by one.
func TestLabelled(t *testing.T) {
	md := newMD()
	snap := mdSnap(t, md)
	for _, tt := range []struct {
		name   string
		tamper func(*rgv1alpha1.RolloutRevision)
		want   bool
	}{
		{"as made", func(*rgv1alpha1.RolloutRevision) {}, true},
		{"made before the label", func(cr *rgv1alpha1.RolloutRevision) { delete(cr.Labels, revisions.LabelRevision) }, false},
		{"label of another number", func(cr *rgv1alpha1.RolloutRevision) { cr.Labels[revisions.LabelRevision] = "3" }, false},
		{"renumbered without its label", func(cr *rgv1alpha1.RolloutRevision) {
			cr.Revision = 9
			cr.Annotations[revisions.AnnotationRevision] = "9"
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cr := revisions.RolloutRevision(md, mdGVK, snap, revisions.Record{Revision: 4})
			tt.tamper(cr)
			whole, err := revisions.FromRolloutRevision(cr)
			require.NoError(t, err)
			assert.Equal(t, tt.want, whole.Labelled, "from the whole RolloutRevision")
			meta, err := revisions.FromMetadata(&cr.ObjectMeta)
			require.NoError(t, err)
			assert.Equal(t, tt.want, meta.Labelled, "from its metadata")
		})
	}
}

// The API server may re-encode Data (whitespace, escaping): the content, not
// the bytes, is checked.
func TestFromRolloutRevisionReencodedData(t *testing.T) {
	kcp := newKCP()
	snap := kcpSnap(t, kcp)
	cr := revisions.RolloutRevision(kcp, kcpGVK, snap, revisions.Record{Revision: 3})
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, snap.Data, "", "  "))
	unescaped := strings.ReplaceAll(pretty.String(), `\u003c`, "<")
	unescaped = strings.ReplaceAll(unescaped, `\u003e`, ">")
	require.NotEqual(t, string(snap.Data), unescaped)
	cr.Data.Raw = []byte(unescaped)

	got, err := revisions.FromRolloutRevision(cr)
	require.NoError(t, err)
	assert.Equal(t, snap, got.Snapshot)
}

func TestFromRolloutRevisionErrors(t *testing.T) {
	md := newMD()
	snap := mdSnap(t, md)
	tests := []struct {
		name   string
		tamper func(*rgv1alpha1.RolloutRevision)
		want   string
	}{
		{"tampered data", func(cr *rgv1alpha1.RolloutRevision) {
			cr.Data.Raw = bytes.Replace(cr.Data.Raw, []byte("v1.34.2"), []byte("v1.33.0"), 1)
		}, "the data was changed"},
		{"tampered hash label", func(cr *rgv1alpha1.RolloutRevision) { cr.Labels[revisions.LabelHash] = "0000000000" }, "the data was changed"},
		{"tampered digest", func(cr *rgv1alpha1.RolloutRevision) {
			cr.Annotations[revisions.AnnotationDigest] = cr.Labels[revisions.LabelHash] + strings.Repeat("0", 54)
		}, "the data was changed"},
		{"missing hash label", func(cr *rgv1alpha1.RolloutRevision) { delete(cr.Labels, revisions.LabelHash) }, revisions.LabelHash},
		{"unknown kind", func(cr *rgv1alpha1.RolloutRevision) { cr.Labels[revisions.LabelOwnerKind] = "Deployment" }, revisions.LabelOwnerKind},
		{"empty data", func(cr *rgv1alpha1.RolloutRevision) { cr.Data.Raw = nil }, "data is empty"},
		{"data not JSON", func(cr *rgv1alpha1.RolloutRevision) { cr.Data.Raw = []byte("{") }, "not JSON"},
		{"data not an object", func(cr *rgv1alpha1.RolloutRevision) { cr.Data.Raw = []byte(`["a"]`) }, "not a JSON object"},
		{"trailing data", func(cr *rgv1alpha1.RolloutRevision) { cr.Data.Raw = append(cr.Data.Raw, []byte(" {}")...) }, "trailing"},
		{"malformed stamp", func(cr *rgv1alpha1.RolloutRevision) { cr.Annotations[revisions.AnnotationChangedAt] = "noon" }, revisions.AnnotationChangedAt},
		{"negative revision", func(cr *rgv1alpha1.RolloutRevision) { cr.Revision = -1 }, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := revisions.RolloutRevision(md, mdGVK, snap, fullRecord())
			tt.tamper(cr)
			_, err := revisions.FromRolloutRevision(cr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), cr.Name, "the error names the RolloutRevision")
		})
	}
	_, err := revisions.FromRolloutRevision(nil)
	require.Error(t, err)
}

func TestRolloutRevisionName(t *testing.T) {
	tests := []struct {
		owner string
		want  string
	}{
		{"md-0", "md-0-0123456789"},
		{"a.b", "a.b-0123456789"},
		{strings.Repeat("a", 253), strings.Repeat("a", 242) + "-0123456789"},
		{strings.Repeat("a", 241) + ".b-c", strings.Repeat("a", 241) + "-0123456789"},
		{strings.Repeat("a", 240) + "--bc", strings.Repeat("a", 240) + "-0123456789"},
	}
	for _, tt := range tests {
		digest := "0123456789" + strings.Repeat("ab", 27)
		got := revisions.Name(tt.owner, digest)
		assert.Equal(t, tt.want, got)
		assert.Equal(t, got, revisions.Name(tt.owner, "0123456789"), "an earlier release's short hash names the same")
		assert.LessOrEqual(t, len(got), 253)
		assert.Empty(t, validation.IsDNS1123Subdomain(got))
		long := revisions.LongName(tt.owner, digest)
		assert.True(t, strings.HasSuffix(long, "-"+digest), long)
		assert.LessOrEqual(t, len(long), 253)
		assert.Empty(t, validation.IsDNS1123Subdomain(long))
		assert.Equal(t, []string{got, long}, revisions.Names(tt.owner, digest))
	}
}

func TestSort(t *testing.T) {
	revs := []revisions.Revision{
		{Name: "c", Record: revisions.Record{Revision: 7}},
		{Name: "a", Record: revisions.Record{Revision: 1}},
		{Name: "b", Record: revisions.Record{Revision: 4}},
	}
	revisions.Sort(revs)
	var names []string
	for _, r := range revs {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"a", "b", "c"}, names)
}

// TestFromMetadata: the metadata of a RolloutRevision alone gives back the
// record, name and content hash it was made with; metadata that is not one
// of ours, or whose stamps are damaged, is an error naming it.
func TestFromMetadata(t *testing.T) {
	md, kcp := newMD(), newKCP()
	for _, tc := range []struct {
		name string
		cr   *rgv1alpha1.RolloutRevision
		snap revisions.Snapshot
	}{
		{"machine deployment", revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), fullRecord()), mdSnap(t, md)},
		{"control plane", revisions.RolloutRevision(kcp, kcpGVK, kcpSnap(t, kcp), fullRecord()), kcpSnap(t, kcp)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cr.ResourceVersion = "42"
			whole, err := revisions.FromRolloutRevision(tc.cr)
			require.NoError(t, err)
			meta, err := revisions.FromMetadata(&tc.cr.ObjectMeta)
			require.NoError(t, err)
			assert.Equal(t, whole.Record, meta.Record)
			assert.Equal(t, tc.cr.Name, meta.Name)
			assert.Equal(t, "42", meta.ResourceVersion)
			assert.Equal(t, revisions.Snapshot{Kind: tc.snap.Kind, Hash: tc.snap.Hash}, meta.Snapshot)
		})
	}

	for _, tc := range []struct {
		name  string
		edit  func(*rgv1alpha1.RolloutRevision)
		wants string
	}{
		{"not ours", func(cr *rgv1alpha1.RolloutRevision) { delete(cr.Labels, revisions.LabelOwnerKind) }, "label rollout-guard.io/owner-kind"},
		{"no hash", func(cr *rgv1alpha1.RolloutRevision) { delete(cr.Labels, revisions.LabelHash) }, "is missing"},
		// An earlier release's record: its 40-bit label does not tell its
		// content from another's; only its data does.
		{"no digest", func(cr *rgv1alpha1.RolloutRevision) { delete(cr.Annotations, revisions.AnnotationDigest) }, "earlier release"},
		{"digest not of the label", func(cr *rgv1alpha1.RolloutRevision) {
			cr.Annotations[revisions.AnnotationDigest] = strings.Repeat("f", 64)
		}, "not a digest beginning with label"},
		{"digest not a digest", func(cr *rgv1alpha1.RolloutRevision) {
			cr.Annotations[revisions.AnnotationDigest] = cr.Labels[revisions.LabelHash]
		}, "not a digest beginning with label"},
		{"damaged number", func(cr *rgv1alpha1.RolloutRevision) { cr.Annotations[revisions.AnnotationRevision] = "four" }, "not a revision number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), fullRecord())
			tc.edit(cr)
			_, err := revisions.FromMetadata(&cr.ObjectMeta)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wants)
			assert.Contains(t, err.Error(), "default/"+cr.Name)
		})
	}
	_, err := revisions.FromMetadata(nil)
	assert.Error(t, err)
}

// TestOneNumberPerRecord: a record's number is one: the revision field and
// the revision stamp the guard writes alike; a record whose two disagree
// (changed outside the guard) is not read as either.
func TestOneNumberPerRecord(t *testing.T) {
	md := newMD()
	cr := revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), revisions.Record{Revision: 4})
	got, err := revisions.FromRolloutRevision(cr)
	require.NoError(t, err)
	meta, err := revisions.FromMetadata(cr)
	require.NoError(t, err)
	assert.Equal(t, got.Record.Revision, meta.Record.Revision, "numbering (metadata) and undo (the object) read one number")

	cr.Revision = 9
	_, err = revisions.FromRolloutRevision(cr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "revision 9 and annotation rollout-guard.io/revision 4 disagree")
}

func TestBoundKeepsTheBeginningAndSaysHowLong(t *testing.T) {
	long := strings.Repeat("é", 200_000) // 400,000 bytes
	got := revisions.Bound(long)
	assert.LessOrEqual(t, len(got), revisions.MaxClientText)
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasSuffix(got, "… (truncated, 400000 bytes)"), got[len(got)-40:])
	assert.Equal(t, got, revisions.Bound(got), "idempotent")
	assert.Equal(t, "short", revisions.Bound("short"))
	rec := revisions.Record{ChangeCause: long, Override: &revisions.Override{Reason: long}, Restarts: []revisions.Restart{{Cause: long, After: "x"}}}
	ann := rec.Annotations()
	assert.LessOrEqual(t, len(ann[revisions.AnnotationChangeCause]), revisions.MaxClientText)
	assert.LessOrEqual(t, len(ann[revisions.AnnotationOverrideReason]), revisions.MaxClientText)
	back, err := revisions.RecordFromAnnotations(map[string]string{revisions.AnnotationChangeCause: long})
	require.NoError(t, err)
	assert.Equal(t, got, back.ChangeCause, "read bounded, however long it is stored")
}
