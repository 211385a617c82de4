package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// These tests drive the stamper with an in-memory client standing in for the
// API server; test/e2e drives it through a real one.

func machineDeployment(infra string, ann map[string]string) *clusterv1.MachineDeployment {
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0", UID: "uid-1", Annotations: ann},
		Spec:       clusterv1.MachineDeploymentSpec{ClusterName: "c1", Replicas: ptr.To[int32](3)},
	}
	md.Spec.Template.Spec.Version = "v1.35.2"
	md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: infra}
	return md
}

func stamper(t testing.TB) (*Stamper, client.Client) {
	s := testScheme(t)
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).Build()
	return &Stamper{
		Kind:     kinds.MachineDeployment,
		Recorder: &history.Recorder{Client: c, Reader: c},
		Stored:   Persisted{Cache: c, Live: c},
		Policy:   testFacts(t),
		Decoder:  newLeanDecoder(s),
	}, c
}

// stored creates obj in c, standing in for the API server's store, and
// returns it as stored (with its resourceVersion): the old object of a
// request the API server makes.
func stored[T client.Object](t testing.TB, c client.Client, obj T) T {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), obj))
	return obj
}

func updateRequest(t testing.TB, oldObj, newObj runtime.Object, user string, dryRun bool) admission.Request {
	oldRaw, err := json.Marshal(oldObj)
	require.NoError(t, err)
	newRaw, err := json.Marshal(newObj)
	require.NoError(t, err)
	opts, err := json.Marshal(metav1.PatchOptions{FieldManager: "kubectl-patch"})
	require.NoError(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Update, Namespace: "ns", Name: "md-0",
		Kind:      metav1.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
		UserInfo:  authenticationv1.UserInfo{Username: user},
		Object:    runtime.RawExtension{Raw: newRaw},
		OldObject: runtime.RawExtension{Raw: oldRaw},
		Options:   runtime.RawExtension{Raw: opts},
		DryRun:    ptr.To(dryRun),
	}}
}

// applyResponse applies the stamper's JSON patch to the request's object.
func applyResponse(t testing.TB, req admission.Request, resp admission.Response) map[string]string {
	require.True(t, resp.Allowed, "%v", resp.Result)
	ops, err := json.Marshal(resp.Patches)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(ops)
	require.NoError(t, err)
	out, err := patch.Apply(req.Object.Raw)
	require.NoError(t, err)
	var obj metav1.PartialObjectMetadata
	require.NoError(t, json.Unmarshal(out, &obj))
	return obj.Annotations
}

func TestStamperNewRevisionOverwritesForgedStamps(t *testing.T) {
	s, c := stamper(t)
	oldMD := stored(t, c, machineDeployment("tmpl-a", map[string]string{revisions.AnnotationRevision: "4", revisions.AnnotationChangedBy: "alice"}))
	newMD := machineDeployment("tmpl-b", map[string]string{revisions.AnnotationRevision: "99", revisions.AnnotationChangedBy: "forged", revisions.AnnotationOverriddenBy: "forged"})
	req := updateRequest(t, oldMD, newMD, "bob", false)
	ann := applyResponse(t, req, s.Handle(context.Background(), req))

	assert.Equal(t, "5", ann[revisions.AnnotationRevision])
	assert.Equal(t, "bob", ann[revisions.AnnotationChangedBy])
	assert.Equal(t, "kubectl-patch", ann[revisions.AnnotationFieldManager])
	assert.Equal(t, revisions.ChangeRollout, ann[revisions.AnnotationChangeType])
	assert.Contains(t, ann[revisions.AnnotationChangeCause], "tmpl-a")
	assert.NotContains(t, ann, revisions.AnnotationOverriddenBy, "a forged override stamp survived")

	// The replaced revision 4 is recorded, owned by the MachineDeployment.
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list))
	require.Len(t, list.Items, 1)
	rev, err := revisions.FromRolloutRevision(&list.Items[0])
	require.NoError(t, err)
	assert.EqualValues(t, 4, rev.Record.Revision)
	assert.Equal(t, "alice", rev.Record.ChangedBy)
	assert.Equal(t, "uid-1", string(list.Items[0].OwnerReferences[0].UID))
}

// A create is revision 1 by its requester, with the change-cause it gives;
// an object created with the stamps of an earlier life (moved by clusterctl,
// restored from a backup) keeps none of them, its change-cause included.
func TestStamperCreate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		wantCause string
	}{
		{name: "with a change-cause", ann: map[string]string{revisions.AnnotationChangeCause: "first pool of the cluster"}, wantCause: "first pool of the cluster"},
		{name: "without one", wantCause: "created"},
		{name: "carrying the stamps of an earlier life", ann: map[string]string{
			revisions.AnnotationRevision: "5", revisions.AnnotationChangedBy: "alice", revisions.AnnotationChangeCause: "upgrade to v1.36",
		}, wantCause: "created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := stamper(t)
			md := machineDeployment("tmpl-a", tc.ann)
			md.UID = ""
			raw, err := json.Marshal(md)
			require.NoError(t, err)
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Operation: admissionv1.Create, Namespace: "ns", Name: "md-0",
				Kind:     metav1.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
				UserInfo: authenticationv1.UserInfo{Username: "mover"},
				Object:   runtime.RawExtension{Raw: raw},
			}}
			ann := applyResponse(t, req, s.Handle(context.Background(), req))
			assert.Equal(t, "1", ann[revisions.AnnotationRevision])
			assert.Equal(t, "mover", ann[revisions.AnnotationChangedBy])
			assert.Equal(t, tc.wantCause, ann[revisions.AnnotationChangeCause])
			assert.Equal(t, revisions.ChangeCreated, ann[revisions.AnnotationChangeType])
		})
	}
}

// restorers is a Restorers that answers from a set of users, or fails.
type restorers struct {
	may map[string]bool
	err error
}

func (r restorers) MayRestore(_ context.Context, user authenticationv1.UserInfo, namespace string) (bool, error) {
	return r.may[user.Username+"@"+namespace], r.err
}

// TestStamperCreateRestores: a create carrying well-formed stamps keeps
// them as they are when its user may create RolloutRevisions in the
// namespace (clusterctl move, a restore); anyone else, malformed stamps, a
// create the API server did not send or an unanswered access review get
// the stamps of any create.
func TestStamperCreateRestores(t *testing.T) {
	carried := map[string]string{
		revisions.AnnotationRevision: "5", revisions.AnnotationChangedBy: "alice", revisions.AnnotationChangeCause: "upgrade to v1.36",
		revisions.AnnotationChangedAt: "2026-01-02T03:04:05Z", revisions.AnnotationFieldManager: "rollout",
	}
	mayRestore := restorers{may: map[string]bool{"admin@ns": true}}
	for _, tc := range []struct {
		name      string
		user      string
		ann       map[string]string
		uid       string
		restorers Restorers
		kept      bool
	}{
		{name: "a user who may create RolloutRevisions", user: "admin", ann: carried, restorers: mayRestore, kept: true},
		{name: "a user who may not", user: "editor", ann: carried, restorers: mayRestore},
		{name: "no stamps carried", user: "admin", restorers: mayRestore},
		{name: "malformed stamps", user: "admin", ann: map[string]string{revisions.AnnotationRevision: "five"}, restorers: mayRestore},
		{name: "a create with an identity, which no API server sends", user: "admin", ann: carried, uid: "4d2c", restorers: mayRestore},
		{name: "the access review fails", user: "admin", ann: carried, restorers: restorers{err: errors.New("connection refused")}},
		{name: "no Restorers", user: "admin", ann: carried},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := stamper(t)
			s.Restorers = tc.restorers
			md := machineDeployment("tmpl-a", maps.Clone(tc.ann))
			md.UID = types.UID(tc.uid)
			raw, err := json.Marshal(md)
			require.NoError(t, err)
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Operation: admissionv1.Create, Namespace: "ns", Name: "md-0",
				Kind:     metav1.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
				UserInfo: authenticationv1.UserInfo{Username: tc.user},
				Object:   runtime.RawExtension{Raw: raw},
			}}
			resp := s.Handle(context.Background(), req)
			ann := applyResponse(t, req, resp)
			if tc.kept {
				assert.Empty(t, resp.Patches, "a restore changes nothing")
				for k, v := range carried {
					assert.Equal(t, v, ann[k], k)
				}
				return
			}
			assert.Equal(t, "1", ann[revisions.AnnotationRevision])
			assert.Equal(t, tc.user, ann[revisions.AnnotationChangedBy])
			assert.Equal(t, revisions.ChangeCreated, ann[revisions.AnnotationChangeType])
		})
	}
}

func TestStamperDryRunRecordsNothing(t *testing.T) {
	s, c := stamper(t)
	req := updateRequest(t, stored(t, c, machineDeployment("tmpl-a", nil)), machineDeployment("tmpl-b", nil), "bob", true)
	ann := applyResponse(t, req, s.Handle(context.Background(), req))
	assert.Equal(t, "2", ann[revisions.AnnotationRevision], "a dry-run still shows the stamps it would get")
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list))
	assert.Empty(t, list.Items, "a dry-run recorded a revision")
}

func TestStamperKeepsStampsWhenContentIsUnchanged(t *testing.T) {
	s, _ := stamper(t)
	stored := map[string]string{revisions.AnnotationRevision: "7", revisions.AnnotationChangedBy: "alice", revisions.AnnotationChangeCause: "upgrade"}
	newMD := machineDeployment("tmpl-a", map[string]string{revisions.AnnotationRevision: "8", revisions.AnnotationChangedBy: "mallory"})
	newMD.Spec.Replicas = ptr.To[int32](5) // not part of a revision
	req := updateRequest(t, machineDeployment("tmpl-a", stored), newMD, "mallory", false)
	ann := applyResponse(t, req, s.Handle(context.Background(), req))
	assert.Equal(t, "7", ann[revisions.AnnotationRevision])
	assert.Equal(t, "alice", ann[revisions.AnnotationChangedBy])
	assert.Equal(t, "upgrade", ann[revisions.AnnotationChangeCause])
}

// BenchmarkStamperNewRevision measures one mutating admission that makes a
// new revision: decode both objects, snapshot and hash them, check the old
// one against the stored object and record the replaced revision (against
// an in-memory client), build the patch.
func BenchmarkStamperNewRevision(b *testing.B) {
	s, c := stamper(b)
	req := updateRequest(b, stored(b, c, machineDeployment("tmpl-a", map[string]string{revisions.AnnotationRevision: "4"})), machineDeployment("tmpl-b", nil), "bob", false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := s.Handle(ctx, req); !resp.Allowed {
			b.Fatal(resp.Result)
		}
	}
}

// BenchmarkStamperUnchangedContent measures a mutating admission that
// changes no revision (stamps are kept as stored).
func BenchmarkStamperUnchangedContent(b *testing.B) {
	s, _ := stamper(b)
	ann := map[string]string{revisions.AnnotationRevision: "4", revisions.AnnotationChangedBy: "alice"}
	req := updateRequest(b, machineDeployment("tmpl-a", ann), machineDeployment("tmpl-a", ann), "bob", false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := s.Handle(ctx, req); !resp.Allowed {
			b.Fatal(resp.Result)
		}
	}
}

// TestAnnotationPatch: the stamper's patch, applied as the API server
// applies it, leaves the object as sent but for its annotations, which
// then carry the changes — keys with "/" and "~" in them included — and
// sends nothing the object already carries.
func TestAnnotationPatch(t *testing.T) {
	v := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		current map[string]string
		changes map[string]*string
		want    map[string]string
		ops     int
	}{
		{"no annotations yet", nil, map[string]*string{"rollout-guard.io/revision": v("1"), "rollout-guard.io/gone": nil},
			map[string]string{"rollout-guard.io/revision": "1"}, 1},
		{"nothing to add to none", nil, map[string]*string{"rollout-guard.io/gone": nil}, nil, 0},
		{"set, replaced, removed, kept", map[string]string{"team": "a", "rollout-guard.io/revision": "4", "rollout-guard.io/changed-by": "mallory", "a~b/c": "x"},
			map[string]*string{"rollout-guard.io/revision": v("5"), "rollout-guard.io/changed-by": nil, "rollout-guard.io/field-manager": v("kubectl"), "a~b/c": v("y"), "rollout-guard.io/gone": nil},
			map[string]string{"team": "a", "rollout-guard.io/revision": "5", "rollout-guard.io/field-manager": "kubectl", "a~b/c": "y"}, 4},
		{"already as asked", map[string]string{"rollout-guard.io/revision": "4"}, map[string]*string{"rollout-guard.io/revision": v("4"), "rollout-guard.io/gone": nil},
			map[string]string{"rollout-guard.io/revision": "4"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := machineDeployment("tmpl-a", tc.current)
			raw, err := json.Marshal(md)
			require.NoError(t, err)
			ops := annotationPatch(tc.current, tc.changes)
			assert.Len(t, ops, tc.ops)
			out := raw
			if len(ops) > 0 {
				encoded, err := json.Marshal(ops)
				require.NoError(t, err)
				patch, err := jsonpatch.DecodePatch(encoded)
				require.NoError(t, err)
				out, err = patch.Apply(raw)
				require.NoError(t, err)
			}
			got := &clusterv1.MachineDeployment{}
			require.NoError(t, json.Unmarshal(out, got))
			assert.Equal(t, tc.want, got.Annotations)
			got.Annotations, md.Annotations = nil, nil
			assert.Equal(t, md, got, "only annotations change")
		})
	}
}
