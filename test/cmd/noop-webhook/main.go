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
// as the guard's handlers do). The handlers allow everything. The paths
// are read from the registration it is installed with (--manifests), so
// that it serves what the guard's manifests name as they grow new kinds.
//
// So that the benchmark can tell that the API server really calls it, an
// object carrying the annotation rollout-bench/probe=refuse is refused
// (validating paths), and one carrying rollout-bench/probe=mutate gets the
// annotation rollout-bench/mutated=true (mutating paths). The benchmark's
// own edits carry neither.
//
// Under /stamp, each mutating path is served by a floor for stamping webhooks
// (stamp): it allows, and patches six annotations of the sizes the guard's
// revision stamps have, so that the API server applies and stores a patch
// as it does the guard's. bench-admission's noop-stamp configuration calls
// those paths: the guard's own cost apart from the cost of being a stamper.
//
// Under /record, with --kubeconfig (the guard's identity, as bench-admission
// gives it), each mutating path is served by a floor for recording webhooks
// (record.go): it stamps as /stamp does and, for every update that makes a
// new revision (the kind's revision fields changed: a MachineDeployment's
// or MachinePool's spec.template, a KubeadmControlPlane's spec.version,
// spec.machineTemplate or spec.kubeadmConfigSpec; never labels,
// annotations, replicas or status), creates one RolloutRevision holding the
// replaced revision, owned by the object, once the mutating call is
// answered (as the guard's history reconciler does) and never on a dry run. Nothing else: no read, list or pruning. bench-admission's
// noop-record configuration calls those paths: what any webhook that keeps
// the guard's history must pay, so that guard/noop-record is the guard's own
// work.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gomodules.xyz/jsonpatch/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/webhooks"
)

// Markers the benchmark's probes put on an object (see the package comment).
var (
	refuseMarker = []byte(`"rollout-bench/probe":"refuse"`)
	mutateMarker = []byte(`"rollout-bench/probe":"mutate"`)
)

// refusal is the message of a refused probe; the benchmark looks for it.
const refusal = "noop-webhook: refused the probe (annotation rollout-bench/probe=refuse)"

// paths are the validating and mutating paths of a webhook registration
// file.
type paths struct{ validating, mutating []string }

// readPaths returns the paths the webhook configurations in the YAML file
// at path call, so that the no-op serves exactly the paths the guard's
// manifests register (and the guard serves), whatever kinds they grow to.
func readPaths(path string) (paths, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return paths{}, fmt.Errorf("reading the webhook registration: %w", err)
	}
	var out paths
	for i, doc := range strings.Split(string(raw), "\n---") {
		var cfg struct {
			Kind     string `json:"kind"`
			Webhooks []struct {
				Name         string                                      `json:"name"`
				ClientConfig admissionregistrationv1.WebhookClientConfig `json:"clientConfig"`
			} `json:"webhooks"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			return paths{}, fmt.Errorf("decoding document %d of %s: %w", i+1, path, err)
		}
		for _, w := range cfg.Webhooks {
			p := ""
			switch {
			case w.ClientConfig.Service != nil && w.ClientConfig.Service.Path != nil:
				p = *w.ClientConfig.Service.Path
			case w.ClientConfig.URL != nil:
				u, err := url.Parse(*w.ClientConfig.URL)
				if err != nil {
					return paths{}, fmt.Errorf("webhook %s in %s: %w", w.Name, path, err)
				}
				p = u.Path
			}
			if p == "" {
				return paths{}, fmt.Errorf("webhook %s in %s has no path", w.Name, path)
			}
			switch cfg.Kind {
			case "ValidatingWebhookConfiguration":
				out.validating = appendNew(out.validating, p)
			case "MutatingWebhookConfiguration":
				out.mutating = appendNew(out.mutating, p)
			}
		}
	}
	if len(out.validating)+len(out.mutating) == 0 {
		return paths{}, fmt.Errorf("no webhook in %s", path)
	}
	return out, nil
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9444, "HTTPS port")
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key")
	manifests := flag.String("manifests", "", "the guard's webhook registration (config/webhook/manifests.yaml), whose paths are served")
	metricsAddr := flag.String("metrics-bind-address", "", "also serve controller-runtime's metrics (the webhook server's answer times, as the guard's) over plain HTTP at /metrics on this address; empty: none")
	flag.Parse()
	if *certDir == "" || *manifests == "" {
		log.Fatal("noop-webhook: --cert-dir and --manifests are required")
	}
	ps, err := readPaths(*manifests)
	if err != nil {
		log.Fatalf("noop-webhook: %v", err)
	}
	// controller-runtime's server and certificate watcher log through
	// its global logger, as in the guard.
	ctrllog.SetLogger(zap.New())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *metricsAddr != "" {
		go serveMetrics(ctx, *metricsAddr)
	}
	// --kubeconfig is controller-runtime's flag, which the guard has too.
	var rec *recorder
	if kc := flag.Lookup("kubeconfig"); kc != nil && kc.Value.String() != "" {
		if rec, err = newRecorder(); err != nil {
			log.Fatalf("noop-webhook: %v", err)
		}
	}
	if err := serve(ctx, *host, *port, *certDir, ps, rec); err != nil {
		log.Fatalf("noop-webhook: %v", err)
	}
}

// newServer is the guard's webhook server (cmd/webhook) with the no-op
// handlers registered at the guard's paths.
func newServer(host string, port int, certDir string, ps paths, rec *recorder) webhook.Server {
	srv := webhooks.DrainingServer{Server: webhook.NewServer(webhook.Options{
		Host:    host,
		Port:    port,
		CertDir: certDir,
		TLSOpts: []func(*tls.Config){minTLS12},
	})}
	for _, path := range ps.validating {
		srv.Register(path, &webhook.Admission{Handler: admission.HandlerFunc(validate)})
	}
	for _, path := range ps.mutating {
		srv.Register(path, &webhook.Admission{Handler: admission.HandlerFunc(mutate)})
		srv.Register(StampPrefix+path, &webhook.Admission{Handler: admission.HandlerFunc(stamp)})
		if rec != nil {
			srv.Register(RecordPrefix+path, &webhook.Admission{Handler: admission.HandlerFunc(rec.handle)})
		}
	}
	return srv
}

func serve(ctx context.Context, host string, port int, certDir string, ps paths, rec *recorder) error {
	srv := newServer(host, port, certDir, ps, rec)
	log.Printf("noop-webhook: serving on https://%s:%d", host, port)
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("serving on %s:%d: %w", host, port, err)
	}
	return nil
}

// serveMetrics serves controller-runtime's metrics registry, where its
// webhook server counts each path's answer times, at addr until ctx ends:
// so that the benchmark can set the no-op's own answer time beside the
// guard's. Plain HTTP on a local address: a benchmark's endpoint.
func serveMetrics(ctx context.Context, addr string) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Printf("noop-webhook: serving metrics on %s: %v", addr, err)
	}
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

// StampPrefix is the path prefix of the stamping floor's mutating paths.
const StampPrefix = "/stamp"

// stamps counts the stamping floor's patches: its revision numbers.
var stamps atomic.Int64

// stamp allows with a patch of six annotations under rollout-bench/, of
// the sizes of the guard's revision stamps (a number, a user, a time, a
// field manager, a change-cause, a change type), read from what every
// stamper has at hand: the request. It reads the object's annotations
// only to know whether there are any to add to. The probe marker gets its
// mutation too.
func stamp(_ context.Context, req admission.Request) admission.Response {
	return stampWith(req, "true")
}

// stampValues are the six stamps of one request.
func stampValues(req admission.Request) map[string]string {
	return map[string]string{
		"rollout-bench/revision":      strconv.FormatInt(stamps.Add(1), 10),
		"rollout-bench/changed-by":    req.UserInfo.Username,
		"rollout-bench/changed-at":    time.Now().UTC().Format(time.RFC3339),
		"rollout-bench/field-manager": "rollout-bench",
		"rollout-bench/change-cause":  "version v1.35.1 → v1.35.2; infrastructureRef c1-md-0-1 → c1-md-0-2",
		"rollout-bench/change-type":   "rollout",
	}
}

// stampWith is stamp, the probe's mutation being the annotation
// rollout-bench/mutated=mutation.
func stampWith(req admission.Request, mutation string) admission.Response {
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("noop-webhook: decoding the object: %w", err))
	}
	values := stampValues(req)
	if bytes.Contains(req.Object.Raw, mutateMarker) {
		values["rollout-bench/mutated"] = mutation
	}
	if len(obj.Metadata.Annotations) == 0 {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/annotations", values))
	}
	ops := make([]jsonpatch.JsonPatchOperation, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations/"+strings.ReplaceAll(k, "/", "~1"), values[k]))
	}
	return admission.Patched("", ops...)
}
