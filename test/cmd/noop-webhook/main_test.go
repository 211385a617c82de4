package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rollout-guard/rollout-guard/webhooks"
)

// manifests is the guard's webhook registration.
var manifests = filepath.Join("..", "..", "..", "config", "webhook", "manifests.yaml")

// TestPathsAreTheManifests: the no-op server serves the paths the guard's
// manifests register, and those include the guard's own paths, so the API
// server calls it for the same requests it would call the guard for.
func TestPathsAreTheManifests(t *testing.T) {
	ps, err := readPaths(manifests)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/validate-cluster-x-k8s-io-v1beta2-machinedeployment", webhooks.ValidateKubeadmControlPlanePath,
		"/validate-cluster-x-k8s-io-v1beta2-cluster"} {
		if !slices.Contains(ps.validating, p) {
			t.Errorf("validating paths %v lack %s", ps.validating, p)
		}
	}
	for _, p := range []string{webhooks.MutateMachineDeploymentPath, webhooks.MutateKubeadmControlPlanePath} {
		if !slices.Contains(ps.mutating, p) {
			t.Errorf("mutating paths %v lack %s", ps.mutating, p)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ps.validating)))) != len(ps.validating) {
		t.Errorf("validating paths %v repeat a path", ps.validating)
	}
}

// TestServesHTTP2AndAllows: through the same server stack as the guard, a
// client offering HTTP/2 (as the API server's webhook client does) speaks
// HTTP/2, every request is allowed, and the probe markers work.
func TestServesHTTP2AndAllows(t *testing.T) {
	dir := t.TempDir()
	pool := writeCert(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps, err := readPaths(manifests)
	if err != nil {
		t.Fatal(err)
	}
	validatingPaths, mutatingPaths := ps.validating, ps.mutating
	srv := newServer("127.0.0.1", port, dir, ps, nil)
	go func() { _ = srv.Start(ctx) }()

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	review := func(path, obj string) (*admissionv1.AdmissionResponse, string) {
		t.Helper()
		in := admissionv1.AdmissionReview{}
		in.APIVersion, in.Kind = "admission.k8s.io/v1", "AdmissionReview"
		in.Request = &admissionv1.AdmissionRequest{UID: "u1", Object: runtime.RawExtension{Raw: []byte(obj)}, OldObject: runtime.RawExtension{Raw: []byte(obj)}}
		body, _ := json.Marshal(&in)
		var resp *http.Response
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err = hc.Post(base+path, "application/json", bytes.NewReader(body))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
			t.Fatalf("POST %s: decoding the answer: %v", path, err)
		}
		return out.Response, resp.Proto
	}
	plain := `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","metadata":{"name":"a"}}`
	for _, path := range append(slices.Clone(validatingPaths), mutatingPaths...) {
		r, proto := review(path, plain)
		if !r.Allowed || len(r.Patch) != 0 {
			t.Errorf("%s: allowed %v, patch %s; want allowed, no patch", path, r.Allowed, r.Patch)
		}
		if proto != "HTTP/2.0" {
			t.Errorf("%s: served over %s, want HTTP/2.0 as the guard's server negotiates it", path, proto)
		}
	}
	marked := func(v string) string {
		return `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","metadata":{"name":"a","annotations":{"rollout-bench/probe":"` + v + `"}}}`
	}
	if r, _ := review(validatingPaths[0], marked("refuse")); r.Allowed || r.Result == nil || !strings.Contains(r.Result.Message, "noop-webhook: refused the probe") {
		t.Errorf("refuse probe: %+v, want refused with the probe's message", r)
	}
	if r, _ := review(mutatingPaths[0], marked("mutate")); !r.Allowed || !strings.Contains(string(r.Patch), "rollout-bench~1mutated") {
		t.Errorf("mutate probe: allowed %v, patch %s; want the mutated annotation", r.Allowed, r.Patch)
	}

	// The stamping floor: six stamps, applied as the API server applies
	// them, to an object with annotations and to one without; the probe
	// keeps its mutation.
	for _, obj := range []string{plain, marked("mutate")} {
		r, _ := review(StampPrefix+mutatingPaths[0], obj)
		if !r.Allowed || r.PatchType == nil {
			t.Fatalf("stamp %s: allowed %v, patch type %v; want allowed with a patch", obj, r.Allowed, r.PatchType)
		}
		patch, err := jsonpatch.DecodePatch(r.Patch)
		if err != nil {
			t.Fatalf("stamp: the patch %s: %v", r.Patch, err)
		}
		out, err := patch.Apply([]byte(obj))
		if err != nil {
			t.Fatalf("stamp: applying %s to %s: %v", r.Patch, obj, err)
		}
		var got struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		stamped := 0
		for k := range got.Metadata.Annotations {
			if strings.HasPrefix(k, "rollout-bench/") && k != "rollout-bench/probe" && k != "rollout-bench/mutated" {
				stamped++
			}
		}
		if stamped != 6 || got.Metadata.Name != "a" {
			t.Errorf("stamp %s: %s; want the name kept and 6 stamps", obj, out)
		}
		if strings.Contains(obj, "probe") && got.Metadata.Annotations["rollout-bench/mutated"] != "true" {
			t.Errorf("stamp of the mutate probe: %s; want its mutation too", out)
		}
	}
}

// writeCert writes a self-signed serving certificate for 127.0.0.1 into
// dir and returns a pool that trusts it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "noop"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}
