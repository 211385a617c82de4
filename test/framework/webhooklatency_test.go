package framework

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScrapeWebhookLatencies: the bearer token is sent when given, the
// histogram's sum and count are read per path, and a refusal says what the
// endpoint answered.
func TestScrapeWebhookLatencies(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`controller_runtime_webhook_latency_seconds_sum{webhook="/mutate-x"} 0.5
controller_runtime_webhook_latency_seconds_count{webhook="/mutate-x"} 4
controller_runtime_webhook_latency_seconds_bucket{webhook="/mutate-x",le="+Inf"} 4
`))
	}))
	defer srv.Close()
	got, err := ScrapeWebhookLatencies(context.Background(), srv.URL, "t0ken")
	require.NoError(t, err)
	assert.Equal(t, WebhookLatencies{"/mutate-x": {0.5, 4}}, got)
	assert.Equal(t, WebhookLatencies{"/mutate-x": {0.25, 2}}, got.Since(WebhookLatencies{"/mutate-x": {0.25, 2}}))

	_, err = ScrapeMetrics(context.Background(), srv.URL, "")
	assert.ErrorContains(t, err, "HTTP 401: Unauthorized")
}
