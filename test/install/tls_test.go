package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// handshake connects to hostPort with the given TLS version range,
// presenting the client certificate the API server presents to the guard
// (a server that asks for none gets none), and returns the negotiated
// version and the served certificate. The chain is not verified: what is
// asked is which versions the server accepts.
func handshake(t *testing.T, hostPort string, minVersion, maxVersion uint16) (uint16, *x509.Certificate, error) {
	t.Helper()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", hostPort, &tls.Config{
		MinVersion: minVersion, MaxVersion: maxVersion,
		Certificates:       apiServerClientCertificates(),
		InsecureSkipVerify: true, //nolint:gosec // the versions are under test, not the chain
	})
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	state := conn.ConnectionState()
	return state.Version, state.PeerCertificates[0], nil
}

// TestTLSVersions: the guard's webhook server and its metrics server refuse
// a client that speaks at most TLS 1.1, and accept TLS 1.2 and 1.3.
func TestTLSVersions(t *testing.T) {
	webhook, err := url.Parse(env.GuardURL())
	require.NoError(t, err)
	metrics, err := url.Parse(env.GuardMetricsURL())
	require.NoError(t, err)
	for _, server := range []struct{ name, hostPort string }{{"webhook", webhook.Host}, {"metrics", metrics.Host}} {
		t.Run(server.name, func(t *testing.T) {
			cases := []struct {
				name     string
				min, max uint16
				want     uint16 // 0: refused
			}{
				{name: "TLS 1.0", min: tls.VersionTLS10, max: tls.VersionTLS10},
				{name: "TLS 1.1", min: tls.VersionTLS10, max: tls.VersionTLS11},
				{name: "TLS 1.2", min: tls.VersionTLS12, max: tls.VersionTLS12, want: tls.VersionTLS12},
				{name: "TLS 1.3", min: tls.VersionTLS13, max: tls.VersionTLS13, want: tls.VersionTLS13},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					got, _, err := handshake(t, server.hostPort, tc.min, tc.max)
					if tc.want == 0 {
						require.Error(t, err, "a %s client was served", tc.name)
						assert.Contains(t, err.Error(), "remote error: tls: protocol version not supported")
						return
					}
					require.NoError(t, err)
					assert.Equal(t, tls.VersionName(tc.want), tls.VersionName(got))
				})
			}
		})
	}
}

// TestServingCertificateNames: the names in config/certmanager's serving
// Certificate are the names the API server dials for every webhook of
// config/default (service.namespace.svc), and the certificate the guard
// serves in the test environment is valid, under the CA bundle of its
// webhook configurations, for the host the API server dials there.
func TestServingCertificateNames(t *testing.T) {
	m := build(t, "config/default")
	cert := m.find(t, "Certificate", servingCertName)
	dnsNames, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	require.NoError(t, err)
	clientConfigs, _ := webhookConfigurations(t, m)
	require.Len(t, clientConfigs, 24, "webhooks in config/default: six validating webhooks (MachineDeployments, MachinePools, KubeadmControlPlanes, MachineSets, Machines and Clusters) and five mutating ones (the revision stampers of MachineDeployments, MachinePools, KubeadmControlPlanes, ClusterClasses and Clusters), each once for UPDATE and once for CREATE, the validating webhook of RolloutRevision records and the mutating webhook of the RolloutRevisions' owner label")
	for name, cc := range clientConfigs {
		require.NotNil(t, cc.Service, "webhook %s calls a Service", name)
		svc := m.find(t, "Service", cc.Service.Name)
		assert.Equal(t, svc.GetNamespace(), cc.Service.Namespace, "webhook %s", name)
		assert.Contains(t, dnsNames, cc.Service.Name+"."+cc.Service.Namespace+".svc", "webhook %s dials a name the Certificate lacks", name)
	}

	ctx := t.Context()
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "rollout-guard-validating"}, validating))
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "rollout-guard-mutating"}, mutating))
	var registered []admissionregistrationv1.WebhookClientConfig
	for _, w := range validating.Webhooks {
		registered = append(registered, w.ClientConfig)
	}
	for _, w := range mutating.Webhooks {
		registered = append(registered, w.ClientConfig)
	}
	require.Len(t, registered, 24)
	for _, cc := range registered {
		require.NotNil(t, cc.URL)
		u, err := url.Parse(*cc.URL)
		require.NoError(t, err)
		_, served, err := handshake(t, u.Host, tls.VersionTLS12, tls.VersionTLS13)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(cc.CABundle))
		_, err = served.Verify(x509.VerifyOptions{DNSName: u.Hostname(), Roots: pool})
		assert.NoError(t, err, "the served certificate is not valid for %s", u.Hostname())
	}
}

// TestWrongCertificateNameIsRefused serves a certificate from a trusted CA
// but for another name: the API server refuses to call the guard, so a
// policed edit fails (failurePolicy Fail) rather than passing unjudged.
// The guard's certificate and CA bundle are put back afterwards.
func TestWrongCertificateNameIsRefused(t *testing.T) {
	ctx := t.Context()
	u, err := url.Parse(env.GuardURL())
	require.NoError(t, err)
	origBundle := env.GuardCABundle()
	origCert, err := os.ReadFile(filepath.Join(env.GuardCertDir(), "tls.crt"))
	require.NoError(t, err)
	origKey, err := os.ReadFile(filepath.Join(env.GuardCertDir(), "tls.key"))
	require.NoError(t, err)
	_, origServed, err := handshake(t, u.Host, tls.VersionTLS12, tls.VersionTLS13)
	require.NoError(t, err)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "install-wrong-name"}}
	require.NoError(t, env.Client.Create(ctx, ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	md := orphanMachineDeployment(ns.Name, "rotation", "v1.36.0")
	require.NoError(t, env.Client.Create(ctx, md))
	dryRunEdit := func() error {
		return env.Client.Patch(ctx, md.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"template":{"spec":{"version":"v1.36.7"}}}}`)), client.DryRunAll)
	}
	require.NoError(t, dryRunEdit(), "with the guard's own certificate")

	served := func(rawOf func() []byte) func() bool {
		return func() bool {
			_, c, err := handshake(t, u.Host, tls.VersionTLS12, tls.VersionTLS13)
			return err == nil && string(c.Raw) == string(rawOf())
		}
	}
	t.Cleanup(func() {
		// Back to the guard's own certificate, trusted alone.
		ctx := context.Background()
		require.NoError(t, env.SetGuardCABundle(ctx, append(append([]byte(nil), origBundle...), env.GuardCABundle()...)))
		require.NoError(t, env.WriteGuardServingCert(origCert, origKey))
		require.Eventually(t, served(func() []byte { return origServed.Raw }), 15*time.Second, 20*time.Millisecond, "the guard serves its own certificate again")
		require.NoError(t, env.SetGuardCABundle(ctx, origBundle))
		var last error
		require.Eventually(t, func() bool {
			last = env.Client.Patch(ctx, md.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"template":{"spec":{"version":"v1.36.7"}}}}`)), client.DryRunAll)
			return last == nil
		}, 30*time.Second, 200*time.Millisecond, "admission works again: %v", &last)
	})

	ca := newCA(t, "rollout-guard-wrong-name-ca")
	wrong := ca.issue(t, []string{"wrong.example"}, []net.IP{net.ParseIP("10.9.9.9")})
	require.NoError(t, env.SetGuardCABundle(ctx, append(append([]byte(nil), origBundle...), ca.pem...)))
	require.NoError(t, env.WriteGuardServingCert(wrong.certPEM, wrong.keyPEM))
	require.Eventually(t, func() bool {
		_, c, err := handshake(t, u.Host, tls.VersionTLS12, tls.VersionTLS13)
		return err == nil && c.SerialNumber.Cmp(wrong.serial) == 0
	}, 15*time.Second, 20*time.Millisecond, "the guard serves the wrong-name certificate")
	// A new CA bundle makes the API server dial again (it keeps connections
	// to a webhook until its client configuration changes).
	require.NoError(t, env.SetGuardCABundle(ctx, ca.pem))

	var last error
	require.Eventually(t, func() bool {
		last = dryRunEdit()
		return last != nil
	}, 30*time.Second, 200*time.Millisecond, "the API server called a guard whose certificate names another host")
	assert.Contains(t, last.Error(), `failed calling webhook "`)
	assert.Contains(t, last.Error(), "x509: certificate is valid for 10.9.9.9, not 127.0.0.1")
}
