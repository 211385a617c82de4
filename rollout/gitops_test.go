package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestGitOpsOf: each mark a GitOps controller leaves is recognised, with
// the controller, what applies the object and the mark; an object without
// any, written only by other field managers, or labelled as Helm labels
// it, is not managed.
func TestGitOpsOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		managers    []string
		want        string // "" when not managed
	}{
		{name: "none", labels: map[string]string{"pool": "md-0"}, managers: []string{"rollout", "kubectl-patch", "capi-topology"}},
		{name: "Argo CD tracking annotation", annotations: map[string]string{core.ArgoCDTrackingAnnotation: "prod-clusters:cluster.x-k8s.io/MachineDeployment:demo/c1-md-0"},
			want: "Argo CD (Application prod-clusters, annotation argocd.argoproj.io/tracking-id)"},
		{name: "Argo CD Application in another namespace", annotations: map[string]string{core.ArgoCDTrackingAnnotation: "team-a_prod-clusters:cluster.x-k8s.io/MachineDeployment:demo/c1-md-0"},
			want: "Argo CD (Application team-a/prod-clusters, annotation argocd.argoproj.io/tracking-id)"},
		{name: "the instance label alone, as Helm sets it (Argo CD's needs its Application)", labels: map[string]string{core.ArgoCDInstanceLabel: "prod-clusters", "app.kubernetes.io/managed-by": "Helm"},
			managers: []string{"helm"}},
		{name: "Flux Kustomization", labels: map[string]string{core.FluxKustomizeNameLabel: "clusters", core.FluxKustomizeNamespaceLabel: "flux-system"},
			want: "Flux (Kustomization flux-system/clusters, labels kustomize.toolkit.fluxcd.io/name and namespace)"},
		{name: "Flux HelmRelease", labels: map[string]string{core.FluxHelmNameLabel: "capi-clusters", core.FluxHelmNamespaceLabel: "flux-system"},
			want: "Flux (HelmRelease flux-system/capi-clusters, labels helm.toolkit.fluxcd.io/name and namespace)"},
		{name: "Argo CD field manager", managers: []string{"manager", "argocd-controller"},
			want: "Argo CD (field manager argocd-controller in metadata.managedFields)"},
		{name: "Flux field manager", managers: []string{"kustomize-controller"},
			want: "Flux (field manager kustomize-controller in metadata.managedFields)"},
		{name: "Flux helm-controller field manager", managers: []string{"helm-controller"},
			want: "Flux (field manager helm-controller in metadata.managedFields)"},
		{name: "the tracking annotation names the Application before the field manager", annotations: map[string]string{core.ArgoCDTrackingAnnotation: "apps:cluster.x-k8s.io/MachineDeployment:demo/c1-md-0"},
			managers: []string{"argocd-controller"}, want: "Argo CD (Application apps, annotation argocd.argoproj.io/tracking-id)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "c1-md-0", Labels: tc.labels, Annotations: tc.annotations}}
			for _, m := range tc.managers {
				md.ManagedFields = append(md.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply})
			}
			g, ok := core.GitOpsOf(md)
			assert.Equal(t, tc.want != "", ok, "managed")
			if tc.want != "" {
				assert.Equal(t, tc.want, g.String())
			}
		})
	}
}

// TestVia: history marks the revisions a GitOps controller made, known by
// the field manager or the service account of the request, and no other.
func TestVia(t *testing.T) {
	for _, tc := range []struct {
		manager, user, want string
	}{
		{"rollout", "admin", "rollout"},
		{"", "admin", "-"},
		{"capi-topology", "system:serviceaccount:capi-system:capi-manager", "capi-topology"},
		{"argocd-controller", "system:serviceaccount:argocd:argocd-application-controller", "argocd-controller [Argo CD]"},
		{"kustomize-controller", "system:serviceaccount:flux-system:kustomize-controller", "kustomize-controller [Flux]"},
		{"helm-controller", "admin", "helm-controller [Flux]"},
		{"kubectl-client-side-apply", "system:serviceaccount:argocd:argocd-application-controller", "kubectl-client-side-apply [Argo CD]"},
		{"", "system:serviceaccount:flux-system:kustomize-controller", "[Flux]"},
		{"kubectl-patch", "system:serviceaccount:flux-system:other", "kubectl-patch"},
	} {
		assert.Equal(t, tc.want, core.Via(revisions.Record{FieldManager: tc.manager, ChangedBy: tc.user}), "%s by %s", tc.manager, tc.user)
	}
}

// gitOpsNow is the clock of these tests.
var gitOpsNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// writes records the writes a fake client receives, and the dry-run
// option each carried.
type writes struct {
	mu      sync.Mutex
	list    []string
	dryRuns [][]string
}

func (w *writes) add(verb string, obj client.Object, dryRun []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
	w.dryRuns = append(w.dryRuns, dryRun)
}

// dryRun is the dry-run option of each write, in order (nil for a write
// that is stored).
func (w *writes) dryRun() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]string(nil), w.dryRuns...)
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// newWriteRecordingClient is a fake client holding objs that records every
// write it receives.
func newWriteRecordingClient(objs ...client.Object) (client.WithWatch, *writes) {
	w := &writes{}
	cl := fake.NewClientBuilder().WithScheme(core.Scheme()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj, (&client.CreateOptions{}).ApplyOptions(opts).DryRun)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj, (&client.UpdateOptions{}).ApplyOptions(opts).DryRun)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj, (&client.PatchOptions{}).ApplyOptions(opts).DryRun)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj, (&client.DeleteOptions{}).ApplyOptions(opts).DryRun)
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return cl, w
}

// gitOpsWorld is cluster c1 in namespace demo: control plane
// c1-control-plane at v1.34.2 (revision 1: its machines labelled tier=old;
// revision 2, live: tier=new), worker pool c1-md-0 (revision 1 at v1.35.0,
// revision 2 at v1.34.1, revision 3, live, at v1.34.2), both with the marks
// of mark, and with server-populated fields (status, managedFields, owner
// references, finalizers, kubectl's last-applied configuration) that a
// manifest for Git must not carry. No template references: the fake client
// serves no template kinds.
func gitOpsWorld(t *testing.T, mark func(client.Object)) []client.Object {
	t.Helper()
	at := func(d time.Duration) time.Time { return gitOpsNow.Add(-d) }
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c1", UID: "cluster-uid"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c1-control-plane"},
		},
	}
	owner := []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: "cluster-uid"}}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c1-control-plane", UID: "kcp-uid", Generation: 4,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}, OwnerReferences: owner, Finalizers: []string{"kubeadm.controlplane.cluster.x-k8s.io"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](3), Version: "v1.34.2"},
	}
	kcp.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "new"}
	kcp.Status.Version = "v1.34.2"
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c1-md-0", UID: "md-uid", Generation: 7,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: "c1", "pool": "md-0"},
			Annotations:     map[string]string{core.LastAppliedAnnotation: `{"kind":"MachineDeployment"}`, "team": "workers"},
			OwnerReferences: owner, CreationTimestamp: metav1.NewTime(at(72 * time.Hour)),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: clusterv1.GroupVersion.String(),
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}},
		},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c1",
			Replicas:    ptr.To[int32](3),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "md-0"}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "md-0"}},
				Spec:       clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.34.2"},
			},
		},
	}
	md.Status.Replicas = ptr.To[int32](3)
	if mark != nil {
		mark(kcp)
		mark(md)
	}
	rec := func(n int64, d time.Duration, by, manager, cause string) revisions.Record {
		return revisions.Record{Revision: n, History: []int64{n}, ChangedBy: by, ChangedAt: at(d), FieldManager: manager, ChangeCause: cause, ChangeType: revisions.ChangeRollout}
	}
	stamp := func(obj client.Object, r revisions.Record) {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		for k, v := range r.Annotations() {
			if v != "" {
				ann[k] = v
			}
		}
		obj.SetAnnotations(ann)
	}
	kcpAt := func(tier string) revisions.Snapshot {
		k := kcp.DeepCopy()
		k.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": tier}
		s, err := revisions.ForKubeadmControlPlane(k)
		require.NoError(t, err)
		return s
	}
	mdAt := func(v string) revisions.Snapshot {
		m := md.DeepCopy()
		m.Spec.Template.Spec.Version = v
		s, err := revisions.ForMachineDeployment(m)
		require.NoError(t, err)
		return s
	}
	argo := "system:serviceaccount:argocd:argocd-application-controller"
	objs := []client.Object{
		revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, kcpAt("old"), rec(1, 48*time.Hour, argo, "argocd-controller", "created")),
		revisions.RolloutRevision(md, core.MachineDeployment.GVK, mdAt("v1.35.0"), rec(1, 47*time.Hour, "admin", "kubectl-create", "created")),
		revisions.RolloutRevision(md, core.MachineDeployment.GVK, mdAt("v1.34.1"), rec(2, 30*time.Hour, argo, "argocd-controller", "version v1.35.0 → v1.34.1")),
	}
	stamp(kcp, rec(2, 20*time.Hour, "admin", "kubectl-edit", "machineTemplate.metadata.labels[tier] old → new"))
	stamp(md, rec(3, 10*time.Hour, "admin", "rollout", "rollout md/c1-md-0 --version v1.34.2"))
	return append(objs, cluster, kcp, md)
}

// argoTracked marks an object as Argo CD marks what it applies.
func argoTracked(obj client.Object) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[core.ArgoCDTrackingAnnotation] = "prod-clusters:" + core.KindOf(obj).GVK.Group + "/" + core.KindOf(obj).GVK.Kind + ":" + obj.GetNamespace() + "/" + obj.GetName()
	obj.SetAnnotations(ann)
}

// TestGitOpsStop: a live undo or template switch of an object a GitOps
// controller manages stops, naming the controller, what applies the object
// and the way out, and sends nothing (exit 1); --force proceeds with a
// warning; dry runs and --emit are not stopped; an object without marks is
// not stopped.
func TestGitOpsStop(t *testing.T) {
	kcpStop := "error: cannot undo KubeadmControlPlane demo/c1-control-plane: it is managed by Argo CD (Application prod-clusters, annotation argocd.argoproj.io/tracking-id), " +
		"and Argo CD will revert a change made here at its next sync; make the change in Git instead: rollout undo kubeadmcontrolplane/c1-control-plane --to-revision 1 -n demo --emit yaml prints the manifest to commit (--emit patch: the merge patch); " +
		"to change the live object anyway, add --force\n"
	mdStop := "error: cannot roll out MachineDeployment demo/c1-md-0: it is managed by Argo CD (Application prod-clusters, annotation argocd.argoproj.io/tracking-id), " +
		"and Argo CD will revert a change made here at its next sync; make the change in Git instead: rollout machinedeployment/c1-md-0 --version v1.34.1 -n demo --emit yaml prints the manifest to commit (--emit patch: the merge patch); " +
		"to change the live object anyway, add --force\n"
	kcpForced := "Warning: KubeadmControlPlane demo/c1-control-plane is managed by Argo CD (Application prod-clusters, annotation argocd.argoproj.io/tracking-id); " +
		"changing it here anyway (--force): Argo CD will revert it at its next sync unless Git has the same change\n"
	for _, tc := range []struct {
		name    string
		mark    func(client.Object)
		args    []string
		code    int
		stderr  string // exact, when set
		written bool
	}{
		{name: "undo stops", mark: argoTracked, args: []string{"undo", "kcp/c1-control-plane"}, code: core.ExitError, stderr: kcpStop},
		{name: "template switch stops", mark: argoTracked, args: []string{"md/c1-md-0", "--version", "v1.34.1"}, code: core.ExitError, stderr: mdStop},
		{name: "undo --force proceeds", mark: argoTracked, args: []string{"undo", "kcp/c1-control-plane", "--force"}, code: core.ExitOK, stderr: kcpForced, written: true},
		{name: "switch --force proceeds", mark: argoTracked, args: []string{"md/c1-md-0", "--version", "v1.34.1", "--force"}, code: core.ExitOK, written: true,
			stderr: strings.ReplaceAll(kcpForced, "KubeadmControlPlane demo/c1-control-plane", "MachineDeployment demo/c1-md-0")},
		{name: "client dry run", mark: argoTracked, args: []string{"undo", "kcp/c1-control-plane", "--dry-run=client"}, code: core.ExitOK, stderr: ""},
		{name: "server dry run", mark: argoTracked, args: []string{"undo", "kcp/c1-control-plane", "--dry-run=server"}, code: core.ExitOK, stderr: "", written: true},
		{name: "emit", mark: argoTracked, args: []string{"undo", "kcp/c1-control-plane", "--emit", "yaml"}, code: core.ExitOK,
			stderr: "KubeadmControlPlane demo/c1-control-plane: printing the rollback from revision 2 to revision 1 for Git (nothing sent)\n" +
				"FIELD                  LIVE (REVISION 2)   REVISION 1\n" +
				"metadata.labels.tier   new                 old\n"},
		{name: "not managed", args: []string{"undo", "kcp/c1-control-plane"}, code: core.ExitOK, stderr: "", written: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, w := newWriteRecordingClient(gitOpsWorld(t, tc.mark)...)
			_, errOut, code := runFake(t, cl, gitOpsNow, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			if tc.stderr != "" || tc.code == core.ExitOK {
				assert.Equal(t, tc.stderr, errOut)
			}
			if tc.written {
				assert.NotEmpty(t, w.all(), "a change is sent")
			} else {
				assert.Empty(t, w.all(), "nothing is sent")
			}
		})
	}
}

// TestUndoEmit: --emit yaml prints the live object with the revision's
// content, without what the API server and controllers fill in and
// without the guard's stamps; --emit patch prints the merge patch with the
// object's identity and without the precondition; neither sends anything,
// and both are checked as the undo itself: a refused revision is refused
// with the same text and exit code.
func TestUndoEmit(t *testing.T) {
	for _, mark := range []struct {
		name string
		do   func(client.Object)
	}{{"managed by Argo CD", argoTracked}, {"not managed", nil}} {
		t.Run(mark.name, func(t *testing.T) {
			cl, w := newWriteRecordingClient(gitOpsWorld(t, mark.do)...)
			before := &clusterv1.MachineDeployment{}
			require.NoError(t, cl.Get(context.Background(), types.NamespacedName{Namespace: topoNS, Name: "c1-md-0"}, before))

			out, errOut, code := runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "2", "--emit", "yaml")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.Equal(t, "MachineDeployment demo/c1-md-0: printing the rollback from revision 3 to revision 2 for Git (nothing sent)\n"+
				"FIELD     LIVE (REVISION 3)   REVISION 2\n"+
				"version   v1.34.2             v1.34.1   (rolls out)\n", errOut, "what the manifest changes, on stderr: stdout is the manifest")
			if mark.do == nil {
				golden(t, "undo-emit-md.yaml", out)
			}
			var manifest clusterv1.MachineDeployment
			require.NoError(t, yaml.UnmarshalStrict([]byte(out), &manifest), out)
			assert.Equal(t, "v1.34.1", manifest.Spec.Template.Spec.Version, "revision 2's content")
			assert.Equal(t, before.Spec.Replicas, manifest.Spec.Replicas, "the rest of the live object")
			assert.Equal(t, "workers", manifest.Annotations["team"])
			for _, field := range []string{"status:", "managedFields:", "resourceVersion:", "uid:", "creationTimestamp:", "generation:", "ownerReferences:", "finalizers:", revisions.Prefix, core.LastAppliedAnnotation} {
				assert.NotContains(t, out, field)
			}
			assert.Equal(t, mark.do != nil, strings.Contains(out, core.ArgoCDTrackingAnnotation), "the GitOps marks are kept")

			out, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "2", "--emit", "patch")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.Equal(t, `{
  "apiVersion": "cluster.x-k8s.io/v1beta2",
  "kind": "MachineDeployment",
  "metadata": {
    "name": "c1-md-0",
    "namespace": "demo"
  },
  "spec": {
    "template": {
      "spec": {
        "version": "v1.34.1"
      }
    }
  }
}
`, out)

			// Refused as the undo itself is, with the same text and exit code.
			_, liveErr, liveCode := runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "1", "--force")
			out, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "1", "--emit", "yaml")
			assert.Equal(t, core.ExitRefused, code)
			assert.Equal(t, liveCode, code)
			assert.Empty(t, out)
			refusal, _, _ := strings.Cut(liveErr[strings.Index(liveErr, "error: "):], "\n")
			assert.Contains(t, refusal, "error: rollout-guard's policy refuses this change (checked before sending; nothing was changed): ")
			assert.Contains(t, refusal, "[rule WorkerNewerThanControlPlane]")
			assert.True(t, strings.HasSuffix(liveErr, refusal+"\nTo ask the guard itself, add --dry-run=server. To override (members of the guard's override groups only; recorded in the history), add --reason TEXT to --force.\n"),
				"--force without --reason sends no override and says so:\n%s", liveErr)
			assert.Equal(t, refusal+"\nThe guard refuses it the same way when a GitOps controller applies it. To ask the guard itself, run the undo with --dry-run=server instead of --emit.\n", errOut)

			assert.Empty(t, w.all(), "nothing is sent")
			after := &clusterv1.MachineDeployment{}
			require.NoError(t, cl.Get(context.Background(), types.NamespacedName{Namespace: topoNS, Name: "c1-md-0"}, after))
			assert.Equal(t, before.ResourceVersion, after.ResourceVersion)
		})
	}
}

// TestSwitchEmit: the template switch prints its change for Git too.
func TestSwitchEmit(t *testing.T) {
	cl, w := newWriteRecordingClient(gitOpsWorld(t, argoTracked)...)
	out, errOut, code := runFake(t, cl, gitOpsNow, "kcp/c1-control-plane", "--version", "v1.34.3", "--emit", "patch")
	require.Equal(t, core.ExitOK, code, errOut)
	var patch map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &patch))
	assert.Equal(t, map[string]any{"version": "v1.34.3"}, patch["spec"])
	assert.Equal(t, "KubeadmControlPlane", patch["kind"])

	out, errOut, code = runFake(t, cl, gitOpsNow, "kcp/c1-control-plane", "--version", "v1.34.3", "--emit", "yaml")
	require.Equal(t, core.ExitOK, code, errOut)
	var manifest controlplanev1.KubeadmControlPlane
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &manifest), out)
	assert.Equal(t, "v1.34.3", manifest.Spec.Version)
	assert.Equal(t, map[string]string{"tier": "new"}, manifest.Spec.MachineTemplate.ObjectMeta.Labels)
	assert.Empty(t, w.all(), "nothing is sent")
}

// TestEmitFlags: what --emit does not go with is refused before any request.
func TestEmitFlags(t *testing.T) {
	cl, w := newWriteRecordingClient()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"undo", "md/a", "--emit", "json"}, `--emit must be "yaml" or "patch", not "json"`},
		{[]string{"undo", "md/a", "--emit", "yaml", "-o", "yaml"}, "--emit prints the manifest or patch itself; leave out -o"},
		{[]string{"undo", "md/a", "--emit", "yaml", "--dry-run=server"}, "--emit sends nothing; leave out --dry-run (to ask the guard itself, use --dry-run=server without --emit)"},
		{[]string{"md/a", "--version", "v1.34.2", "--emit", "patch", "--force"}, "--force changes the live object; --emit changes nothing: use one of them"},
		{[]string{"undo", "md/a", "--emit", "patch", "--force", "--reason", "INC-1"}, "--reason is sent with a live change, as the override annotation; --emit changes nothing: give the reason in the Git commit message"},
		{[]string{"undo", "md/a", "--emit", "yaml", "--change-cause", "why"}, "--change-cause is sent with a live change; with --emit, give the reason in the Git commit message"},
		{[]string{"md/a", "--emit", "yaml"}, "--emit and --force go with --template, --bootstrap-template or --version"},
		{[]string{"md/a", "--force"}, "--emit and --force go with --template, --bootstrap-template or --version"},
		{[]string{"undo", "md/a", "--force", "--reason", " "}, "--reason is blank: the reason is recorded with the override in the revision history"},
	} {
		_, errOut, code := runFake(t, cl, gitOpsNow, tc.args...)
		assert.Equal(t, core.ExitError, code, "%q", tc.args)
		assert.Equal(t, "error: "+tc.want+"\n", errOut, "%q", tc.args)
	}
	assert.Empty(t, w.all())
}

// TestHistoryRevisionData: history --revision N -o yaml|json prints the
// revision as the object it is a revision of, its content at its place in
// the spec and its stamps as annotations; -o name its RolloutRevision;
// the table marks the revisions a GitOps controller made.
func TestHistoryRevisionData(t *testing.T) {
	cl := newFakeClient(gitOpsWorld(t, argoTracked)...)
	out, errOut, code := runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--revision", "2", "-o", "yaml")
	require.Equal(t, core.ExitOK, code, errOut)
	golden(t, "history-revision-md.yaml", out)

	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane", "--revision", "1", "-o", "json")
	require.Equal(t, core.ExitOK, code, errOut)
	var kcp controlplanev1.KubeadmControlPlane
	require.NoError(t, json.Unmarshal([]byte(out), &kcp), out)
	assert.Equal(t, core.KubeadmControlPlane.GVK, kcp.GroupVersionKind())
	assert.Equal(t, "v1.34.2", kcp.Spec.Version)
	assert.Equal(t, map[string]string{"tier": "old"}, kcp.Spec.MachineTemplate.ObjectMeta.Labels)
	assert.Equal(t, "1", kcp.Annotations[revisions.AnnotationRevision])
	assert.Equal(t, "argocd-controller", kcp.Annotations[revisions.AnnotationFieldManager])

	// The live revision, stamped on the object and not recorded yet.
	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--revision", "3", "-o", "json")
	require.Equal(t, core.ExitOK, code, errOut)
	var md clusterv1.MachineDeployment
	require.NoError(t, json.Unmarshal([]byte(out), &md), out)
	assert.Equal(t, "v1.34.2", md.Spec.Template.Spec.Version)
	assert.Equal(t, "3", md.Annotations[revisions.AnnotationRevision])

	out, _, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--revision", "2", "-o", "name")
	require.Equal(t, core.ExitOK, code)
	assert.Regexp(t, `^rolloutrevision\.rollout-guard\.io/c1-md-0-[0-9a-f]{10}\n$`, out)
	_, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--revision", "3", "-o", "name")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, "error: revision 3 of MachineDeployment demo/c1-md-0 is live and not recorded in a RolloutRevision yet (rollout-guard records it shortly after each change); try again in a moment, or print it with -o yaml\n", errOut)

	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	golden(t, "history-gitops-md.txt", out)
	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "-o", "json")
	require.Equal(t, core.ExitOK, code, errOut)
	var h v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(out), &h))
	require.Len(t, h.Revisions, 3)
	assert.Equal(t, []string{"", "Argo CD", ""}, []string{h.Revisions[0].GitOps, h.Revisions[1].GitOps, h.Revisions[2].GitOps})
}
