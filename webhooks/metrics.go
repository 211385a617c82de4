package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rollout-guard/rollout-guard/skew"
)

// Outcomes of a validating admission, as counted by decisionsTotal.
const (
	outcomeAllowed    = "allowed"
	outcomeRefused    = "refused"
	outcomeOverridden = "overridden"
	outcomeError      = "error"
	// outcomeWarned: refused by the policy, allowed with a warning because
	// the guard only warns (EnforcementWarn).
	outcomeWarned = "warned"
)

var (
	// decisionsTotal counts validating admissions by kind and outcome, and
	// refusals and overrides once per broken rule. The request latency is
	// controller-runtime's controller_runtime_webhook_latency_seconds.
	decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_guard_admission_decisions_total",
		Help: "Validating admissions by kind and outcome (allowed, refused, overridden, warned, error); refusals, overrides and changes allowed only because the guard warns are counted once per rule broken.",
	}, []string{"kind", "outcome", "rule"})
	// warningsTotal counts admissions answered with at least one warning.
	warningsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_guard_admission_warnings_total",
		Help: "Admissions allowed with at least one warning (facts the guard could not find, skews left as they were).",
	}, []string{"kind"})
	// revisionsRecordedTotal counts revisions written by the mutating webhook.
	revisionsRecordedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_guard_revisions_recorded_total",
		Help: "Revisions recorded at admission (replaced revisions and restarts), by kind.",
	}, []string{"kind"})
	// unverifiedRequestsTotal counts requests whose old object is not what
	// the API server stored (Persisted), of which nothing was recorded.
	unverifiedRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_guard_unverified_requests_total",
		Help: "Admission requests whose old object is not what the API server stored, by kind and reason (not-found, not-current, content-differs, stamps-differ, create-with-identity): nothing of them was recorded. Requests sent straight to the guard's port, not by the API server, are counted here; not-current also counts, rarely, an API server call made with an old copy that the API server retries.",
	}, []string{"kind", "reason"})
	// liveDecisionsTotal counts decisions made from live reads because a
	// watch of the guard's caches was down (see Watches).
	liveDecisionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rollout_guard_live_decisions_total",
		Help: "Decisions made from live reads of the API server because one of the guard's watches was down, so its caches could be stale.",
	})
)

func init() {
	metrics.Registry.MustRegister(decisionsTotal, warningsTotal, revisionsRecordedTotal, unverifiedRequestsTotal, liveDecisionsTotal)
}

// countDecision records the outcome of one validating admission.
func countDecision(kind, outcome string, d skew.Decision, warnings int) {
	if warnings > 0 {
		warningsTotal.WithLabelValues(kind).Inc()
	}
	if outcome == outcomeAllowed || outcome == outcomeError || len(d.Violations) == 0 {
		decisionsTotal.WithLabelValues(kind, outcome, "").Inc()
		return
	}
	seen := map[skew.RuleID]bool{}
	for _, v := range d.Violations {
		if !seen[v.Rule] {
			seen[v.Rule] = true
			decisionsTotal.WithLabelValues(kind, outcome, string(v.Rule)).Inc()
		}
	}
}

// countLiveDecision records one decision made from live reads.
func countLiveDecision() { liveDecisionsTotal.Inc() }
