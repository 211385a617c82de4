// Command pause is the sandbox process of the test environment's node
// (test/framework, Node) and, with --serve, a tiny HTTP server for tests to
// run as a Pod: both from one static binary, so that one image, built
// without a registry (cmd/pause-image), serves as containerd's sandbox
// image and as a test workload.
//
// Without flags it sleeps until SIGTERM or SIGINT, reaping the children it
// inherits as the PID 1 of a shared process namespace. With --serve ADDR it
// also answers every HTTP request on ADDR with 200 and the host name (the
// Pod's name), /healthz with 200 "ok", and /apiserver with what the API
// server answers a SelfSubjectReview made as the Pod's ServiceAccount through
// the kubernetes Service, as an in-cluster client makes it (its status line,
// then its body): whether a Pod reaches and is authenticated by the API
// server.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// serviceAccountDir is where the kubelet mounts a Pod's ServiceAccount
// token and the cluster's CA (kube-root-ca.crt).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	serve := flag.String("serve", "", "address to serve HTTP on (e.g. :8080); none by default")
	flag.Parse()

	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	if *serve != "" {
		host, _ := os.Hostname()
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.HandleFunc("/apiserver", selfSubjectReview)
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
		log.Printf("serving HTTP on %s as %s", *serve, host)
		go func() { log.Fatal(http.ListenAndServe(*serve, mux)) }()
	}
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

// selfSubjectReview asks the API server who the Pod's ServiceAccount token
// is, at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, trusting only the
// mounted CA, and writes the answer's status and body.
func selfSubjectReview(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) { http.Error(w, err.Error(), http.StatusBadGateway) }
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		fail(err)
		return
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		fail(err)
		return
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fail(fmt.Errorf("no certificate in %s/ca.crt", serviceAccountDir))
		return
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url,
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		fail(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(w, "%s\n%s\n", resp.Status, body)
}
