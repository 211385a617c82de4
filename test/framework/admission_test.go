package framework_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestClusterAPIWebhookConfigurations checks that Cluster API's shipped
// webhook registrations load with clusterctl's names, none of them the
// guard's, every webhook pointed at the local server.
func TestClusterAPIWebhookConfigurations(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := framework.FindRepoRoot(wd)
	require.NoError(t, err)
	capiDir, err := framework.ClusterAPIDir(root)
	require.NoError(t, err)

	objs, err := framework.ClusterAPIWebhookConfigurations(capiDir, "https://127.0.0.1:9443", []byte("ca"))
	require.NoError(t, err)
	names := map[string]bool{}
	webhooks := map[string]bool{}
	check := func(name, url string, ca []byte) {
		webhooks[name] = true
		assert.True(t, strings.HasPrefix(url, "https://127.0.0.1:9443/"), "webhook %s: %s", name, url)
		assert.Equal(t, []byte("ca"), ca, "webhook %s", name)
	}
	for _, obj := range objs {
		assert.False(t, names[obj.GetName()], "configuration %s twice", obj.GetName())
		names[obj.GetName()] = true
		assert.True(t, strings.HasPrefix(obj.GetName(), "capi-"), obj.GetName())
		switch cfg := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				check(w.Name, *w.ClientConfig.URL, w.ClientConfig.CABundle)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				check(w.Name, *w.ClientConfig.URL, w.ClientConfig.CABundle)
			}
		}
	}
	assert.Len(t, names, 6)
	assert.True(t, names["capi-validating-webhook-configuration"])
	assert.True(t, names["capi-kubeadm-control-plane-mutating-webhook-configuration"])
	for _, w := range []string{
		"validation.cluster.cluster.x-k8s.io", "default.cluster.cluster.x-k8s.io",
		"validation.clusterclass.cluster.x-k8s.io",
		"validation.machinedeployment.cluster.x-k8s.io", "default.machinedeployment.cluster.x-k8s.io",
		"validation.machineset.cluster.x-k8s.io", "default.machineset.cluster.x-k8s.io",
		"validation.kubeadmcontrolplane.controlplane.cluster.x-k8s.io", "default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io",
	} {
		assert.True(t, webhooks[w], "webhook %s missing", w)
	}
}
