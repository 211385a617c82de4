package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// MetricSum says which samples of a Prometheus text exposition to add up:
// those of metric Name whose labels Match accepts (all when nil).
type MetricSum struct {
	Name  string
	Match func(labels map[string]string) bool
}

// SumMetrics reads a Prometheus text exposition and returns, for each
// wanted sum, the total of its samples (NaN when no sample matched).
func SumMetrics(r io.Reader, wanted []MetricSum) ([]float64, error) {
	samples, err := framework.ParseMetrics(r)
	if err != nil {
		return nil, err
	}
	return sumSamples(samples, wanted), nil
}

// sumSamples is SumMetrics of parsed samples.
func sumSamples(samples []framework.Sample, wanted []MetricSum) []float64 {
	out := make([]float64, len(wanted))
	found := make([]bool, len(wanted))
	for _, sample := range samples {
		for i, w := range wanted {
			if sample.Name != w.Name || w.Match != nil && !w.Match(sample.Labels) {
				continue
			}
			out[i] += sample.Value
			found[i] = true
		}
	}
	for i := range out {
		if !found[i] {
			out[i] = math.NaN()
		}
	}
	return out
}

// label returns a Match accepting the samples whose label key has value.
func label(key, value string) func(map[string]string) bool {
	return func(l map[string]string) bool { return l[key] == value }
}

// guardWebhook accepts the samples of the guard's webhooks (label name
// ending in rollout-guard.io).
func guardWebhook(l map[string]string) bool { return strings.HasSuffix(l["name"], ".rollout-guard.io") }

// What the sampler reads from the guard's metrics endpoint.
var guardMetrics = []MetricSum{
	{Name: "go_goroutines"},
	{Name: "go_memstats_heap_inuse_bytes"},
	{Name: "rest_client_requests_total"},
	{Name: "rollout_guard_live_decisions_total"},
}

// What it reads from kube-apiserver's.
var apiServerMetrics = []MetricSum{
	{Name: "apiserver_request_total"},
	{Name: "apiserver_request_total", Match: label("resource", "rolloutrevisions")},
	{Name: "apiserver_admission_webhook_admission_duration_seconds_count", Match: guardWebhook},
}

// guardScraper reads the guard's metrics endpoint with a token bound to the
// shipped rollout-guard-metrics-reader ClusterRole.
type guardScraper struct {
	url, token string
}

// newGuardScraper creates a ServiceAccount, binds it to the metrics-reader
// role and requests a token for it valid for the whole run.
func newGuardScraper(ctx context.Context, c client.Client, url string, valid time.Duration) (*guardScraper, error) {
	const namespace = "soak-metrics"
	token, err := framework.MetricsReaderToken(ctx, c, namespace, valid)
	if err != nil {
		return nil, err
	}
	// The guard keeps a refusal for 30 s: ask the API server first, so the
	// first scrape is judged with the binding in place.
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + namespace + ":" + framework.MetricsReaderAccount,
			Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		if err := c.Create(ctx, sar); err == nil && sar.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the metrics scraper's ClusterRoleBinding never took effect")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &guardScraper{url: url, token: token}, nil
}

// scrape returns the guardMetrics sums.
func (g *guardScraper) scrape(ctx context.Context) ([]float64, error) {
	samples, err := framework.ScrapeMetrics(ctx, g.url, g.token)
	if err != nil {
		return nil, err
	}
	return sumSamples(samples, guardMetrics), nil
}

// apiServerScraper reads kube-apiserver's /metrics as the admin, each read
// bounded to 5 s.
type apiServerScraper struct {
	cfg *rest.Config
}

// newAPIServerScraper reads the API server of cfg.
func newAPIServerScraper(cfg *rest.Config) *apiServerScraper {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	return &apiServerScraper{cfg: cfg}
}

// scrape returns the apiServerMetrics sums.
func (a *apiServerScraper) scrape(ctx context.Context) ([]float64, error) {
	samples, err := framework.APIServerMetrics(ctx, a.cfg)
	if err != nil {
		return nil, err
	}
	return sumSamples(samples, apiServerMetrics), nil
}

// procStats is what processStats reads from /proc.
type procStats struct {
	rss, rssAnon, rssFile float64 // bytes
	fds                   float64
}

// processStats reads the resident memory (VmRSS, RssAnon, RssFile) and the
// number of open file descriptors of pid from /proc.
func processStats(pid int) (procStats, error) {
	st := procStats{rss: math.NaN(), rssAnon: math.NaN(), rssFile: math.NaN(), fds: math.NaN()}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return st, err
	}
	parseStatus(string(status), &st)
	entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return st, err
	}
	st.fds = float64(len(entries))
	return st, nil
}

// parseStatus reads VmRSS, RssAnon and RssFile ("123456 kB") of a
// /proc/PID/status text into st.
func parseStatus(status string, st *procStats) {
	for _, line := range strings.Split(status, "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var into *float64
		switch name {
		case "VmRSS":
			into = &st.rss
		case "RssAnon":
			into = &st.rssAnon
		case "RssFile":
			into = &st.rssFile
		default:
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
				*into = kb * 1024
			}
		}
	}
}

// Sockets counts the guard's established TCP connections by role.
type Sockets struct {
	// WebhookIn are connections to its webhook port (from kube-apiserver,
	// and the harness's TLS probes during rotations).
	WebhookIn int
	// APIServerOut are its connections to kube-apiserver.
	APIServerOut int
	// Other are the rest (metrics scrapes, health probes).
	Other int
}

// tcpSocket is one line of /proc/PID/net/tcp or tcp6.
type tcpSocket struct {
	localPort, remotePort int
	state                 string
}

// parseProcTCP reads /proc/PID/net/tcp (or tcp6) and returns the sockets by inode.
func parseProcTCP(r io.Reader) (map[string]tcpSocket, error) {
	out := map[string]tcpSocket{}
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		lp, err1 := hexPort(f[1])
		rp, err2 := hexPort(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out[f[9]] = tcpSocket{localPort: lp, remotePort: rp, state: f[3]}
	}
	return out, sc.Err()
}

// hexPort returns the port of an address "0100007F:DD7E".
func hexPort(addr string) (int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("no port in %q", addr)
	}
	p, err := strconv.ParseInt(addr[i+1:], 16, 32)
	return int(p), err
}

// tcpEstablished is the state of an established connection in /proc/net/tcp.
const tcpEstablished = "01"

// socketStats counts pid's established TCP connections: those to
// webhookPort, those to apiServerPort, the others.
func socketStats(pid, webhookPort, apiServerPort int) (Sockets, error) {
	var out Sockets
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	entries, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return out, err
	}
	inodes := map[string]bool{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, "fd", e.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, "net", table))
		if err != nil {
			return out, err
		}
		socks, err := parseProcTCP(f)
		f.Close()
		if err != nil {
			return out, err
		}
		for inode, s := range socks {
			if !inodes[inode] || s.state != tcpEstablished {
				continue
			}
			switch {
			case s.localPort == webhookPort:
				out.WebhookIn++
			case s.remotePort == apiServerPort:
				out.APIServerOut++
			default:
				out.Other++
			}
		}
	}
	return out, nil
}
