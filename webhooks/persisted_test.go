package webhooks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestStamperRecordsOnlyWhatWasStored sends the stamper requests whose old
// object is not what the store holds — as a caller that reaches the
// guard's port, not the API server, can — and the genuine one beside them:
// only the genuine one records the replaced revision; each other is
// answered, recorded nowhere and counted with its reason.
func TestStamperRecordsOnlyWhatWasStored(t *testing.T) {
	storedStamps := map[string]string{revisions.AnnotationRevision: "4", revisions.AnnotationChangedBy: "alice"}
	tests := []struct {
		name string
		// claim turns the stored object into the request's old object.
		claim      func(md *clusterv1.MachineDeployment)
		wantReason string // "" records
	}{
		{name: "the stored object", claim: func(*clusterv1.MachineDeployment) {}},
		{name: "other content at the stored resourceVersion", wantReason: unverifiedContent, claim: func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.InfrastructureRef.Name = "tmpl-evil"
		}},
		{name: "other stamps at the stored resourceVersion", wantReason: unverifiedStamps, claim: func(md *clusterv1.MachineDeployment) {
			md.Annotations = map[string]string{revisions.AnnotationRevision: "9", revisions.AnnotationChangedBy: "admin"}
		}},
		{name: "an older creation time", wantReason: unverifiedStamps, claim: func(md *clusterv1.MachineDeployment) {
			md.CreationTimestamp = metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
		}},
		{name: "a resourceVersion never stored", wantReason: unverifiedNotCurrent, claim: func(md *clusterv1.MachineDeployment) {
			md.ResourceVersion = "999"
			md.Spec.Template.Spec.InfrastructureRef.Name = "tmpl-evil"
		}},
		{name: "another UID", wantReason: unverifiedNotFound, claim: func(md *clusterv1.MachineDeployment) { md.UID = "uid-forged" }},
		{name: "an object not stored", wantReason: unverifiedNotFound, claim: func(md *clusterv1.MachineDeployment) { md.Name = "md-ghost" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := stamper(t)
			md := stored(t, c, machineDeployment("tmpl-a", storedStamps))
			claimed := md.DeepCopy()
			tt.claim(claimed)
			counter := unverifiedRequestsTotal.WithLabelValues("MachineDeployment", tt.wantReason)
			before := testutil.ToFloat64(counter)

			newMD := claimed.DeepCopy()
			newMD.Spec.Template.Spec.InfrastructureRef.Name = "tmpl-b"
			req := updateRequest(t, claimed, newMD, "mallory", false)
			ann := applyResponse(t, req, s.Handle(context.Background(), req))
			assert.Equal(t, "mallory", ann[revisions.AnnotationChangedBy], "answered as any request")

			list := &rgv1alpha1.RolloutRevisionList{}
			require.NoError(t, c.List(context.Background(), list))
			if tt.wantReason == "" {
				require.Len(t, list.Items, 1)
				rev, err := revisions.FromRolloutRevision(&list.Items[0])
				require.NoError(t, err)
				assert.Equal(t, "alice", rev.Record.ChangedBy)
				assert.EqualValues(t, 4, rev.Record.Revision)
				return
			}
			assert.Empty(t, list.Items, "a revision was recorded from a request body")
			assert.Equal(t, before+1, testutil.ToFloat64(counter), "not counted as %s", tt.wantReason)
		})
	}
}

// TestStamperStampsARestartInsteadOfRecordingIt: a restart is recorded
// from the stored object only (revisions.AnnotationRestart), so a request
// that is no restart the API server stores — here a made-up one of the
// stored object — records nothing; the stamp it is answered with carries
// the restart, and later changes of the same revision keep it.
func TestStamperStampsARestartInsteadOfRecordingIt(t *testing.T) {
	s, c := stamper(t)
	s.Now = func() time.Time { return time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC) }
	md := stored(t, c, machineDeployment("tmpl-a", map[string]string{revisions.AnnotationRevision: "4", revisions.AnnotationChangedBy: "alice"}))
	restarted := md.DeepCopy()
	restarted.Spec.Rollout.After = metav1.NewTime(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	req := updateRequest(t, md, restarted, "mallory", false)
	ann := applyResponse(t, req, s.Handle(context.Background(), req))

	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list))
	assert.Empty(t, list.Items, "a restart was recorded at admission, before the API server stored it")
	assert.Equal(t, "4", ann[revisions.AnnotationRevision])
	rec, err := revisions.RecordFromAnnotations(ann)
	require.NoError(t, err)
	require.Len(t, rec.Restarts, 1)
	assert.Equal(t, revisions.Restart{At: time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC), By: "mallory", FieldManager: "kubectl-patch", After: "2031-05-06T07:08:09Z"}, rec.Restarts[0])

	// A later change of the same revision keeps the stamp; a client's own
	// value of it is not taken.
	restarted.Annotations = ann
	relabelled := restarted.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	relabelled.Annotations = map[string]string{revisions.AnnotationRevision: "4", revisions.AnnotationRestart: `{"at":"2031-01-01T00:00:00Z","by":"forged","after":"2031-01-01T00:00:00Z"}`}
	req = updateRequest(t, restarted, relabelled, "bob", false)
	kept := applyResponse(t, req, s.Handle(context.Background(), req))
	assert.Equal(t, ann[revisions.AnnotationRestart], kept[revisions.AnnotationRestart])

	// A new revision starts without one, and records the restart with the
	// revision it replaces.
	storedNow := &clusterv1.MachineDeployment{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(md), storedNow))
	storedNow.Annotations = ann
	storedNow.Spec.Rollout.After = restarted.Spec.Rollout.After
	require.NoError(t, c.Update(context.Background(), storedNow))
	next := storedNow.DeepCopy()
	next.Spec.Template.Spec.InfrastructureRef.Name = "tmpl-b"
	req = updateRequest(t, storedNow, next, "bob", false)
	fresh := applyResponse(t, req, s.Handle(context.Background(), req))
	assert.NotContains(t, fresh, revisions.AnnotationRestart)
	require.NoError(t, c.List(context.Background(), list))
	require.Len(t, list.Items, 1)
	rev, err := revisions.FromRolloutRevision(&list.Items[0])
	require.NoError(t, err)
	require.Len(t, rev.Record.Restarts, 1)
	assert.Equal(t, "mallory", rev.Record.Restarts[0].By)
}

// TestStamperCountsACreateWithAnIdentity: a CREATE never records, and one
// whose object carries a UID or resourceVersion — which the API server
// gives only after the mutating webhooks — is counted.
func TestStamperCountsACreateWithAnIdentity(t *testing.T) {
	s, c := stamper(t)
	counter := unverifiedRequestsTotal.WithLabelValues("MachineDeployment", unverifiedCreate)
	before := testutil.ToFloat64(counter)
	for _, tt := range []struct {
		name    string
		obj     *clusterv1.MachineDeployment
		counted bool
	}{
		{"as the API server sends it", func() *clusterv1.MachineDeployment { md := machineDeployment("tmpl-a", nil); md.UID = ""; return md }(), false},
		{"with the UID of a stored object", machineDeployment("tmpl-a", nil), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := updateRequest(t, tt.obj, tt.obj, "mallory", false)
			req.Operation, req.OldObject.Raw = admissionv1.Create, nil
			ann := applyResponse(t, req, s.Handle(context.Background(), req))
			assert.Equal(t, "1", ann[revisions.AnnotationRevision])
			if tt.counted {
				before++
			}
			assert.Equal(t, before, testutil.ToFloat64(counter))
		})
	}
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list))
	assert.Empty(t, list.Items)
}

// failingReader fails every read, counting them.
type failingReader struct{ reads *int }

func (f failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	*f.reads++
	return errors.New("the API server was read")
}

func (f failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	*f.reads++
	return errors.New("the API server was read")
}

// TestPersistedAnswersFromTheCache: with the cache's trimmed copy at the
// request's resourceVersion, the check needs no read of the API server,
// and tells stored content from other content by the hash the cache noted.
func TestPersistedAnswersFromTheCache(t *testing.T) {
	s := testScheme(t)
	full := machineDeployment("tmpl-a", map[string]string{revisions.AnnotationRevision: "4"})
	full.ResourceVersion = "17"
	trimmed, err := CacheTransform(kinds.MachineDeployment)(full.DeepCopy())
	require.NoError(t, err)
	cache := fake.NewClientBuilder().WithScheme(s).WithObjects(trimmed.(client.Object)).Build()
	reads := 0
	p := Persisted{Cache: cache, Live: failingReader{reads: &reads}}

	storedNow := &clusterv1.MachineDeployment{}
	require.NoError(t, cache.Get(context.Background(), client.ObjectKeyFromObject(full), storedNow))
	for _, tt := range []struct {
		name  string
		infra string
		want  string
	}{
		{"the stored content", "tmpl-a", ""},
		{"other content", "tmpl-evil", unverifiedContent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claimed := machineDeployment(tt.infra, full.Annotations)
			claimed.ResourceVersion = storedNow.ResourceVersion
			snap, err := kinds.MachineDeployment.Snapshot(claimed)
			require.NoError(t, err)
			why, err := p.Check(context.Background(), kinds.MachineDeployment, claimed, snap)
			require.NoError(t, err)
			assert.Equal(t, tt.want, why)
		})
	}
	assert.Zero(t, reads, "the API server was read though the cache held the object at that resourceVersion")
}

// TestStamperRecordsTheStoredRestartItReplaces: two restarts in a row,
// before any reconcile: the second one's request records the first, as the
// stored object carries it, so no restart is lost.
func TestStamperRecordsTheStoredRestartItReplaces(t *testing.T) {
	s, c := stamper(t)
	first := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	s.Now = func() time.Time { return first }
	md := stored(t, c, machineDeployment("tmpl-a", map[string]string{revisions.AnnotationRevision: "4"}))
	restarted := md.DeepCopy()
	restarted.Spec.Rollout.After = metav1.NewTime(first)
	req := updateRequest(t, md, restarted, "alice", false)
	restarted.Annotations = applyResponse(t, req, s.Handle(context.Background(), req))
	require.NoError(t, c.Update(context.Background(), restarted)) // as the API server stores it

	second := restarted.DeepCopy()
	second.Spec.Rollout.After = metav1.NewTime(first.Add(time.Hour))
	req = updateRequest(t, restarted, second, "bob", false)
	ann := applyResponse(t, req, s.Handle(context.Background(), req))
	assert.Contains(t, ann[revisions.AnnotationRestart], `"by":"bob"`)

	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list))
	require.Len(t, list.Items, 1)
	rev, err := revisions.FromRolloutRevision(&list.Items[0])
	require.NoError(t, err)
	require.Len(t, rev.Record.Restarts, 1)
	assert.Equal(t, "alice", rev.Record.Restarts[0].By)
	assert.Equal(t, "2031-05-06T07:08:09Z", rev.Record.Restarts[0].After)
}
