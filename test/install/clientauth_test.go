package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// The overlay docs/client-certificates.md shows for client certificates, and quotes as
// it is.
const clientAuthOverlay = "testdata/clientauth"

// validateMDPath is the path of the guard's MachineDeployment validating
// webhook (config/webhook/manifests.yaml).
const validateMDPath = "/validate-cluster-x-k8s-io-v1beta2-machinedeployment"

// apiServerClientCertificates is the client certificate the API server
// presents to the package's guard, as a tls.Config's Certificates.
func apiServerClientCertificates() []tls.Certificate {
	if c := env.GuardClientCertificate(); c != nil {
		return []tls.Certificate{*c}
	}
	return nil
}

// TestAPIServerCallsTheGuardWithItsClientCertificate: with client
// certificates required, the API server's admission calls, which present
// the certificate its admission kubeconfig names, reach the guard and are
// judged: a control-plane downgrade is refused with the guard's message, an
// allowed edit is stamped with its revision.
func TestAPIServerCallsTheGuardWithItsClientCertificate(t *testing.T) {
	require.NotNil(t, env.GuardClientCertificate(), "the package's guard requires client certificates")
	ctx := t.Context()
	const ns = "install-client-auth"
	w := env.NewWorld(t, ns, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.34.3"})
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	cases := []struct {
		name         string
		obj          client.Object
		patch        string
		wantErr      string // the whole error text; "" for allowed
		wantRevision string // the stamped revision of an allowed edit
	}{
		{
			name: "a control-plane downgrade is refused", obj: w.KCP, patch: `{"spec":{"version":"v1.34.1"}}`,
			wantErr: `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: ` +
				`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.35.2 to v1.34.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`,
		},
		{
			name: "a worker upgrade to the control plane's version is stamped", obj: w.MD, patch: `{"spec":{"template":{"spec":{"version":"v1.35.2"}}}}`,
			wantRevision: "2",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.obj.DeepCopyObject().(client.Object)
			err := env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(tc.patch)))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantRevision, obj.GetAnnotations()[revisions.AnnotationRevision], "annotations: %v", obj.GetAnnotations())
			assert.NotEmpty(t, obj.GetAnnotations()[revisions.AnnotationChangedBy])
			// Recorded, too; and recorded before the test deletes the
			// namespace, which stays terminating here (no namespace
			// controller runs): the package's later tests count what the
			// guard reads of every object.
			waitRecorded(t, ns, []client.Object{obj}, 2)
		})
	}
}

// TestDirectRequestsNeedTheAPIServersClientCertificate posts to the guard's
// webhook port itself, over TLS 1.2 and 1.3, verifying the guard's serving
// certificate: without a client certificate, or with one of another CA,
// the guard ends the connection with a TLS alert and no HTTP answer; with
// the API server's certificate it answers. The metrics server asks for no
// client certificate (it authenticates with tokens) and answers without.
func TestDirectRequestsNeedTheAPIServersClientCertificate(t *testing.T) {
	require.NotNil(t, env.GuardClientCertificate(), "the package's guard requires client certificates")
	other := newCA(t, "rollout-guard-other-client-ca").issueClient(t, framework.AdmissionClientCommonName)
	cases := []struct {
		name  string
		certs []tls.Certificate
		// want12 and want13 are the alert the guard sends with TLS 1.2 and
		// 1.3; "" for an HTTP answer.
		want12, want13 string
	}{
		{name: "no client certificate", want12: "tls: handshake failure", want13: "tls: certificate required"},
		{name: "a client certificate of another CA", certs: []tls.Certificate{other},
			want12: "tls: unknown certificate authority", want13: "tls: unknown certificate authority"},
		{name: "the API server's client certificate", certs: apiServerClientCertificates()},
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					want := tc.want13
					if version == tls.VersionTLS12 {
						want = tc.want12
					}
					resp, body, err := postToGuard(t, env.GuardURL()+validateMDPath, tc.certs, version)
					if want == "" {
						require.NoError(t, err)
						assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
						var answer admissionv1.AdmissionReview
						require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
						require.NotNil(t, answer.Response, "%s", body)
						require.NotNil(t, answer.Response.Result)
						assert.Equal(t, "request body is empty", answer.Response.Result.Message)
						return
					}
					requireTLSAlert(t, resp, err, want)
				})
			}
		})
	}

	t.Run("metrics without a client certificate", func(t *testing.T) {
		metrics := env.GuardMetricsURL()
		require.NotEmpty(t, metrics)
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the metrics server's certificate is self-signed
			DisableKeepAlives: true,
		}}
		resp, err := hc.Get(metrics)
		require.NoError(t, err, "the metrics server does not ask for a client certificate")
		defer resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an anonymous scrape is refused by the metrics authorization, over TLS")
	})
}

// postToGuard posts an empty body to rawURL over a new TLS connection of
// version, verifying the guard's serving certificate against its CA bundle
// and presenting the first of certs (none if empty) whatever CAs the guard
// names as acceptable — Go's client would otherwise send no certificate the
// guard's CAs do not sign — and returns the answer and its body.
func postToGuard(t *testing.T, rawURL string, certs []tls.Certificate, version uint16) (*http.Response, []byte, error) {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(env.GuardCABundle()))
	present := &tls.Certificate{}
	if len(certs) > 0 {
		present = &certs[0]
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			RootCAs: pool, ServerName: "127.0.0.1",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return present, nil },
			MinVersion:           version, MaxVersion: version,
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, rawURL, bytes.NewReader(nil))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// requireTLSAlert asserts that a request got no HTTP answer but a TLS alert
// from the server (a "remote error"), whose text contains alert.
func requireTLSAlert(t *testing.T, resp *http.Response, err error, alert string) {
	t.Helper()
	require.Error(t, err, "the guard answered over HTTP: %v", resp)
	assert.Nil(t, resp)
	var opErr *net.OpError
	require.True(t, errors.As(err, &opErr), "not a network error: %v (%T)", err, err)
	assert.Equal(t, "remote error", opErr.Op, "not a TLS alert from the guard: %v", err)
	assert.Contains(t, opErr.Error(), alert)
}

// requireClientCertificateRequired asserts that the guard refuses a client
// without a certificate at the TLS handshake, and still answers one with
// the API server's.
func requireClientCertificateRequired(t *testing.T) {
	t.Helper()
	resp, _, err := postToGuard(t, env.GuardURL()+validateMDPath, nil, tls.VersionTLS13)
	requireTLSAlert(t, resp, err, "tls: certificate required")
	resp, body, err := postToGuard(t, env.GuardURL()+validateMDPath, apiServerClientCertificates(), tls.VersionTLS13)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

// TestClientAuthOverlay builds the overlay of docs/client-certificates.md that turns
// client certificates on with cert-manager — config/default, a client CA
// and kube-apiserver's client certificate, the guard's flag and its cert
// directory projected from two Secrets — and checks what it wires: the file
// --client-ca-name names is the client CA's ca.crt, beside the serving
// certificate in --cert-dir; the client certificate is issued by the client
// CA for client auth; nothing else of config/default changes; and the API
// server accepts all of it. docs/client-certificates.md quotes both files as they are.
func TestClientAuthOverlay(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "config"), os.DirFS(repoPath("config"))))
	overlay := filepath.Join(dir, "my-overlay")
	require.NoError(t, os.CopyFS(overlay, os.DirFS(clientAuthOverlay)))
	m := build(t, overlay)

	def := build(t, "config/default")
	added := []string{"Certificate/rollout-guard-apiserver-client", "Certificate/rollout-guard-client-ca", "Issuer/rollout-guard-client-ca-issuer"}
	assert.Equal(t, slices.Sorted(slices.Values(append(def.ids(), added...))), m.ids())
	for _, u := range def {
		if u.GetKind() != "Deployment" {
			assert.Equal(t, u.Object, m.find(t, u.GetKind(), u.GetName()).Object, "%s %s", u.GetKind(), u.GetName())
		}
	}

	dep := as[appsv1.Deployment](t, m.find(t, "Deployment", "rollout-guard-controller-manager"))
	manager := dep.Spec.Template.Spec.Containers[0]
	flag := func(name string) string {
		t.Helper()
		for _, arg := range manager.Args {
			if v, ok := strings.CutPrefix(arg, name+"="); ok {
				return v
			}
		}
		t.Fatalf("no %s among %v", name, manager.Args)
		return ""
	}
	certDir, clientCAName := flag("--cert-dir"), flag("--client-ca-name")
	assert.Equal(t, "client-ca.crt", clientCAName)
	var projected *corev1.ProjectedVolumeSource
	for _, mount := range manager.VolumeMounts {
		if mount.MountPath != certDir {
			continue
		}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == mount.Name {
				projected = v.Projected
			}
		}
	}
	require.NotNil(t, projected, "the volume at --cert-dir %s is projected", certDir)
	secretOf := func(certificate string) string {
		t.Helper()
		name, _, err := unstructured.NestedString(m.find(t, "Certificate", certificate).Object, "spec", "secretName")
		require.NoError(t, err)
		return name
	}
	assert.Equal(t, []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: secretOf(servingCertName)}}},
		{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretOf("rollout-guard-client-ca")},
			Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: clientCAName}},
		}},
	}, projected.Sources, "tls.crt and tls.key of the serving certificate, and the client CA as --client-ca-name")

	apiServerCert := m.find(t, "Certificate", "rollout-guard-apiserver-client").Object
	usages, _, err := unstructured.NestedStringSlice(apiServerCert, "spec", "usages")
	require.NoError(t, err)
	assert.Contains(t, usages, "client auth")
	issuer, _, err := unstructured.NestedString(apiServerCert, "spec", "issuerRef", "name")
	require.NoError(t, err)
	caSecret, _, err := unstructured.NestedString(m.find(t, "Issuer", issuer).Object, "spec", "ca", "secretName")
	require.NoError(t, err)
	assert.Equal(t, secretOf("rollout-guard-client-ca"), caSecret, "the client certificate is signed by the client CA")

	applyDryRun(t, m)

	docs, err := os.ReadFile(repoPath("docs/client-certificates.md"))
	require.NoError(t, err)
	for _, name := range []string{"kustomization.yaml", "client-ca.yaml"} {
		data, err := os.ReadFile(filepath.Join(clientAuthOverlay, name))
		require.NoError(t, err)
		assert.True(t, strings.Contains(string(docs), "```yaml\n"+string(data)+"```\n"), "docs/client-certificates.md does not quote %s as it is", name)
	}
}
