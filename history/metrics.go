package history

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rollout-guard/rollout-guard/kinds"
)

// recordErrorsTotal counts revisions the Recorder could not write. A failure
// at admission refuses the edit (the guard records the revision it replaces
// before letting the edit through), a failure in the reconciler leaves the
// live revision unrecorded until its next try: either way an operator must
// look, and nothing else tells these failures apart from the guard's other
// errors.
var recordErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "rollout_guard_revision_record_errors_total",
	Help: "Revisions that could not be recorded in a RolloutRevision (after retries), by kind of the object whose history it is.",
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(recordErrorsTotal)
	// Every kind's series exists from the start at 0, so that the first
	// failure after a restart is an increase an alert sees, not the first
	// sample of a new series (which increase() and rate() cannot count).
	for _, k := range kinds.WithRevisions() {
		recordErrorsTotal.WithLabelValues(k.GVK.Kind)
	}
}
