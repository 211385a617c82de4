package framework

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The files of the guard's client-certificate authentication
// (Options.GuardClientAuth).
const (
	// GuardClientCAFile is the name, in the guard's cert directory, of the
	// CA the guard verifies its clients against (its --client-ca-name).
	GuardClientCAFile = "client-ca.crt"
	// clientAuthDir, in the work directory, holds the client CA, the API
	// server's client certificate and key, the kubeconfig that names them
	// and the admission configuration that names the kubeconfig.
	clientAuthDir = "admission"
	// AdmissionClientCommonName is the subject of the client certificate
	// kube-apiserver presents to the guard.
	AdmissionClientCommonName = "kube-apiserver-admission"
)

// clientAuth is the client CA of an environment and the client
// certificate it signed for kube-apiserver, with the files kube-apiserver
// reads them from.
type clientAuth struct {
	caPEM []byte
	// cert is kube-apiserver's client certificate and key.
	cert tls.Certificate
	// admissionConfig is the --admission-control-config-file.
	admissionConfig string
}

// newClientAuth makes a client CA and a client certificate it signs, and
// writes into dir (created): client-ca.crt, apiserver-client.crt and .key,
// admission-kubeconfig.yaml (user "*", the client certificate and key by
// path) and admission-config.yaml, an AdmissionConfiguration whose
// ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins name that
// kubeconfig, as docs/client-certificates.md has an operator write them. User "*" is
// the kubeconfig's default: kube-apiserver presents the certificate to
// every webhook that asks for one, whatever its address (the guard's port
// changes whenever the environment restarts it).
func newClientAuth(dir string) (*clientAuth, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the client CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "rollout-guard-test-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if caTmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, err
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the client CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing the client CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the client key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: AdmissionClientCommonName},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the client certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the client key: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the client certificate: %w", err)
	}

	certFile, keyFile := filepath.Join(dir, "apiserver-client.crt"), filepath.Join(dir, "apiserver-client.key")
	kubeconfig := filepath.Join(dir, "admission-kubeconfig.yaml")
	admissionConfig := filepath.Join(dir, "admission-config.yaml")
	for _, f := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{
		{filepath.Join(dir, GuardClientCAFile), caPEM, 0o644},
		{certFile, certPEM, 0o644},
		{keyFile, keyPEM, 0o600},
	} {
		if err := writeFileAtomically(f.path, f.data, f.perm); err != nil {
			return nil, err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, fmt.Errorf("writing %s: %w", kubeconfig, err)
	}
	if err := writeFileAtomically(admissionConfig, admissionConfiguration(kubeconfig), 0o644); err != nil {
		return nil, err
	}
	return &clientAuth{caPEM: caPEM, cert: cert, admissionConfig: admissionConfig}, nil
}

// admissionConfiguration is an AdmissionConfiguration in which both
// webhook admission plugins read kubeconfig.
func admissionConfiguration(kubeconfig string) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n")
	for _, plugin := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&b, "  - name: %s\n    configuration:\n      apiVersion: apiserver.config.k8s.io/v1\n      kind: WebhookAdmissionConfiguration\n      kubeConfigFile: %q\n", plugin, kubeconfig)
	}
	return b.Bytes()
}

// randomSerial returns a random 128-bit certificate serial number.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n, nil
}

// GuardClientCertificate returns the client certificate (and key) that
// kube-apiserver presents to the guard with Options.GuardClientAuth, for a
// test's own requests straight to GuardURL; nil when the option is off.
func (e *Environment) GuardClientCertificate() *tls.Certificate {
	if e.clientAuth == nil {
		return nil
	}
	cert := e.clientAuth.cert
	return &cert
}

// GuardClientCA returns the PEM of the CA the guard verifies its clients'
// certificates against with Options.GuardClientAuth (its --client-ca-name
// file); nil when the option is off.
func (e *Environment) GuardClientCA() []byte {
	if e.clientAuth == nil {
		return nil
	}
	return bytes.Clone(e.clientAuth.caPEM)
}

// guardClientAuthArgs are the guard's flags for Options.GuardClientAuth.
func (e *Environment) guardClientAuthArgs() []string {
	if e.clientAuth == nil {
		return nil
	}
	return []string{"--client-ca-name", GuardClientCAFile}
}
