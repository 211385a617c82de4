package framework

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMetrics(t *testing.T) {
	page := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="rolloutrevisions",verb="POST"} 30
apiserver_request_total{code="409",resource="rolloutrevisions",verb="POST"} 2
apiserver_request_total{code="200",resource="machines",verb="LIST"} 7
# HELP workqueue_depth Current depth of workqueue.
# TYPE workqueue_depth gauge
workqueue_depth{name="history-machinedeployment"} 3
# HELP controller_runtime_webhook_latency_seconds Histogram of the latency.
# TYPE controller_runtime_webhook_latency_seconds histogram
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="0.005"} 3
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="+Inf"} 4
controller_runtime_webhook_latency_seconds_sum{webhook="/validate"} 0.5
controller_runtime_webhook_latency_seconds_count{webhook="/validate"} 4
`
	samples, err := ParseMetrics(strings.NewReader(page))
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"POST": 32}, SumBy(samples, "apiserver_request_total", map[string]string{"resource": "rolloutrevisions"}, "verb"))
	assert.Equal(t, map[string]float64{"": 3}, SumBy(samples, "workqueue_depth", nil))
	assert.Equal(t, map[string]float64{"/validate": 0.5}, SumBy(samples, "controller_runtime_webhook_latency_seconds_sum", nil, "webhook"))
	assert.Equal(t, map[string]float64{"/validate": 4}, SumBy(samples, "controller_runtime_webhook_latency_seconds_count", nil, "webhook"))
	assert.Len(t, Select(samples, "apiserver_request_total", nil), 3)
	got := Select(samples, "apiserver_request_total", map[string]string{"resource": "rolloutrevisions", "code": "409"})
	require.Len(t, got, 1)
	assert.Equal(t, 2.0, got[0].Value)
	assert.Empty(t, Select(samples, "apiserver_request_total", map[string]string{"resource": "nodes"}))

	_, err = ParseMetrics(strings.NewReader("not a metric page {"))
	assert.Error(t, err)
}
