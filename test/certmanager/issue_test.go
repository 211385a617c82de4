package certmanager

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	certManagerAPI = "cert-manager.io/v1"
	// injectCAFrom is the annotation through which cert-manager's CA
	// injector learns which Certificate's CA an object trusts.
	injectCAFrom = "cert-manager.io/inject-ca-from"

	// issueTimeout bounds each wait on cert-manager: an issuance is a
	// chain of five controllers (trigger, key manager, request manager,
	// approver and signer, issuing) on a busy machine.
	issueTimeout = 60 * time.Second
	pollInterval = 250 * time.Millisecond
)

// TestIssueInjectAndRenew runs the chain a management cluster runs for the
// guard's serving certificate: a SelfSigned Issuer signs a CA Certificate,
// a CA Issuer made of its Secret signs a serving Certificate for a
// Service's DNS name, the CA injector writes that Certificate's CA into the
// webhook configuration that names it, and a renewal (as cmctl renew asks
// for it) replaces the serving certificate by a new one of the same CA,
// which the webhook configuration keeps trusting.
func TestIssueInjectAndRenew(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of cert-manager's logs:\n%s", cm.LogTail())
		}
	})
	ctx := t.Context()
	c := env.Client
	const (
		ns       = "certmanager-proof"
		service  = "guard-webhook"
		dnsName  = service + "." + ns + ".svc"
		caSecret = "proof-ca"
		tlsName  = "serving-cert"
		vwcName  = "certmanager-proof"
	)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	create(t, c, "Issuer", ns, "selfsigned", map[string]any{"selfSigned": map[string]any{}})
	create(t, c, "Certificate", ns, "proof-ca", map[string]any{
		"isCA":       true,
		"commonName": "proof-ca",
		"secretName": caSecret,
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
		"issuerRef":  map[string]any{"kind": "Issuer", "name": "selfsigned"},
	})
	waitReady(t, c, "Certificate", ns, "proof-ca")
	create(t, c, "Issuer", ns, "proof-ca", map[string]any{"ca": map[string]any{"secretName": caSecret}})
	waitReady(t, c, "Issuer", ns, "proof-ca")
	create(t, c, "Certificate", ns, tlsName, map[string]any{
		"dnsNames":   []any{dnsName},
		"secretName": tlsName,
		"usages":     []any{"digital signature", "server auth"},
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
		"issuerRef":  map[string]any{"kind": "Issuer", "name": "proof-ca"},
	})
	waitReady(t, c, "Certificate", ns, tlsName)

	caPEM := secretData(t, c, ns, caSecret)["tls.crt"]
	ca := parseCertificate(t, caPEM)
	require.True(t, ca.IsCA, "the CA Certificate's certificate is a CA")
	var first *x509.Certificate
	framework.WaitFor(t, issueTimeout, pollInterval, fmt.Sprintf("Secret %s/%s to hold a certificate for %s signed by the CA", ns, tlsName, dnsName), func() (bool, string) {
		leaf, err := verifiedLeaf(secretData(t, c, ns, tlsName), ca, dnsName)
		if err != nil {
			return false, err.Error()
		}
		first = leaf
		return true, ""
	})
	t.Logf("issued: serial %x for %v by %q, valid until %s", first.SerialNumber, first.DNSNames, first.Issuer.CommonName, first.NotAfter.Format(time.RFC3339))

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: vwcName, Annotations: map[string]string{injectCAFrom: ns + "/" + tlsName}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "proof." + dnsName,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: service, Path: ptr.To("/validate")},
			},
			// Selects no object that exists: only the caBundle matters.
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"certmanager-proof/never": "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	require.NoError(t, c.Create(ctx, vwc))
	framework.WaitFor(t, issueTimeout, pollInterval, fmt.Sprintf("the caBundle of ValidatingWebhookConfiguration %s to be the CA of Certificate %s/%s", vwcName, ns, tlsName), func() (bool, string) {
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: vwcName}, got); err != nil {
			return false, err.Error()
		}
		bundle := got.Webhooks[0].ClientConfig.CABundle
		if !bytes.Equal(bytes.TrimSpace(bundle), bytes.TrimSpace(caPEM)) {
			return false, fmt.Sprintf("caBundle of %d bytes", len(bundle))
		}
		return true, ""
	})

	// Renew as cmctl renew does: the Issuing condition, set by hand, is
	// what the trigger controller sets when a certificate is due.
	before := revision(t, c, ns, tlsName)
	require.NoError(t, framework.RenewCertificate(ctx, c, ns, tlsName))
	var renewed *x509.Certificate
	framework.WaitFor(t, issueTimeout, pollInterval, fmt.Sprintf("Secret %s/%s to hold a new certificate signed by the CA after the renewal", ns, tlsName), func() (bool, string) {
		leaf, err := verifiedLeaf(secretData(t, c, ns, tlsName), ca, dnsName)
		if err != nil {
			return false, err.Error()
		}
		if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return false, fmt.Sprintf("still serial %x", leaf.SerialNumber)
		}
		renewed = leaf
		return true, ""
	})
	waitReady(t, c, "Certificate", ns, tlsName)
	after := revision(t, c, ns, tlsName)
	require.Greater(t, after, before, "status.revision of Certificate %s/%s after the renewal", ns, tlsName)
	t.Logf("renewed: serial %x (revision %d → %d)", renewed.SerialNumber, before, after)

	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: vwcName}, got))
	require.Equal(t, string(bytes.TrimSpace(caPEM)), string(bytes.TrimSpace(got.Webhooks[0].ClientConfig.CABundle)),
		"the caBundle stays the CA, which signs the renewed certificate too")
}

// create creates a cert-manager object of kind with spec.
func create(t *testing.T, c client.Client, kind, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(certManagerAPI)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	require.NoError(t, c.Create(context.Background(), u), "creating %s %s/%s", kind, ns, name)
}

// get reads a cert-manager object of kind.
func get(t *testing.T, c client.Client, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(certManagerAPI)
	u.SetKind(kind)
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u), "reading %s %s/%s", kind, ns, name)
	return u
}

// waitReady waits until the cert-manager object's Ready condition is True.
func waitReady(t *testing.T, c client.Client, kind, ns, name string) {
	t.Helper()
	framework.WaitFor(t, issueTimeout, pollInterval, fmt.Sprintf("%s %s/%s to be Ready", kind, ns, name), func() (bool, string) {
		conds, _, _ := unstructured.NestedSlice(get(t, c, kind, ns, name).Object, "status", "conditions")
		var saw []string
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			saw = append(saw, fmt.Sprintf("%v=%v (%v: %v)", cond["type"], cond["status"], cond["reason"], cond["message"]))
			if cond["type"] == "Ready" && cond["status"] == "True" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v", saw)
	})
}

// revision returns the Certificate's status.revision (0 before its first
// issuance).
func revision(t *testing.T, c client.Client, ns, name string) int64 {
	t.Helper()
	rev, _, err := unstructured.NestedInt64(get(t, c, "Certificate", ns, name).Object, "status", "revision")
	require.NoError(t, err)
	return rev
}

// secretData returns the data of the Secret, empty if it does not exist.
func secretData(t *testing.T, c client.Client, ns, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return map[string][]byte{}
	}
	return s.Data
}

// parseCertificate parses the first certificate of data (PEM).
func parseCertificate(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	require.NotNil(t, block, "no PEM block in %q", data)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

// verifiedLeaf checks that a kubernetes.io/tls Secret's data holds a
// certificate for dnsName that ca signs, with ca as its ca.crt, and
// returns it.
func verifiedLeaf(data map[string][]byte, ca *x509.Certificate, dnsName string) (*x509.Certificate, error) {
	if len(data["tls.crt"]) == 0 || len(data["tls.key"]) == 0 {
		return nil, fmt.Errorf("no tls.crt and tls.key yet (keys %d)", len(data))
	}
	block, _ := pem.Decode(data["tls.crt"])
	if block == nil {
		return nil, fmt.Errorf("tls.crt holds no PEM block")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing tls.crt: %w", err)
	}
	if caBlock, _ := pem.Decode(data["ca.crt"]); caBlock == nil || !bytes.Equal(caBlock.Bytes, ca.Raw) {
		return nil, fmt.Errorf("ca.crt is not the CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("tls.crt (serial %x) does not verify: %w", leaf.SerialNumber, err)
	}
	return leaf, nil
}
