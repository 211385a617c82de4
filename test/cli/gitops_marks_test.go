package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// markAs adds labels and annotations to obj as the field manager manager
// writes them, as a tool leaves them on what it applies.
func markAs(t *testing.T, obj client.Object, manager string, labels, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	require.NoError(t, err)
	require.NoError(t, env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", patch), client.FieldOwner(manager)))
}

// installArgoCDApplications serves Argo CD's Application kind (the names
// of Argo CD's own CustomResourceDefinition, its schema left open) and
// creates Application argocd/name.
func installArgoCDApplications(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "applications.argoproj.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "argoproj.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "applications", Singular: "application", Kind: "Application", ListKind: "ApplicationList", ShortNames: []string{"app", "apps"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}}}},
		},
	}
	if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"namespace": "argocd", "name": name},
		"spec": map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/clusters.git", "path": "prod", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc"}},
	}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := env.Client.Create(ctx, app.DeepCopy())
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(c, err)
		}
	}, 30*time.Second, 100*time.Millisecond, "Argo CD's Application kind was never served")
}

func ptrTo[T any](v T) *T { return &v }

// TestGitOpsMarksAsToolsLeaveThem: objects labelled and annotated as Helm,
// Argo CD (label and annotation tracking) and Flux leave what they apply.
// Helm's app.kubernetes.io/instance alone is no GitOps controller's: undo
// and the template switch proceed. The same label with an Argo CD
// Application of that name, Argo CD's tracking annotation and Flux's labels
// stop them, with the way out through Git. A user who may not read Argo CD's
// Applications is told so, and the change proceeds.
func TestGitOpsMarksAsToolsLeaveThem(t *testing.T) {
	installArgoCDApplications(t, "prod-clusters")
	stop := func(ns, by string) string {
		return "cannot roll out MachineDeployment " + ns + "/" + mdName + ": it is managed by " + by + " will revert a change made here at its next sync; make the change in Git instead: rollout machinedeployment/" + mdName +
			" --template devmachinetemplate/c1-md-1 -n " + ns + " --emit yaml prints the manifest to commit (--emit patch: the merge patch); to change the live object anyway, add --force"
	}
	for _, tc := range []struct {
		name, ns, manager   string
		labels, annotations map[string]string
		// stop is the switch's refusal after "it is managed by "; "" when it proceeds.
		stop string
	}{
		{name: "Helm", ns: "cli-marks-helm", manager: "helm",
			labels:      map[string]string{"app.kubernetes.io/instance": "c1", "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "capi-cluster-0.3.1"},
			annotations: map[string]string{"meta.helm.sh/release-name": "c1", "meta.helm.sh/release-namespace": "cli-marks-helm"}},
		{name: "Argo CD label tracking", ns: "cli-marks-argocd-label", manager: "argocd-label-test",
			labels: map[string]string{"app.kubernetes.io/instance": "prod-clusters"},
			stop:   "Argo CD (Application prod-clusters, label app.kubernetes.io/instance, Argo CD's tracking label), and Argo CD"},
		{name: "Argo CD annotation tracking", ns: "cli-marks-argocd-annotation", manager: "argocd-controller",
			annotations: map[string]string{rollout.ArgoCDTrackingAnnotation: "prod-clusters:cluster.x-k8s.io/MachineDeployment:cli-marks-argocd-annotation/" + mdName},
			stop:        "Argo CD (Application prod-clusters, annotation argocd.argoproj.io/tracking-id), and Argo CD"},
		{name: "Flux", ns: "cli-marks-flux", manager: "kustomize-controller",
			labels: map[string]string{rollout.FluxKustomizeNameLabel: "clusters", rollout.FluxKustomizeNamespaceLabel: "flux-system"},
			stop:   "Flux (Kustomization flux-system/clusters, labels kustomize.toolkit.fluxcd.io/name and namespace), and Flux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			markAs(t, w.MD, tc.manager, tc.labels, tc.annotations)
			before := resourceVersions(t, w.MD)
			r := rolloutCmd(t, "md/"+mdName, "--template", "devmachinetemplate/c1-md-1", "-n", tc.ns)
			if tc.stop != "" {
				r.fails(t, stop(tc.ns, tc.stop))
				assert.Equal(t, before, resourceVersions(t, w.MD), "nothing was written")
				r = rolloutCmd(t, "md/"+mdName, "--template", "devmachinetemplate/c1-md-1", "-n", tc.ns, "--emit", "yaml")
				assert.Contains(t, r.ok(t), "name: c1-md-1", "the way out: the manifest for Git")
				assert.Equal(t, before, resourceVersions(t, w.MD), "--emit writes nothing")
				return
			}
			assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out: infrastructureRef c1-md-0 → c1-md-1\n", r.ok(t))
			assert.Empty(t, r.stderr)
			waitRecorded(t, w.MD)
			r = rolloutCmd(t, "undo", "md/"+mdName, "-n", tc.ns)
			assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 1 (now revision 3)\n", lastLine(r.ok(t)))
			assert.Empty(t, r.stderr)
		})
	}

	t.Run("Applications unreadable", func(t *testing.T) {
		ns := "cli-marks-unreadable"
		w := newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
		markAs(t, w.MD, "argocd-label-test", map[string]string{"app.kubernetes.io/instance": "prod-clusters"}, nil)
		// Every right in the namespace, none outside it: Argo CD's
		// Applications live elsewhere.
		grantViewer(t, ns, []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}, w.MD, w.KCP)
		r := rolloutAs(t, "viewer", "md/"+mdName, "--template", "devmachinetemplate/c1-md-1", "-n", ns)
		assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out: infrastructureRef c1-md-0 → c1-md-1\n", r.ok(t))
		assert.Equal(t, "Warning: MachineDeployment "+ns+"/c1-md-0 has the label app.kubernetes.io/instance=prod-clusters, which Argo CD's label tracking sets (as does Helm), and the CLI cannot read Argo CD's Applications to tell which "+
			`(applications.argoproj.io "prod-clusters" is forbidden: User "viewer" cannot list resource "applications" in API group "argoproj.io" at the cluster scope): if Argo CD manages it, it will revert this change at its next sync`+"\n", r.stderr)
	})
}
