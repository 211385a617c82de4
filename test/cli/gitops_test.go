package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// kubectl runs bin/kubectl as the admin with stdin as its input, and
// returns its output; it fails the test if kubectl fails.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.BinDir, "kubectl"), append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// mark adds labels and annotations to obj as a GitOps controller leaves
// them (a metadata change: no new revision).
func mark(t *testing.T, obj client.Object, labels, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	require.NoError(t, err)
	require.NoError(t, env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", patch)))
}

// TestGitOpsEmit: on a MachineDeployment Flux applies, undo --emit yaml
// prints the manifest of the revision asked for and changes nothing; that
// manifest, applied as Flux applies (server-side, field manager
// kustomize-controller), makes exactly that revision live again, and
// history shows it, made by Flux. history --revision N -o yaml prints the
// revision as the MachineDeployment it is a revision of.
func TestGitOpsEmit(t *testing.T) {
	w := newWorld(t, "cli-gitops-emit", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	md := "machinedeployment/" + mdName
	rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "--version", "v1.34.1", "-n", w.Namespace).ok(t)
	mark(t, w.MD, map[string]string{rollout.FluxKustomizeNameLabel: "clusters", rollout.FluxKustomizeNamespaceLabel: "flux-system"}, nil)
	waitRecorded(t, w.MD)
	before := w.MD.GetResourceVersion()
	require.EqualValues(t, 2, env.Stamps(t, w.MD).Revision)

	// A live undo stops: Flux would put revision 2 back at its next sync.
	r := rolloutCmd(t, "undo", md, "--to-revision", "1", "-n", w.Namespace)
	r.fails(t, "cannot undo MachineDeployment cli-gitops-emit/c1-md-0: it is managed by Flux (Kustomization flux-system/clusters, labels kustomize.toolkit.fluxcd.io/name and namespace), "+
		"and Flux will revert a change made here at its next sync; make the change in Git instead: rollout undo machinedeployment/c1-md-0 --to-revision 1 -n cli-gitops-emit --emit yaml prints the manifest to commit (--emit patch: the merge patch); "+
		"to change the live object anyway, add --force")
	assert.Empty(t, r.stdout)

	manifest := rolloutCmd(t, "undo", md, "--to-revision", "1", "-n", w.Namespace, "--emit", "yaml").ok(t)
	golden(t, "gitops/md-emit-revision-1.yaml", manifest)
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.MD), w.MD))
	assert.Equal(t, before, w.MD.GetResourceVersion(), "--emit changes nothing")
	assert.Equal(t, "c1-md-1", w.MD.Spec.Template.Spec.InfrastructureRef.Name)

	patch := rolloutCmd(t, "undo", md, "--to-revision", "1", "-n", w.Namespace, "--emit", "patch").ok(t)
	assert.JSONEq(t, `{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": "c1-md-0", "namespace": "cli-gitops-emit"},
		"spec": {"template": {"spec": {"infrastructureRef": {"name": "c1-md-0"}, "version": "v1.34.2"}}}}`, patch)
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.MD), w.MD))
	assert.Equal(t, before, w.MD.GetResourceVersion(), "--emit patch changes nothing")

	// What Flux does with the manifest once it is in Git.
	kubectl(t, manifest, "apply", "--server-side", "--force-conflicts", "--field-manager=kustomize-controller", "-f", "-")
	settle(t, w.MD)
	assert.Equal(t, "c1-md-0", w.MD.Spec.Template.Spec.InfrastructureRef.Name)
	assert.Equal(t, "v1.34.2", w.MD.Spec.Template.Spec.Version)

	var h v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(rolloutCmd(t, "history", md, "-n", w.Namespace, "-o", "json").ok(t)), &h))
	assert.EqualValues(t, 3, h.LiveRevision)
	var live *v1alpha1.HistoryRevision
	for i := range h.Revisions {
		if h.Revisions[i].Live {
			live = &h.Revisions[i]
		}
	}
	require.NotNil(t, live, "a live revision")
	assert.Equal(t, []int64{1, 3}, live.History, "revision 1's content is live again, as revision 3")
	assert.Equal(t, "kustomize-controller", live.FieldManager)
	assert.Equal(t, "Flux", live.GitOps)
	snap, err := revisions.ForMachineDeployment(w.MD)
	require.NoError(t, err)
	assert.Equal(t, revisions.ShortHash(snap.Hash), live.Hash, "the live template is revision 1's (history -o json prints the short hash)")
	assert.True(t, slices.ContainsFunc(h.Revisions, func(r v1alpha1.HistoryRevision) bool { return r.Revision == 2 && r.GitOps == "" }))
	golden(t, "gitops/md-table.txt", rolloutCmd(t, "history", md, "-n", w.Namespace).ok(t))

	// Revision 1 as the MachineDeployment it is a revision of: the same
	// template as the manifest that made it live again.
	out := rolloutCmd(t, "history", md, "-n", w.Namespace, "--revision", "1", "-o", "yaml").ok(t)
	golden(t, "gitops/md-revision-1.yaml", stable(out))
	var rev, applied map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &rev))
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &applied))
	assert.Equal(t, applied["spec"].(map[string]any)["template"], rev["spec"].(map[string]any)["template"])
}

// TestGitOpsUndoArgoCD: a live undo of a KubeadmControlPlane Argo CD
// tracks stops with exit 1 and changes nothing; with --force it rolls back,
// with a warning that Argo CD will revert it.
func TestGitOpsUndoArgoCD(t *testing.T) {
	w := newWorld(t, "cli-gitops-argocd", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	kcp := "kcp/" + kcpName
	rolloutCmd(t, kcp, "--template", "devmachinetemplate/c1-control-plane-1", "-n", w.Namespace).ok(t)
	mark(t, w.KCP, nil, map[string]string{rollout.ArgoCDTrackingAnnotation: "c1:controlplane.cluster.x-k8s.io/KubeadmControlPlane:cli-gitops-argocd/c1-control-plane"})
	require.EqualValues(t, 2, env.Stamps(t, w.KCP).Revision)
	before := w.KCP.GetResourceVersion()

	r := rolloutCmd(t, "undo", kcp, "-n", w.Namespace)
	r.fails(t, "cannot undo KubeadmControlPlane cli-gitops-argocd/c1-control-plane: it is managed by Argo CD (Application c1, annotation argocd.argoproj.io/tracking-id), "+
		"and Argo CD will revert a change made here at its next sync; make the change in Git instead: rollout undo kubeadmcontrolplane/c1-control-plane --to-revision 1 -n cli-gitops-argocd --emit yaml prints the manifest to commit (--emit patch: the merge patch); "+
		"to change the live object anyway, add --force")
	assert.Empty(t, r.stdout)
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.KCP), w.KCP))
	assert.Equal(t, before, w.KCP.GetResourceVersion(), "nothing changed")

	// The template switch stops the same way.
	rolloutCmd(t, kcp, "--template", "devmachinetemplate/c1-control-plane", "-n", w.Namespace).fails(t,
		"cannot roll out KubeadmControlPlane cli-gitops-argocd/c1-control-plane: it is managed by Argo CD (Application c1, annotation argocd.argoproj.io/tracking-id), "+
			"and Argo CD will revert a change made here at its next sync; make the change in Git instead: rollout kubeadmcontrolplane/c1-control-plane --template devmachinetemplate/c1-control-plane -n cli-gitops-argocd --emit yaml prints the manifest to commit (--emit patch: the merge patch); "+
			"to change the live object anyway, add --force")
	assert.EqualValues(t, 2, env.Stamps(t, w.KCP).Revision)

	r = rolloutCmd(t, "undo", kcp, "-n", w.Namespace, "--force")
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 1 (now revision 3)\n", lastLine(r.ok(t)))
	assert.Equal(t, "Warning: KubeadmControlPlane cli-gitops-argocd/c1-control-plane is managed by Argo CD (Application c1, annotation argocd.argoproj.io/tracking-id); "+
		"changing it here anyway (--force): Argo CD will revert it at its next sync unless Git has the same change\n", r.stderr)
	w.Refresh(t)
	assert.Equal(t, "c1-control-plane", w.KCP.Spec.MachineTemplate.Spec.InfrastructureRef.Name)
	assert.Empty(t, w.KCP.Annotations[revisions.AnnotationOverride], "--force without --reason sends no override")
}

// TestGitOpsDocsQuoteGoldens: the GitOps transcripts docs/gitops.md shows are
// these golden files, as they are.
func TestGitOpsDocsQuoteGoldens(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "gitops.md"))
	require.NoError(t, err)
	for _, name := range []string{"md-emit-revision-1.yaml", "md-table.txt", "md-revision-1.yaml"} {
		want, err := os.ReadFile(filepath.Join("testdata", "gitops", name))
		require.NoError(t, err)
		assert.Contains(t, string(docs), string(want), "docs/gitops.md does not quote testdata/gitops/%s as it is", name)
	}
}
