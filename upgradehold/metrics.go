package upgradehold

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// answersTotal counts the BeforeClusterUpgrade answers by outcome. The
// request latency is controller-runtime's
// controller_runtime_webhook_latency_seconds for the hook's path.
var answersTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "rollout_guard_wave_hold_answers_total",
	Help: "BeforeClusterUpgrade answers of the wave hold by outcome: held (an earlier wave is not done or not soaked), released, no-wave (the Cluster carries no wave label), bad-label (its label is not a wave), failed-open (the guard could not read the Clusters and let the upgrade go), bad-request (a request the guard could not read, answered with a Failure).",
}, []string{"outcome"})

func init() {
	metrics.Registry.MustRegister(answersTotal)
}

// countAnswer records one answer.
func countAnswer(outcome string) { answersTotal.WithLabelValues(outcome).Inc() }
