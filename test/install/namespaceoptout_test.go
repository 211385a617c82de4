package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// The namespace opt-out component, and the overlay docs/install-access.md shows for
// it (testdata/namespace-opt-out/kustomization.yaml, quoted there as it is).
const (
	namespaceOptOutComponent = "config/namespace-opt-out"
	namespaceOptOutOverlay   = "testdata/namespace-opt-out/kustomization.yaml"
	optOutLabel              = "rollout-guard.io/policy"
	optOutValue              = "disabled"
)

// optOutSelector is the namespaceSelector the component gives every
// validating webhook: every namespace but those labelled
// rollout-guard.io/policy=disabled.
var optOutSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: optOutLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{optOutValue}},
}}

// TestNamespaceOptOutComponent builds the overlay of docs/install-access.md —
// config/default plus config/namespace-opt-out — and checks that every
// validating webhook, the same webhooks config/default registers, has
// exactly the opt-out selector, that no mutating webhook has any (history
// is stamped and recorded in an opted-out namespace too), and that nothing
// else changes. The API server accepts all of it.
func TestNamespaceOptOutComponent(t *testing.T) {
	m := buildNamespaceOptOutOverlay(t, copyConfig(t))
	assert.Empty(t, namespaceSelectorProblems(t, m, optOutSelector))

	def := build(t, "config/default")
	assert.Equal(t, def.ids(), m.ids())
	validating := func(m manifest) []string {
		var names []string
		for _, w := range as[admissionregistrationv1.ValidatingWebhookConfiguration](t, m.find(t, "ValidatingWebhookConfiguration", validatingName)).Webhooks {
			names = append(names, w.Name)
		}
		return names
	}
	assert.Equal(t, validating(def), validating(m), "the component selects the webhooks config/default registers, and adds none")
	assert.Len(t, validating(m), 13, "config/webhook/manifests.yaml registers 13 validating webhooks: an UPDATE and a CREATE one for each of 6 kinds, and the RolloutRevision record guard")
	for _, u := range def {
		got := m.find(t, u.GetKind(), u.GetName()).DeepCopy()
		if u.GetKind() == "ValidatingWebhookConfiguration" {
			webhooks, _, err := unstructured.NestedSlice(got.Object, "webhooks")
			require.NoError(t, err)
			for _, w := range webhooks {
				delete(w.(map[string]any), "namespaceSelector")
			}
			require.NoError(t, unstructured.SetNestedSlice(got.Object, webhooks, "webhooks"))
		}
		assert.Equal(t, u.Object, got.Object, "%s %s: only the validating webhooks' namespaceSelector is added", u.GetKind(), u.GetName())
	}

	applyDryRun(t, m)
}

// TestNamespaceOptOutIsOptIn: no webhook of the shipped installations has a
// namespaceSelector; only an overlay that lists the component does.
func TestNamespaceOptOutIsOptIn(t *testing.T) {
	assert.Empty(t, namespaceSelectorProblems(t, build(t, "config/default"), nil))
	withoutCertManager, _, _ := buildWithoutCertManager(t)
	assert.Empty(t, namespaceSelectorProblems(t, withoutCertManager, nil))
}

// TestNamespaceOptOutCoversEveryValidatingWebhook: a validating webhook
// added to config/webhook/manifests.yaml and not to the component fails the
// checks of TestNamespaceOptOutComponent, naming the webhook.
func TestNamespaceOptOutCoversEveryValidatingWebhook(t *testing.T) {
	config := copyConfig(t)
	manifests := filepath.Join(config, "webhook", "manifests.yaml")
	data, err := os.ReadFile(manifests)
	require.NoError(t, err)
	text := string(data)
	// A copy of the last validating webhook under another name, at the end
	// of the ValidatingWebhookConfiguration.
	const last = "  - name: validate-create.cluster.rollout-guard.io\n"
	start := strings.Index(text, last)
	end := strings.Index(text, "\n---\n")
	require.True(t, start >= 0 && end > start)
	added := strings.Replace(text[start:end+1], "validate-create.cluster.", "validate-create.extra.", 1)
	text = text[:end+1] + added + text[end+1:]
	require.NoError(t, os.WriteFile(manifests, []byte(text), 0o600))

	problems := strings.Join(namespaceSelectorProblems(t, buildNamespaceOptOutOverlay(t, config), optOutSelector), "\n")
	assert.Contains(t, problems, "validating webhook validate-create.extra.rollout-guard.io: namespaceSelector <nil>")
	assert.NotContains(t, problems, "validate-create.cluster.rollout-guard.io")
}

// TestNamespaceOptOutThroughTheAPIServer registers the component's
// validating webhooks with the package's API server, pointed at the
// package's guard as the environment registers the shipped ones: in a
// namespace labelled rollout-guard.io/policy=disabled a control-plane
// downgrade is allowed, and still stamped and recorded; in an unlabelled
// namespace the same downgrade is refused with the guard's message. The
// environment's registration is restored when the test ends.
func TestNamespaceOptOutThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	const optedOut, policed = "install-opted-out", "install-not-opted-out"
	spec := framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.34.3"}
	out := env.NewWorld(t, optedOut, spec)
	in := env.NewWorld(t, policed, spec)
	t.Cleanup(func() {
		for _, ns := range []string{optedOut, policed} {
			_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	require.NoError(t, env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optedOut}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, optOutLabel, optOutValue)))))

	const downgrade = `{"spec":{"version":"v1.34.1"}}`
	patchKCP := func(w *framework.World, patch string, opts ...client.PatchOption) (*controlplanev1.KubeadmControlPlane, error) {
		kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.KCP.Name}}
		return kcp, env.Client.Patch(context.Background(), kcp, client.RawPatch(types.MergePatchType, []byte(patch)), opts...)
	}
	wantRefusal := `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: ` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.35.2 to v1.34.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`
	_, err := patchKCP(out, downgrade, client.DryRunAll)
	require.EqualError(t, err, wantRefusal, "before the component is registered, the label changes nothing")

	// The component's ValidatingWebhookConfiguration, pointed at the
	// package's guard instead of the Service, in place of the environment's.
	built := buildNamespaceOptOutOverlay(t, copyConfig(t)).find(t, "ValidatingWebhookConfiguration", validatingName)
	data, err := yaml.Marshal(built.Object)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "validating.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	objs, err := framework.LocalWebhookConfigurations(file, env.GuardURL(), env.GuardCABundle())
	require.NoError(t, err)
	require.Len(t, objs, 1)
	optOut, ok := objs[0].(*admissionregistrationv1.ValidatingWebhookConfiguration)
	require.True(t, ok, "%T", objs[0])
	t.Cleanup(func() {
		// The environment's own registration, as StartGuard makes it; then
		// wait until the API server refuses in the labelled namespace again,
		// so the tests after this one see the guard as registered.
		objs, err := framework.LocalWebhookConfigurations(env.GuardManifests(), env.GuardURL(), env.GuardCABundle())
		require.NoError(t, err)
		for _, obj := range objs {
			if cfg, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
				replaceValidatingWebhookConfiguration(t, cfg)
			}
		}
		restored := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: validatingName}, restored))
		for _, w := range restored.Webhooks {
			// The API server's default: every namespace.
			assert.Equal(t, &metav1.LabelSelector{}, w.NamespaceSelector, "webhook %s restored", w.Name)
		}
		framework.WaitFor(t, 30*time.Second, 100*time.Millisecond, "the environment's validating webhooks to judge the labelled namespace again", func() (bool, string) {
			_, err := patchKCP(out, `{"spec":{"version":"v1.33.0"}}`, client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "[rule ControlPlaneDowngrade]"), fmt.Sprint(err)
		})
	})
	replaceValidatingWebhookConfiguration(t, optOut)

	registered := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: validatingName}, registered))
	require.Len(t, registered.Webhooks, 13)
	for _, w := range registered.Webhooks {
		assert.Equal(t, optOutSelector, w.NamespaceSelector, "webhook %s as the API server stores it", w.Name)
	}

	// The API server takes the new registration and the namespace's label
	// up asynchronously: wait until a dry run in the labelled namespace is
	// allowed.
	framework.WaitFor(t, 30*time.Second, 100*time.Millisecond, "a downgrade in the labelled namespace to be allowed", func() (bool, string) {
		_, err := patchKCP(out, downgrade, client.DryRunAll)
		return err == nil, fmt.Sprint(err)
	})

	t.Run("in the labelled namespace a downgrade is allowed, stamped and recorded", func(t *testing.T) {
		kcp, err := patchKCP(out, downgrade)
		require.NoError(t, err)
		assert.Equal(t, "v1.34.1", kcp.Spec.Version)
		assert.Equal(t, "2", kcp.GetAnnotations()[revisions.AnnotationRevision], "the mutating webhook stamped it: %v", kcp.GetAnnotations())
		assert.NotEmpty(t, kcp.GetAnnotations()[revisions.AnnotationChangedBy])
		var crs rgv1alpha1.RolloutRevisionList
		require.NoError(t, env.Client.List(ctx, &crs, client.InNamespace(optedOut),
			client.MatchingLabels{revisions.LabelOwnerUID: string(kcp.GetUID()), revisions.LabelRevision: "1"}))
		assert.Len(t, crs.Items, 1, "the revision the downgrade replaced is recorded")
	})
	t.Run("in an unlabelled namespace the same downgrade is refused", func(t *testing.T) {
		_, err := patchKCP(in, downgrade)
		require.EqualError(t, err, wantRefusal)
	})
}

// TestNamespaceOptOutDocsQuoteTheOverlay: the overlay docs/install-access.md shows
// is the one the tests build, as it is.
func TestNamespaceOptOutDocsQuoteTheOverlay(t *testing.T) {
	docs, err := os.ReadFile(repoPath("docs/install-access.md"))
	require.NoError(t, err)
	overlay, err := os.ReadFile(namespaceOptOutOverlay)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(docs), "```yaml\n"+string(overlay)+"```\n"), "docs/install-access.md does not quote %s as it is", namespaceOptOutOverlay)
	assert.Contains(t, string(overlay), "components: [../"+namespaceOptOutComponent+"]")
}

// buildNamespaceOptOutOverlay builds the overlay of namespaceOptOutOverlay
// beside the copy of config/ in config, as docs/install-access.md has it written.
func buildNamespaceOptOutOverlay(t *testing.T, config string) manifest {
	t.Helper()
	overlay := filepath.Join(filepath.Dir(config), "my-overlay")
	require.NoError(t, os.Mkdir(overlay, 0o755))
	data, err := os.ReadFile(namespaceOptOutOverlay)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o600))
	return build(t, overlay)
}

// namespaceSelectorProblems says which webhook of m does not have the
// namespaceSelector it should: want for every validating webhook (nil: none),
// none for every mutating one.
func namespaceSelectorProblems(t *testing.T, m manifest, want *metav1.LabelSelector) []string {
	t.Helper()
	var problems []string
	check := func(kind, name string, got, want *metav1.LabelSelector) {
		if !equality.Semantic.DeepEqual(got, want) {
			problems = append(problems, fmt.Sprintf("%s webhook %s: namespaceSelector %s, want %s", kind, name, describeSelector(got), describeSelector(want)))
		}
	}
	validating, mutating := m.ofKind("ValidatingWebhookConfiguration"), m.ofKind("MutatingWebhookConfiguration")
	if len(validating) == 0 || len(mutating) == 0 {
		problems = append(problems, fmt.Sprintf("%d validating and %d mutating webhook configurations", len(validating), len(mutating)))
	}
	for _, u := range validating {
		for _, w := range as[admissionregistrationv1.ValidatingWebhookConfiguration](t, u).Webhooks {
			check("validating", w.Name, w.NamespaceSelector, want)
		}
	}
	for _, u := range mutating {
		for _, w := range as[admissionregistrationv1.MutatingWebhookConfiguration](t, u).Webhooks {
			check("mutating", w.Name, w.NamespaceSelector, nil)
		}
	}
	return problems
}

// describeSelector prints a label selector, or <nil>.
func describeSelector(s *metav1.LabelSelector) string {
	if s == nil {
		return "<nil>"
	}
	return metav1.FormatLabelSelector(s)
}

// replaceValidatingWebhookConfiguration replaces the API server's
// ValidatingWebhookConfiguration of cfg's name with cfg.
func replaceValidatingWebhookConfiguration(t *testing.T, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cfg), existing); err != nil {
			return err
		}
		replacement := cfg.DeepCopy()
		replacement.ResourceVersion = existing.ResourceVersion
		return env.Client.Update(context.Background(), replacement)
	}))
}
