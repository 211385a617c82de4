package revisions_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

var (
	t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
	t2 = t0.Add(2 * time.Hour)
)

func TestRecordAnnotationsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  revisions.Record
	}{
		{"zero", revisions.Record{}},
		{"full", revisions.Record{
			Revision:     7,
			History:      []int64{7},
			ChangedBy:    "system:serviceaccount:flux-system:kustomize-controller",
			ChangedAt:    t0,
			FieldManager: "kustomize-controller",
			ChangeCause:  "version v1.34.2 → v1.35.0",
			ChangeType:   revisions.ChangeRollout,
			Override:     &revisions.Override{By: "alice", Reason: "INC-42 restore", Rules: []string{"EtcdDowngrade", "ControlPlaneDowngrade"}},
		}},
		{"no field manager", revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "bob", ChangedAt: t1, ChangeType: revisions.ChangeCreated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := tt.rec.Annotations()
			for _, k := range []string{
				revisions.AnnotationRevision, revisions.AnnotationChangedBy, revisions.AnnotationChangedAt,
				revisions.AnnotationFieldManager, revisions.AnnotationChangeCause, revisions.AnnotationChangeType,
				revisions.AnnotationOverriddenBy, revisions.AnnotationOverrideReason, revisions.AnnotationOverrideRules,
			} {
				assert.Contains(t, ann, k, "every stamp is set, so that stale stamps are replaced")
			}
			got, err := revisions.RecordFromAnnotations(ann)
			require.NoError(t, err)
			assert.Equal(t, tt.rec, got)
		})
	}
}

func TestRecordAnnotationsValues(t *testing.T) {
	ann := revisions.Record{
		Revision:  12,
		ChangedAt: time.Date(2026, 3, 1, 11, 0, 0, 0, time.FixedZone("CET", 3600)),
		Override:  &revisions.Override{By: "alice", Reason: "r", Rules: []string{"A", "B"}},
	}.Annotations()
	assert.Equal(t, "12", ann[revisions.AnnotationRevision])
	assert.Equal(t, "2026-03-01T10:00:00Z", ann[revisions.AnnotationChangedAt])
	assert.Equal(t, "A,B", ann[revisions.AnnotationOverrideRules])
	assert.Equal(t, "", ann[revisions.AnnotationFieldManager])
}

func TestRecordFromAnnotations(t *testing.T) {
	got, err := revisions.RecordFromAnnotations(map[string]string{
		revisions.AnnotationRevision:        "4",
		revisions.AnnotationRevisionHistory: "4, 1,1",
		revisions.AnnotationChangedAt:       "2026-03-01T10:00:00Z",
		revisions.AnnotationRestarts:        `[{"at":"2026-03-01T12:00:00Z","by":"bob","after":"2026-03-01T12:00:00Z"},{"at":"2026-03-01T11:00:00Z","by":"alice","fieldManager":"rollout","after":"2026-03-01T11:00:00Z"}]`,
		revisions.AnnotationOverrideRules:   " EtcdDowngrade ,",
		"unrelated":                         "x",
	})
	require.NoError(t, err)
	assert.Equal(t, revisions.Record{
		Revision:  4,
		History:   []int64{1, 4},
		ChangedAt: t0,
		Restarts: []revisions.Restart{
			{At: t1, By: "alice", FieldManager: "rollout", After: "2026-03-01T11:00:00Z"},
			{At: t2, By: "bob", After: "2026-03-01T12:00:00Z"},
		},
		Override: &revisions.Override{Rules: []string{"EtcdDowngrade"}},
	}, got)

	got, err = revisions.RecordFromAnnotations(nil)
	require.NoError(t, err)
	assert.Equal(t, revisions.Record{}, got)
}

func TestRecordFromAnnotationsErrors(t *testing.T) {
	tests := []struct {
		key, value string
	}{
		{revisions.AnnotationRevision, "seven"},
		{revisions.AnnotationRevision, "-1"},
		{revisions.AnnotationRevision, "1.5"},
		{revisions.AnnotationRevisionHistory, "1,x"},
		{revisions.AnnotationRevisionHistory, "1;2"},
		{revisions.AnnotationChangedAt, "yesterday"},
		{revisions.AnnotationChangedAt, "2026-03-01 10:00:00"},
		{revisions.AnnotationRestarts, "{"},
		{revisions.AnnotationRestarts, `{"at":"2026-03-01T10:00:00Z"}`},
		{revisions.AnnotationRestarts, `[{"at":"noon"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			_, err := revisions.RecordFromAnnotations(map[string]string{tt.key: tt.value})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.key, "the error names the annotation")
		})
	}
}

func TestMerge(t *testing.T) {
	r1 := revisions.Record{
		Revision: 1, History: []int64{1}, ChangedBy: "alice", ChangedAt: t0, ChangeType: revisions.ChangeCreated,
		Restarts: []revisions.Restart{{At: t1, By: "alice", After: "2026-03-01T11:00:00Z"}},
	}
	r4 := revisions.Record{
		Revision: 4, History: []int64{4}, ChangedBy: "bob", ChangedAt: t2, FieldManager: "kubectl-edit",
		ChangeCause: "undo to revision 1", ChangeType: revisions.ChangeRollout,
		Restarts: []revisions.Restart{
			{At: t2, By: "bob", After: "2026-03-01T12:00:00Z"},
			{At: t2, By: "carol", After: "2026-03-01T11:00:00Z"}, // the same restart, recorded again
		},
		Override: &revisions.Override{By: "bob", Reason: "r", Rules: []string{"EtcdDowngrade"}},
	}
	want := revisions.Record{
		Revision: 4, History: []int64{1, 4}, ChangedBy: "bob", ChangedAt: t2, FieldManager: "kubectl-edit",
		ChangeCause: "undo to revision 1", ChangeType: revisions.ChangeRollout,
		Restarts: []revisions.Restart{
			{At: t1, By: "alice", After: "2026-03-01T11:00:00Z"},
			{At: t2, By: "bob", After: "2026-03-01T12:00:00Z"},
		},
		Override: &revisions.Override{By: "bob", Reason: "r", Rules: []string{"EtcdDowngrade"}},
	}

	t.Run("newer wins, union", func(t *testing.T) {
		assert.Equal(t, want, revisions.Merge(r1, r4))
	})
	t.Run("older folded into newer keeps newer stamps", func(t *testing.T) {
		got := revisions.Merge(r4, r1)
		assert.Equal(t, want.History, got.History)
		assert.Equal(t, "bob", got.ChangedBy)
		assert.Equal(t, int64(4), got.Revision)
		assert.Len(t, got.Restarts, 2)
	})
	t.Run("idempotent", func(t *testing.T) {
		m := revisions.Merge(r1, r4)
		assert.Equal(t, m, revisions.Merge(m, r4))
		assert.Equal(t, m, revisions.Merge(m, r1))
		assert.Equal(t, r4.Revision, revisions.Merge(r4, r4).Revision)
		assert.Equal(t, []int64{4}, revisions.Merge(r4, r4).History)
	})
	t.Run("a restart recorded again keeps its cause", func(t *testing.T) {
		withCause := revisions.Record{Revision: 1, History: []int64{1},
			Restarts: []revisions.Restart{{At: t1, By: "alice", After: "2026-03-01T11:00:00Z", Cause: "INC-7"}}}
		for _, got := range []revisions.Record{revisions.Merge(withCause, r1), revisions.Merge(r1, withCause)} {
			require.Len(t, got.Restarts, 1)
			assert.Equal(t, "INC-7", got.Restarts[0].Cause)
		}
		assert.Empty(t, revisions.Merge(r1, r1).Restarts[0].Cause, "none given, none made up")
	})
	t.Run("same revision: the new record fills in", func(t *testing.T) {
		adopted := revisions.Record{Revision: 4, ChangeType: revisions.ChangeAdopted}
		got := revisions.Merge(r4, adopted)
		assert.Equal(t, revisions.ChangeAdopted, got.ChangeType)
		assert.Equal(t, "bob", got.ChangedBy, "empty stamps do not erase known ones")
		assert.Equal(t, []int64{4}, got.History)
	})
	t.Run("history without revision", func(t *testing.T) {
		got := revisions.Merge(revisions.Record{Revision: 2}, revisions.Record{Revision: 6})
		assert.Equal(t, []int64{2, 6}, got.History)
	})
	t.Run("bounded: the newest numbers and the latest restarts", func(t *testing.T) {
		// A template switched back and forth, restarted every time it is
		// live: each merge adds a number and a restart to one record.
		rec := revisions.Record{Revision: 1, History: []int64{1}}
		for n := int64(3); n <= 2*revisions.MaxNumbers+101; n += 2 {
			at := t0.Add(time.Duration(n) * time.Hour)
			rec = revisions.Merge(rec, revisions.Record{Revision: n, History: []int64{n},
				Restarts: []revisions.Restart{{At: at, By: "cron", After: at.Format(time.RFC3339)}}})
		}
		last := int64(2*revisions.MaxNumbers + 101)
		require.Len(t, rec.History, revisions.MaxNumbers)
		assert.Equal(t, last, rec.History[len(rec.History)-1], "the live number kept")
		assert.Equal(t, last-2*int64(revisions.MaxNumbers-1), rec.History[0], "the newest numbers kept")
		assert.Equal(t, last, rec.Revision)
		require.Len(t, rec.Restarts, revisions.MaxRestarts)
		assert.Equal(t, t0.Add(time.Duration(last)*time.Hour), rec.Restarts[revisions.MaxRestarts-1].At, "the latest restart kept")
		// Stable: merging what it dropped changes nothing.
		assert.Equal(t, rec, revisions.Merge(rec, revisions.Record{Revision: 1, History: []int64{1},
			Restarts: []revisions.Restart{{At: t0.Add(3 * time.Hour), By: "cron", After: t0.Add(3 * time.Hour).Format(time.RFC3339)}}}))
		// And so do the record's annotations.
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md", UID: "u"}}
		snap, err := revisions.ForMachineDeployment(md)
		require.NoError(t, err)
		cr := revisions.RolloutRevision(md, clusterv1.GroupVersion.WithKind("MachineDeployment"), snap, rec)
		back, err := revisions.FromRolloutRevision(cr)
		require.NoError(t, err)
		assert.Equal(t, rec.History, back.Record.History)
		assert.Len(t, back.Record.Restarts, revisions.MaxRestarts)
	})
	t.Run("does not alias its inputs", func(t *testing.T) {
		m := revisions.Merge(r1, r4)
		m.Override.Rules[0] = "changed"
		m.History[0] = 99
		assert.Equal(t, "EtcdDowngrade", r4.Override.Rules[0])
		assert.Equal(t, int64(1), r1.History[0])
	})
}

// TestStampsOf: an object's stamps are read from its annotations; none, or
// malformed ones, read as the zero Record.
func TestStampsOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want int64
	}{
		{"stamped", map[string]string{revisions.AnnotationRevision: "4"}, 4},
		{"not stamped", nil, 0},
		{"malformed", map[string]string{revisions.AnnotationRevision: "four"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := revisions.StampsOf(&metav1.ObjectMeta{Annotations: tc.ann})
			if got.Revision != tc.want {
				t.Errorf("StampsOf(%v).Revision = %d, want %d", tc.ann, got.Revision, tc.want)
			}
		})
	}
}
