package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// WebhookLatencyMetric is controller-runtime's histogram of the time a
// webhook server takes to answer an admission request, per path (label
// webhook): the server's own share of a request, without the API
// server's.
const WebhookLatencyMetric = "controller_runtime_webhook_latency_seconds"

// WebhookLatencies are the sum (seconds) and count of WebhookLatencyMetric
// per webhook path.
type WebhookLatencies map[string][2]float64

// Since returns, per path, the seconds and requests between before and l.
func (l WebhookLatencies) Since(before WebhookLatencies) WebhookLatencies {
	out := WebhookLatencies{}
	for path, v := range l {
		out[path] = [2]float64{v[0] - before[path][0], v[1] - before[path][1]}
	}
	return out
}

// ScrapeWebhookLatencies reads WebhookLatencyMetric from the metrics
// endpoint at url — with a bearer token when token is not "" (the guard's,
// see MetricsReaderToken) — retrying for a few seconds while a server just
// started opens it.
func ScrapeWebhookLatencies(ctx context.Context, url, token string) (WebhookLatencies, error) {
	var lastErr error
	for range 20 {
		samples, err := ScrapeMetrics(ctx, url, token)
		if err == nil {
			out := WebhookLatencies{}
			for path, v := range SumBy(samples, WebhookLatencyMetric+"_sum", nil, "webhook") {
				s := out[path]
				s[0] = v
				out[path] = s
			}
			for path, v := range SumBy(samples, WebhookLatencyMetric+"_count", nil, "webhook") {
				s := out[path]
				s[1] = v
				out[path] = s
			}
			return out, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("scraping %s: %w", url, lastErr)
}

// metricsClient reads the local metrics endpoints of the processes under
// test, over connections kept alive; their certificates are self-signed.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed local metrics endpoints
}}

// ScrapeMetrics reads a local Prometheus metrics endpoint: the guard's,
// with a bearer token; the no-op webhook's, plain (token "").
func ScrapeMetrics(ctx context.Context, url, token string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return ParseMetrics(resp.Body)
}

// HistoryReconciles is what the guard's metrics say of its history
// reconcilers, summed over all of them (one per kind it records).
type HistoryReconciles struct {
	// Done counts reconciles (controller_runtime_reconcile_total).
	Done float64
	// Queued counts items waiting (workqueue_depth).
	Queued float64
}

// ScrapeHistoryReconciles reads HistoryReconciles from the guard's metrics
// endpoint at url, with a token allowed to read it (MetricsReaderToken).
// The guard's start is over once Done reaches the number of objects it
// records and nothing is Queued.
func ScrapeHistoryReconciles(ctx context.Context, url, token string) (HistoryReconciles, error) {
	samples, err := ScrapeMetrics(ctx, url, token)
	if err != nil {
		return HistoryReconciles{}, err
	}
	var h HistoryReconciles
	for controller, v := range SumBy(samples, "controller_runtime_reconcile_total", nil, "controller") {
		if strings.HasPrefix(controller, "history-") {
			h.Done += v
		}
	}
	for name, v := range SumBy(samples, "workqueue_depth", nil, "name") {
		if strings.HasPrefix(name, "history-") {
			h.Queued += v
		}
	}
	return h, nil
}
