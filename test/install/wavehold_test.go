package install

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"

	"github.com/rollout-guard/rollout-guard/upgradehold"
)

// The wave-hold component, and the overlay docs/install-gitops.md shows for it
// (testdata/wave-hold/kustomization.yaml, quoted there as it is).
const (
	waveHoldComponent   = "config/wave-hold"
	waveHoldOverlay     = "testdata/wave-hold/kustomization.yaml"
	extensionConfigName = "rollout-guard"
)

// The guard's flags the component adds, and the overlay's soak after them.
var waveHoldArgs = []string{"--wave-hold", "--wave-soak=5m", "--wave-soak=15m"}

// TestWaveHoldComponent builds the overlay of docs/install-gitops.md —
// config/default plus config/wave-hold — and checks what it adds against
// the rest of the build: one ExtensionConfig that calls the Service the
// webhooks call, on its port, and has Cluster API inject the CA of the
// Secret the guard serves with (the one cert-manager writes); the guard's
// flags after the shipped ones; nothing else changed. The API server
// accepts all of it.
func TestWaveHoldComponent(t *testing.T) {
	m := buildWaveHoldOverlay(t, copyConfig(t), "default")
	def := build(t, "config/default")
	assert.Equal(t, slices.Sorted(slices.Values(append(def.ids(), "ExtensionConfig/"+extensionConfigName))), m.ids())
	for _, u := range def {
		if u.GetKind() == "Deployment" {
			continue
		}
		assert.Equal(t, u.Object, m.find(t, u.GetKind(), u.GetName()).Object, "%s %s", u.GetKind(), u.GetName())
	}
	defArgs := as[appsv1.Deployment](t, def.find(t, "Deployment", deploymentName)).Spec.Template.Spec.Containers[0].Args
	dep := as[appsv1.Deployment](t, m.find(t, "Deployment", deploymentName))
	assert.Equal(t, append(slices.Clone(defArgs), waveHoldArgs...), dep.Spec.Template.Spec.Containers[0].Args)
	assert.Empty(t, waveHoldProblems(t, m))

	cert := m.find(t, "Certificate", servingCertName)
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	ext := as[runtimev1.ExtensionConfig](t, m.find(t, "ExtensionConfig", extensionConfigName))
	assert.Equal(t, namespace+"/"+secretName, ext.Annotations[runtimev1.InjectCAFromSecretAnnotation], "the Secret cert-manager writes for the serving Certificate")
	assert.Equal(t, "rollout-guard", ext.Labels["app.kubernetes.io/part-of"])
	assert.Empty(t, ext.Namespace, "ExtensionConfigs are cluster-scoped")
	assert.Empty(t, clusterAPIAdmission(t, ext, false), "Cluster API's own admission of the ExtensionConfig, its RuntimeSDK gate on")
	assert.Equal(t, "spec: Forbidden: can be set only if the RuntimeSDK feature flag is enabled",
		clusterAPIAdmission(t, ext, true), "refused while the gate is off, as docs/install-gitops.md says")

	applyDryRun(t, m)
}

// clusterAPIAdmission runs Cluster API's own defaulting and validating
// webhook code of ExtensionConfigs on a copy of ext, with Cluster API's
// RuntimeSDK feature gate on (or off, gateOff), and returns its refusal,
// "" when it accepts.
func clusterAPIAdmission(t *testing.T, ext *runtimev1.ExtensionConfig, gateOff bool) string {
	t.Helper()
	require.NoError(t, feature.MutableGates.Set(fmt.Sprintf("%s=%t", feature.RuntimeSDK, !gateOff)))
	defer func() { require.NoError(t, feature.MutableGates.Set(string(feature.RuntimeSDK)+"=false")) }()
	ext = ext.DeepCopy()
	webhook := &coreadmission.ExtensionConfig{}
	require.NoError(t, webhook.Default(t.Context(), ext))
	if _, err := webhook.ValidateCreate(t.Context(), ext); err != nil {
		return err.Error()
	}
	return ""
}

// TestWaveHoldComponentWithoutCertManager: over config/without-certmanager
// the ExtensionConfig names the Secret made of your own files, which
// carries ca.crt, the key Cluster API reads.
func TestWaveHoldComponentWithoutCertManager(t *testing.T) {
	config := copyConfig(t)
	ca := newCA(t, "rollout-guard-own-ca")
	serving := ca.issue(t, []string{webhookServiceName + "." + namespace + ".svc"}, nil)
	for name, data := range map[string][]byte{"tls.crt": serving.certPEM, "tls.key": serving.keyPEM, "ca.crt": ca.pem} {
		require.NoError(t, os.WriteFile(filepath.Join(config, "without-certmanager", name), data, 0o600))
	}
	m := buildWaveHoldOverlay(t, config, "without-certmanager")
	assert.Empty(t, waveHoldProblems(t, m))
	secret := as[corev1.Secret](t, m.find(t, "Secret", servingSecretName))
	assert.Equal(t, ca.pem, secret.Data["ca.crt"])
	applyDryRun(t, m)
}

// TestWaveHoldFollowsTheInstall: moved to another namespace, the
// ExtensionConfig calls the Service there and names the Secret there.
func TestWaveHoldFollowsTheInstall(t *testing.T) {
	config := copyConfig(t)
	kustomization := filepath.Join(config, "default", "kustomization.yaml")
	data, err := os.ReadFile(kustomization)
	require.NoError(t, err)
	require.Contains(t, string(data), "namespace: "+namespace+"\n")
	require.NoError(t, os.WriteFile(kustomization, []byte(strings.Replace(string(data), "namespace: "+namespace+"\n", "namespace: guards\n", 1)), 0o600))
	m := buildWaveHoldOverlay(t, config, "default")
	assert.Empty(t, waveHoldProblems(t, m))
	ext := as[runtimev1.ExtensionConfig](t, m.find(t, "ExtensionConfig", extensionConfigName))
	assert.Equal(t, "guards", ext.Spec.ClientConfig.Service.Namespace)
	assert.Equal(t, "guards/"+servingSecretName, ext.Annotations[runtimev1.InjectCAFromSecretAnnotation])
}

// TestWaveHoldIsOptIn: neither shipped installation registers an
// extension or serves it, and the package's guard, started without
// --wave-hold, does not serve its paths.
func TestWaveHoldIsOptIn(t *testing.T) {
	withoutCertManager, _, _ := buildWithoutCertManager(t)
	for name, m := range map[string]manifest{"config/default": build(t, "config/default"), "config/without-certmanager": withoutCertManager} {
		assert.Empty(t, m.ofKind("ExtensionConfig"), name)
		args := as[appsv1.Deployment](t, m.find(t, "Deployment", deploymentName)).Spec.Template.Spec.Containers[0].Args
		for _, arg := range args {
			assert.False(t, strings.HasPrefix(arg, "--wave-"), "%s: %s", name, arg)
		}
	}
	for _, path := range []string{upgradehold.DiscoveryPath, upgradehold.BeforeClusterUpgradePath} {
		resp, body, err := postToGuard(t, env.GuardURL()+path, apiServerClientCertificates(), 0)
		require.NoError(t, err)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", path, body)
	}
}

// TestWaveHoldDocsQuoteTheOverlay: the overlay docs/install-gitops.md shows is the
// one the tests build, as it is.
func TestWaveHoldDocsQuoteTheOverlay(t *testing.T) {
	docs, err := os.ReadFile(repoPath("docs/install-gitops.md"))
	require.NoError(t, err)
	overlay, err := os.ReadFile(waveHoldOverlay)
	require.NoError(t, err)
	assert.Contains(t, string(docs), string(overlay), "docs/install-gitops.md does not quote %s as it is", waveHoldOverlay)
	assert.Contains(t, string(overlay), "components: [../"+waveHoldComponent+"]")
}

// buildWaveHoldOverlay builds the overlay of waveHoldOverlay beside the
// copy of config/ in config, over config/<base> instead of config/default.
func buildWaveHoldOverlay(t *testing.T, config, base string) manifest {
	t.Helper()
	overlay := filepath.Join(filepath.Dir(config), "my-overlay")
	require.NoError(t, os.Mkdir(overlay, 0o755))
	data, err := os.ReadFile(waveHoldOverlay)
	require.NoError(t, err)
	text := strings.Replace(string(data), "resources: [../config/default]", "resources: [../config/"+base+"]", 1)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(text), 0o600))
	return build(t, overlay)
}

// waveHoldProblems checks the one ExtensionConfig of m against the rest of
// m and says what does not match: it must call the guard's webhook
// Service (by name, namespace and port) at the root path, have Cluster API
// inject ca.crt of the Secret the guard's Deployment mounts as its
// serving certificate, carry no caBundle of its own, and the guard must
// run with --wave-hold.
func waveHoldProblems(t *testing.T, m manifest) []string {
	t.Helper()
	var problems []string
	add := func(s string) { problems = append(problems, s) }
	exts := m.ofKind("ExtensionConfig")
	if len(exts) != 1 {
		return []string{"not one ExtensionConfig"}
	}
	ext := as[runtimev1.ExtensionConfig](t, exts[0])
	svc := as[corev1.Service](t, m.find(t, "Service", webhookServiceName))
	dep := as[appsv1.Deployment](t, m.find(t, "Deployment", deploymentName))
	cc := ext.Spec.ClientConfig
	if cc.URL != "" {
		add("the ExtensionConfig calls a URL, not the Service")
	}
	if cc.Service.Name != svc.Name || cc.Service.Namespace != svc.Namespace {
		add("the ExtensionConfig calls Service " + cc.Service.Namespace + "/" + cc.Service.Name + ", not " + svc.Namespace + "/" + svc.Name)
	}
	if len(svc.Spec.Ports) != 1 || ptr.Deref(cc.Service.Port, 443) != svc.Spec.Ports[0].Port {
		add("the ExtensionConfig calls another port than the Service's")
	}
	if cc.Service.Path != "" {
		add("the ExtensionConfig calls under a path; the guard serves the Runtime SDK's paths at the root")
	}
	if len(cc.CABundle) != 0 {
		add("the ExtensionConfig carries a caBundle; Cluster API injects it")
	}
	var servingSecret string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "cert" && v.Secret != nil {
			servingSecret = v.Secret.SecretName
		}
	}
	if want := dep.Namespace + "/" + servingSecret; ext.Annotations[runtimev1.InjectCAFromSecretAnnotation] != want {
		add("the ExtensionConfig injects the CA of " + ext.Annotations[runtimev1.InjectCAFromSecretAnnotation] + ", not of the serving Secret " + want)
	}
	if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--wave-hold") {
		add("the guard runs without --wave-hold")
	}
	return problems
}
