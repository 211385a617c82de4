package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The GitOps snippets of docs/install-gitops.md ("Argo CD and Flux"), quoted there
// as they are: the overlay Argo CD syncs, with its sync waves, and Flux's
// Kustomizations.
const (
	argoCDOverlay      = "testdata/argocd/kustomization.yaml"
	fluxKustomizations = "testdata/flux/kustomizations.yaml"
	syncWaveAnnotation = "argocd.argoproj.io/sync-wave"
)

// TestArgoCDSyncWaves builds the overlay of docs/install-gitops.md — config/default
// and the overlay's patches — and checks the sync wave of every object:
// each has one; the webhook configurations' wave is after every other
// object of the guard and before the Cluster API objects (wave 0); nothing
// the Deployment needs to become ready is in a later wave than the
// Deployment. So Argo CD applies the guard, waits for its Deployment's
// health, registers the webhooks, and only then syncs what they police. The
// patches change nothing but the annotation.
func TestArgoCDSyncWaves(t *testing.T) {
	m := buildArgoCDOverlay(t, argoCDOverlay)
	assert.Empty(t, syncWaveProblems(m))

	def := build(t, "config/default")
	assert.Equal(t, def.ids(), m.ids())
	for _, u := range def {
		got := m.find(t, u.GetKind(), u.GetName()).DeepCopy()
		annotations := got.GetAnnotations()
		delete(annotations, syncWaveAnnotation)
		if len(annotations) == 0 {
			annotations = nil
		}
		got.SetAnnotations(annotations)
		assert.Equal(t, u.Object, got.Object, "%s %s: only the sync wave is added", u.GetKind(), u.GetName())
	}
	// The waves the docs name.
	assert.Equal(t, "-2", m.find(t, "Deployment", deploymentName).GetAnnotations()[syncWaveAnnotation])
	assert.Equal(t, "-1", m.find(t, "ValidatingWebhookConfiguration", validatingName).GetAnnotations()[syncWaveAnnotation])
	assert.Equal(t, "-1", m.find(t, "MutatingWebhookConfiguration", mutatingName).GetAnnotations()[syncWaveAnnotation])
}

// TestArgoCDSyncWavesCatchAnUnorderedOverlay: the checks of
// TestArgoCDSyncWaves fail on the snippet docs/install-gitops.md showed before,
// which put the guard's namespaced objects in wave -1 and left the
// cluster-scoped ones — its Namespace, its ClusterRoles and their bindings,
// the webhook configurations — in wave 0: a Deployment that cannot become
// ready before its RBAC, and webhooks registered with the objects they
// police.
func TestArgoCDSyncWavesCatchAnUnorderedOverlay(t *testing.T) {
	const unordered = `resources: [../config/default]
patches:
  - target: {namespace: rollout-guard-system}
    patch: |-
      - op: add
        path: /metadata/annotations/argocd.argoproj.io~1sync-wave
        value: "-1"
`
	overlay := filepath.Join(t.TempDir(), "unordered.yaml")
	require.NoError(t, os.WriteFile(overlay, []byte(unordered), 0o600))
	problems := strings.Join(syncWaveProblems(buildArgoCDOverlay(t, overlay)), "\n")
	for _, want := range []string{
		"Namespace rollout-guard-system has no argocd.argoproj.io/sync-wave annotation",
		"ClusterRoleBinding rollout-guard has no argocd.argoproj.io/sync-wave annotation",
		"ValidatingWebhookConfiguration rollout-guard-validating is in wave 0, want a wave before 0",
		"MutatingWebhookConfiguration rollout-guard-mutating (wave 0) is not after CustomResourceDefinition rolloutrevisions.rollout-guard.io (wave 0), ClusterRole rollout-guard (wave 0)",
		"Namespace rollout-guard-system (wave 0) is after the Deployment (wave -1), which needs it to become ready",
		"ClusterRoleBinding rollout-guard (wave 0) is after the Deployment (wave -1)",
		"ClusterRole rollout-guard-control-planes (wave 0) is after the Deployment (wave -1)",
	} {
		assert.Contains(t, problems, want)
	}
	// The Role and RoleBinding are namespaced: that snippet did order them.
	assert.NotContains(t, problems, "Role rollout-guard-leader-election (wave")
}

// TestFluxHealthCheckNamesTheDeployment: the Flux Kustomization of
// docs/install-gitops.md builds the path it names, checks the health of exactly
// the Deployment that path makes (its name and namespace), and the
// Kustomization of the clusters depends on it.
func TestFluxHealthCheckNamesTheDeployment(t *testing.T) {
	type kustomization struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Path      string `json:"path"`
			DependsOn []struct {
				Name string `json:"name"`
			} `json:"dependsOn"`
			HealthChecks []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Name       string `json:"name"`
				Namespace  string `json:"namespace"`
			} `json:"healthChecks"`
		} `json:"spec"`
	}
	data, err := os.ReadFile(fluxKustomizations)
	require.NoError(t, err)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var ks []kustomization
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var k kustomization
		require.NoError(t, yaml.Unmarshal(doc, &k))
		require.Equal(t, "Kustomization", k.Kind)
		ks = append(ks, k)
	}
	require.Len(t, ks, 2)
	guard, clusters := ks[0], ks[1]

	path, ok := strings.CutPrefix(guard.Spec.Path, "./")
	require.True(t, ok, "path %q is relative to the repository's root", guard.Spec.Path)
	deps := build(t, path).ofKind("Deployment")
	require.Len(t, deps, 1)
	require.Len(t, guard.Spec.HealthChecks, 1)
	hc := guard.Spec.HealthChecks[0]
	assert.Equal(t, "apps/v1", hc.APIVersion)
	assert.Equal(t, "Deployment", hc.Kind)
	assert.Equal(t, deps[0].GetName(), hc.Name)
	assert.Equal(t, deps[0].GetNamespace(), hc.Namespace)

	require.Len(t, clusters.Spec.DependsOn, 1)
	assert.Equal(t, guard.Metadata.Name, clusters.Spec.DependsOn[0].Name)
}

// TestGitOpsDocsQuoteTheSnippets: the Argo CD overlay and the Flux
// Kustomizations docs/install-gitops.md shows are the ones the tests check, as
// they are.
func TestGitOpsDocsQuoteTheSnippets(t *testing.T) {
	docs, err := os.ReadFile(repoPath("docs/install-gitops.md"))
	require.NoError(t, err)
	for _, name := range []string{argoCDOverlay, fluxKustomizations} {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.True(t, strings.Contains(string(docs), "```yaml\n"+string(data)+"```\n"), "docs/install-gitops.md does not quote %s as it is", name)
	}
}

// buildArgoCDOverlay builds the overlay in file beside a copy of config/,
// as docs/install-gitops.md has it written.
func buildArgoCDOverlay(t *testing.T, file string) manifest {
	t.Helper()
	config := copyConfig(t)
	overlay := filepath.Join(filepath.Dir(config), "my-overlay")
	require.NoError(t, os.Mkdir(overlay, 0o755))
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o600))
	return build(t, overlay)
}

// syncWaveProblems checks the Argo CD sync waves of the guard's objects in
// m (every object of m is the guard's) and says what is out of order:
// an object without a wave (Argo CD's default, 0, is the Cluster API
// objects' wave); webhook configurations not after every other object of
// the guard, or not before wave 0; and what the Deployment needs to become
// ready — its Namespace, its ServiceAccount, every binding of that
// ServiceAccount and the role it binds, the Services that select its pods,
// the Secrets it mounts, the cert-manager objects — in a later wave than
// the Deployment.
func syncWaveProblems(m manifest) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	id := func(u *unstructured.Unstructured) string { return u.GetKind() + " " + u.GetName() }

	waves := map[*unstructured.Unstructured]int{}
	for _, u := range m {
		value, ok := u.GetAnnotations()[syncWaveAnnotation]
		if !ok {
			add("%s has no %s annotation: Argo CD syncs it in wave 0, with the Cluster API objects", id(u), syncWaveAnnotation)
			waves[u] = 0
			continue
		}
		wave, err := strconv.Atoi(value)
		if err != nil {
			add("%s: %s=%q is not a number", id(u), syncWaveAnnotation, value)
		}
		waves[u] = wave
	}

	isWebhookConfiguration := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "ValidatingWebhookConfiguration" || u.GetKind() == "MutatingWebhookConfiguration"
	}
	var webhookConfigurations []*unstructured.Unstructured
	for _, u := range m {
		if isWebhookConfiguration(u) {
			webhookConfigurations = append(webhookConfigurations, u)
		}
	}
	if len(webhookConfigurations) == 0 {
		add("no webhook configuration")
	}
	for _, w := range webhookConfigurations {
		if waves[w] >= 0 {
			add("%s is in wave %d, want a wave before 0, the Cluster API objects' wave", id(w), waves[w])
		}
		var notBefore []string
		for _, u := range m {
			if !isWebhookConfiguration(u) && waves[u] >= waves[w] {
				notBefore = append(notBefore, fmt.Sprintf("%s (wave %d)", id(u), waves[u]))
			}
		}
		if len(notBefore) > 0 {
			add("%s (wave %d) is not after %s: Argo CD would register the webhooks before the guard serves them",
				id(w), waves[w], strings.Join(notBefore, ", "))
		}
	}

	deps := m.ofKind("Deployment")
	if len(deps) != 1 {
		add("%d Deployments, want one", len(deps))
		return problems
	}
	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deps[0].Object, &dep); err != nil {
		add("decoding the Deployment: %v", err)
		return problems
	}
	lookup := func(kind, namespace, name string) *unstructured.Unstructured {
		for _, u := range m {
			if u.GetKind() == kind && u.GetNamespace() == namespace && u.GetName() == name {
				return u
			}
		}
		add("the Deployment needs %s %s/%s, which the manifest does not make", kind, namespace, name)
		return nil
	}
	var needs []*unstructured.Unstructured
	needs = append(needs, lookup("Namespace", "", dep.Namespace))
	sa := dep.Spec.Template.Spec.ServiceAccountName
	needs = append(needs, lookup("ServiceAccount", dep.Namespace, sa))
	for _, u := range m {
		var subjects []rbacv1.Subject
		var roleRef rbacv1.RoleRef
		switch u.GetKind() {
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				add("decoding %s: %v", id(u), err)
				continue
			}
			subjects, roleRef = b.Subjects, b.RoleRef
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				add("decoding %s: %v", id(u), err)
				continue
			}
			subjects, roleRef = b.Subjects, b.RoleRef
		default:
			continue
		}
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == dep.Namespace
		}) {
			continue
		}
		needs = append(needs, u)
		roleNamespace := ""
		if roleRef.Kind == "Role" {
			roleNamespace = u.GetNamespace()
		}
		needs = append(needs, lookup(roleRef.Kind, roleNamespace, roleRef.Name))
	}
	podLabels := labels.Set(dep.Spec.Template.Labels)
	for _, u := range m {
		switch {
		case u.GetKind() == "Service":
			var svc corev1.Service
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
				add("decoding %s: %v", id(u), err)
				continue
			}
			if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
				needs = append(needs, u)
			}
		case u.GetKind() == "Secret" && u.GetNamespace() == dep.Namespace:
			for _, v := range dep.Spec.Template.Spec.Volumes {
				mounted := v.Secret != nil && v.Secret.SecretName == u.GetName()
				if v.Projected != nil {
					for _, s := range v.Projected.Sources {
						mounted = mounted || (s.Secret != nil && s.Secret.Name == u.GetName())
					}
				}
				if mounted {
					needs = append(needs, u)
					break
				}
			}
		case strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/"):
			needs = append(needs, u)
		}
	}
	seen := map[*unstructured.Unstructured]bool{}
	for _, u := range needs {
		if u == nil || seen[u] {
			continue
		}
		seen[u] = true
		if waves[u] > waves[deps[0]] {
			add("%s (wave %d) is after the Deployment (wave %d), which needs it to become ready", id(u), waves[u], waves[deps[0]])
		}
	}
	return problems
}
