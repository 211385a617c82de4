package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// serverMetrics is what one webhook server's own /metrics said at one
// moment: the figures the report sets beside the API server's.
type serverMetrics struct {
	// latency is framework.WebhookLatencyMetric, by webhook path.
	latency map[string]histogram
	// reconciles is controller_runtime_reconcile_total, by controller.
	reconciles map[string]float64
	// requests is rest_client_requests_total (the server's requests to
	// the API server), by verb.
	requests map[string]float64
	// queued is workqueue_depth summed over every queue.
	queued float64
}

// histogram is a Prometheus histogram: the sum and count of its
// observations and the cumulative count of each bucket, by upper bound.
type histogram struct {
	sum, count float64
	buckets    map[float64]float64
}

// minus is h's observations since before.
func (h histogram) minus(before histogram) histogram {
	out := histogram{sum: h.sum - before.sum, count: h.count - before.count, buckets: map[float64]float64{}}
	for le, n := range h.buckets {
		out.buckets[le] = n - before.buckets[le]
	}
	return out
}

// add is the observations of h and o.
func (h histogram) add(o histogram) histogram {
	out := histogram{sum: h.sum + o.sum, count: h.count + o.count, buckets: map[float64]float64{}}
	for le, n := range h.buckets {
		out.buckets[le] += n
	}
	for le, n := range o.buckets {
		out.buckets[le] += n
	}
	return out
}

// quantile estimates the q-quantile (seconds) as Prometheus'
// histogram_quantile does: linear interpolation inside the bucket that
// holds the rank; the highest finite bound when the rank is in +Inf.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	rank := q * h.count
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := h.buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		if !math.IsInf(le, 1) {
			lower = le
		}
		below = n
	}
	return lower
}

// metricsHTTP reads the local metrics endpoints (the guard's certificate
// is self-signed).
var metricsHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed local metrics endpoints
}}

// scrapeServer reads serverMetrics from the metrics endpoint at url, with
// a bearer token when token is not "", retrying a few times while a
// server just started opens it.
func scrapeServer(ctx context.Context, url, token string) (serverMetrics, error) {
	var lastErr error
	for range 20 {
		m, err := scrapeServerOnce(ctx, url, token)
		if err == nil {
			return m, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return serverMetrics{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return serverMetrics{}, fmt.Errorf("scraping %s: %w", url, lastErr)
}

func scrapeServerOnce(ctx context.Context, url, token string) (serverMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return serverMetrics{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsHTTP.Do(req)
	if err != nil {
		return serverMetrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return serverMetrics{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return parseServerMetrics(resp.Body)
}

// parseServerMetrics reads serverMetrics from a /metrics page.
func parseServerMetrics(r io.Reader) (serverMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return serverMetrics{}, fmt.Errorf("parsing a /metrics page: %w", err)
	}
	out := serverMetrics{latency: map[string]histogram{}, reconciles: map[string]float64{}, requests: map[string]float64{}}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	for _, m := range families[framework.WebhookLatencyMetric].GetMetric() {
		h := m.GetHistogram()
		path := label(m, "webhook")
		acc := out.latency[path]
		one := histogram{sum: h.GetSampleSum(), count: float64(h.GetSampleCount()), buckets: map[float64]float64{math.Inf(1): float64(h.GetSampleCount())}}
		for _, b := range h.GetBucket() {
			one.buckets[b.GetUpperBound()] = float64(b.GetCumulativeCount())
		}
		out.latency[path] = acc.add(one)
	}
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		out.reconciles[label(m, "controller")] += m.GetCounter().GetValue()
	}
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		out.requests[label(m, "method")] += m.GetCounter().GetValue()
	}
	for _, m := range families["workqueue_depth"].GetMetric() {
		out.queued += m.GetGauge().GetValue()
	}
	return out, nil
}

// serverOf is the metrics endpoint of cf's webhook server and the token
// to read it with; "" for a configuration without one.
func (b *bench) serverOf(cf config) (url, token string) {
	switch cf.name {
	case cfgGuard:
		return b.env.GuardMetricsURL(), b.metricsToken
	case cfgNoop, cfgNoopStamp, cfgNoopRec, cfgNoopNoMC:
		return b.noopMetrics, ""
	}
	return "", ""
}

// serverNow reads cf's webhook server's metrics, the zero value for a
// configuration without a server.
func (b *bench) serverNow(ctx context.Context, cf config) (serverMetrics, error) {
	url, token := b.serverOf(cf)
	if url == "" {
		return serverMetrics{}, nil
	}
	m, err := scrapeServer(ctx, url, token)
	if err != nil {
		return serverMetrics{}, fmt.Errorf("reading the %s webhook server's metrics: %w", cf.name, err)
	}
	return m, nil
}

// drain waits, for at most timeout, until cf's webhook server has no work
// queued (the guard's reconcilers catching up with the events of the
// edits just made, or with the objects it found at its start), and
// returns its metrics then.
func (b *bench) drain(ctx context.Context, cf config, timeout time.Duration) (serverMetrics, error) {
	url, token := b.serverOf(cf)
	deadline := time.Now().Add(timeout)
	for {
		m, err := scrapeServer(ctx, url, token)
		if err != nil || m.queued == 0 || time.Now().After(deadline) {
			return m, err
		}
		select {
		case <-ctx.Done():
			return serverMetrics{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// since is what the server did between before and m: its answer times
// by type as webhookTimes has them (admit: its mutating paths;
// validating), its latency histograms by path, reconciles by controller
// and API requests by verb.
func (m serverMetrics) since(before serverMetrics) (byType map[string]webhookTime, latency map[string]histogram, reconciles, requests map[string]float64) {
	byType, latency, reconciles, requests = map[string]webhookTime{}, map[string]histogram{}, map[string]float64{}, map[string]float64{}
	for path, h := range m.latency {
		d := h.minus(before.latency[path])
		if d.count <= 0 {
			continue
		}
		latency[path] = d
		byType[pathType(path)] = byType[pathType(path)].add(webhookTime{seconds: d.sum, calls: d.count})
	}
	for c, v := range m.reconciles {
		if d := v - before.reconciles[c]; d > 0 {
			reconciles[c] = d
		}
	}
	for verb, v := range m.requests {
		if d := v - before.requests[verb]; d > 0 {
			requests[verb] = d
		}
	}
	return byType, latency, reconciles, requests
}

// pathType is "admit" for a mutating path, "validating" otherwise, as the
// API server's metrics name webhook types.
func pathType(path string) string {
	if strings.Contains(path, "/mutate-") {
		return "admit"
	}
	return "validating"
}
