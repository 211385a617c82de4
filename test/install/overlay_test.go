package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestWithoutCertManager builds config/without-certmanager the way
// docs/install.md says, with a certificate of the test's own next to its
// kustomization: the overlay makes the Secret the Deployment mounts and
// sets the CA as the caBundle of every webhook; nothing of cert-manager is
// left; and the API server accepts all of it.
func TestWithoutCertManager(t *testing.T) {
	m, ca, serving := buildWithoutCertManager(t)
	for _, u := range m {
		assert.NotEqual(t, "cert-manager.io/v1", u.GetAPIVersion(), "%s %s", u.GetKind(), u.GetName())
		for k := range u.GetAnnotations() {
			assert.False(t, strings.HasPrefix(k, "cert-manager.io/"), "%s %s has annotation %s", u.GetKind(), u.GetName(), k)
		}
	}
	secret := as[corev1.Secret](t, m.find(t, "Secret", servingSecretName))
	assert.Equal(t, namespace, secret.Namespace)
	assert.Equal(t, corev1.SecretTypeTLS, secret.Type)
	assert.Equal(t, serving.certPEM, secret.Data["tls.crt"])
	assert.Equal(t, serving.keyPEM, secret.Data["tls.key"])
	assert.Equal(t, ca.pem, secret.Data["ca.crt"])

	clientConfigs, annotations := webhookConfigurations(t, m)
	assert.ElementsMatch(t, []string{validatingName, mutatingName}, keys(annotations))
	require.NotEmpty(t, clientConfigs)
	for name, cc := range clientConfigs {
		assert.Equal(t, ca.pem, cc.CABundle, "webhook %s trusts the CA", name)
	}

	// Everything but the webhook configurations' CA matches config/default.
	def := build(t, "config/default")
	dep := as[appsv1.Deployment](t, m.find(t, "Deployment", deploymentName))
	defDep := as[appsv1.Deployment](t, def.find(t, "Deployment", deploymentName))
	assert.Equal(t, defDep.Spec, dep.Spec)

	applyDryRun(t, m)
}

// buildWithoutCertManager builds config/without-certmanager the way
// docs/install.md says, from a copy of config/ (so the certificate files
// are not written into the repository) with a CA and a serving certificate
// of the test's own next to its kustomization.
func buildWithoutCertManager(t *testing.T) (manifest, *testCA, servingCert) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.CopyFS(config, os.DirFS(repoPath("config"))))
	overlay := filepath.Join(config, "without-certmanager")
	ca := newCA(t, "rollout-guard-own-ca")
	serving := ca.issue(t, []string{
		webhookServiceName + "." + namespace + ".svc",
		webhookServiceName + "." + namespace + ".svc.cluster.local",
	}, nil)
	for name, data := range map[string][]byte{"tls.crt": serving.certPEM, "tls.key": serving.keyPEM, "ca.crt": ca.pem} {
		require.NoError(t, os.WriteFile(filepath.Join(overlay, name), data, 0o600))
	}
	return build(t, overlay), ca, serving
}
