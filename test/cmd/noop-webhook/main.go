// Command noop-webhook is the cheapest admission webhook server one could
// register: it answers every AdmissionReview on HTTPS with "allowed" and no
// patch. make bench-admission registers it in place of the guard (same
// rules, timeouts and matchConditions) to measure the floor any
// validating + mutating webhook pair pays: the API server's round trips.
//
// Paths beginning with /mutate answer as a mutating webhook, every other path
// as a validating one. So that the benchmark can tell that the API server
// really calls it, an object carrying the annotation
// rollout-bench/probe=refuse is refused (validating paths), and one carrying
// rollout-bench/probe=mutate gets the annotation rollout-bench/mutated=true
// (mutating paths). The benchmark's own edits carry neither.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Markers the benchmark's probes put on an object (see the package comment).
var (
	refuseMarker = []byte(`"rollout-bench/probe":"refuse"`)
	mutateMarker = []byte(`"rollout-bench/probe":"mutate"`)
	// mutatePatch adds rollout-bench/mutated=true; the probe object always
	// has annotations (it carries the marker), so the map exists.
	mutatePatch = []byte(`[{"op":"add","path":"/metadata/annotations/rollout-bench~1mutated","value":"true"}]`)
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9444, "HTTPS port")
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key")
	flag.Parse()
	if *certDir == "" {
		log.Fatal("noop-webhook: --cert-dir is required")
	}
	if err := serve(net.JoinHostPort(*host, strconv.Itoa(*port)), *certDir); err != nil {
		log.Fatalf("noop-webhook: %v", err)
	}
}

func serve(addr, certDir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("loading the serving certificate from %s: %w", certDir, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/", review)
	srv := &http.Server{
		Addr:    addr,
		Handler: mux,
		// HTTP/1.1 only, as controller-runtime's webhook server (the guard's)
		// serves by default: the comparison is then about the work, not the
		// protocol. A non-nil empty TLSNextProto turns HTTP/2 off.
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	errs := make(chan error, 1)
	go func() { errs <- srv.ListenAndServeTLS("", "") }()
	log.Printf("noop-webhook: serving on https://%s", addr)
	select {
	case <-stop:
		return srv.Close()
	case err := <-errs:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serving on %s: %w", addr, err)
	}
}

// review answers one AdmissionReview: allowed, unless a probe marker asks
// otherwise.
func review(w http.ResponseWriter, r *http.Request) {
	var in admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
		http.Error(w, fmt.Sprintf("decoding the AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
	obj := in.Request.Object.Raw
	if strings.HasPrefix(r.URL.Path, "/mutate") {
		if bytes.Contains(obj, mutateMarker) {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType, resp.Patch = &pt, mutatePatch
		}
	} else if bytes.Contains(obj, refuseMarker) {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
			Reason: metav1.StatusReasonForbidden, Message: "noop-webhook: refused the probe (annotation rollout-bench/probe=refuse)"}
	}
	out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		log.Printf("noop-webhook: writing the response: %v", err)
	}
}
