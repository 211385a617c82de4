// Command noop-webhook is the floor any validating + mutating webhook pair
// pays: the API server's round trips to a webhook server, and nothing else.
// make bench-admission registers it in place of the guard, from the guard's
// own manifests (config/webhook/manifests.yaml: same paths, rules,
// matchConditions and timeouts).
//
// It is served by the guard's own stack, so that the comparison is about
// the guard's work and not about the server: controller-runtime's webhook
// server (webhook.NewServer) with the Options cmd/webhook gives it (TLS 1.2
// at least, the serving certificate watched in --cert-dir, HTTP/2 offered
// through ALPN as controller-runtime does), wrapped in
// webhooks.DrainingServer as the guard is, each path handled by a
// controller-runtime admission.Webhook (which decodes the AdmissionReview
// as the guard's handlers do). The handlers allow everything.
//
// So that the benchmark can tell that the API server really calls it, an
// object carrying the annotation rollout-bench/probe=refuse is refused
// (validating paths), and one carrying rollout-bench/probe=mutate gets the
// annotation rollout-bench/mutated=true (mutating paths). The benchmark's
// own edits carry neither.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"gomodules.xyz/jsonpatch/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/webhooks"
)

// Markers the benchmark's probes put on an object (see the package comment).
var (
	refuseMarker = []byte(`"rollout-bench/probe":"refuse"`)
	mutateMarker = []byte(`"rollout-bench/probe":"mutate"`)
)

// refusal is the message of a refused probe; the benchmark looks for it.
const refusal = "noop-webhook: refused the probe (annotation rollout-bench/probe=refuse)"

// validatingPaths and mutatingPaths are the paths the guard serves
// (webhooks.SetupWithManager), which config/webhook/manifests.yaml names;
// TestPathsAreTheManifests keeps them in step.
var (
	validatingPaths = []string{
		"/validate-cluster-x-k8s-io-v1beta2-machinedeployment",
		webhooks.ValidateKubeadmControlPlanePath,
		"/validate-cluster-x-k8s-io-v1beta2-cluster",
	}
	mutatingPaths = []string{
		webhooks.MutateMachineDeploymentPath,
		webhooks.MutateKubeadmControlPlanePath,
	}
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9444, "HTTPS port")
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key")
	flag.Parse()
	if *certDir == "" {
		log.Fatal("noop-webhook: --cert-dir is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *host, *port, *certDir); err != nil {
		log.Fatalf("noop-webhook: %v", err)
	}
}

// newServer is the guard's webhook server (cmd/webhook) with the no-op
// handlers registered at the guard's paths.
func newServer(host string, port int, certDir string) webhook.Server {
	srv := webhooks.DrainingServer{Server: webhook.NewServer(webhook.Options{
		Host:    host,
		Port:    port,
		CertDir: certDir,
		TLSOpts: []func(*tls.Config){minTLS12},
	})}
	for _, path := range validatingPaths {
		srv.Register(path, &webhook.Admission{Handler: admission.HandlerFunc(validate)})
	}
	for _, path := range mutatingPaths {
		srv.Register(path, &webhook.Admission{Handler: admission.HandlerFunc(mutate)})
	}
	return srv
}

func serve(ctx context.Context, host string, port int, certDir string) error {
	srv := newServer(host, port, certDir)
	log.Printf("noop-webhook: serving on https://%s:%d", host, port)
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("serving on %s:%d: %w", host, port, err)
	}
	return nil
}

// minTLS12 is cmd/webhook's TLS option, repeated here because that one is
// in a main package.
func minTLS12(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }

// validate allows, unless the probe marker asks for a refusal.
func validate(_ context.Context, req admission.Request) admission.Response {
	if bytes.Contains(req.Object.Raw, refuseMarker) {
		return admission.Denied(refusal)
	}
	return admission.Allowed("")
}

// mutate allows unchanged, unless the probe marker asks for a mutation.
// The probe object always has annotations (it carries the marker), so the
// map exists.
func mutate(_ context.Context, req admission.Request) admission.Response {
	if bytes.Contains(req.Object.Raw, mutateMarker) {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/annotations/rollout-bench~1mutated", "true"))
	}
	return admission.Allowed("")
}
