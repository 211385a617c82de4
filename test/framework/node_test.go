package framework

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeAPIServerArgs checks the flags and the certificate a node needs of
// kube-apiserver: the Pods' view of it verifies, with the CA written beside
// it, for the names and the ClusterIP an in-cluster client dials, and
// StartNode finds the directory again in the flags; the API server's client
// certificate for the kubelet verifies too.
func TestNodeAPIServerArgs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pods")
	args, err := NodeAPIServerArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"enable-aggregator-routing": "true",
		"bind-address":              "0.0.0.0",
		"authorization-mode":        "Node,RBAC",
		"disable-admission-plugins": "",
	} {
		if got, ok := args[name]; !ok || got != want {
			t.Errorf("--%s=%q (set: %t), want %q", name, got, ok, want)
		}
	}
	got, err := nodeAPIServerArgsDir(args)
	if err != nil || got != dir {
		t.Fatalf("nodeAPIServerArgsDir = %q, %v; want %q", got, err, dir)
	}
	if _, err := nodeAPIServerArgsDir(map[string]string{}); err == nil || !strings.Contains(err.Error(), "NodeAPIServerArgs") {
		t.Errorf("nodeAPIServerArgsDir without the flags: %v, want an error naming NodeAPIServerArgs", err)
	}

	read := func(name string) *x509.Certificate {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s holds no PEM block", name)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	ca, cert := read(nodeAPIServerCAFile), read(nodeAPIServerCertFile)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{kubernetesServiceIP, nodePodGateway, "kubernetes.default.svc"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("the Pods' API server certificate does not verify for %s: %v", name, err)
		}
	}
	client := read(nodeKubeletClientCertFile)
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the API server's client certificate for the kubelet does not verify: %v", err)
	}
	if args["kubelet-client-certificate"] != filepath.Join(dir, nodeKubeletClientCertFile) || args["kubelet-client-key"] != filepath.Join(dir, nodeKubeletClientKeyFile) {
		t.Errorf("--kubelet-client-certificate=%s --kubelet-client-key=%s, want the files in %s", args["kubelet-client-certificate"], args["kubelet-client-key"], dir)
	}
	if !strings.HasPrefix(args["tls-sni-cert-key"], filepath.Join(dir, nodeAPIServerCertFile)+","+filepath.Join(dir, nodeAPIServerKeyFile)+":") {
		t.Errorf("--tls-sni-cert-key=%s does not name the certificate and key written in %s", args["tls-sni-cert-key"], dir)
	}
}
