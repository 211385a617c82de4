package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// exposition is kube-apiserver's histogram of admission webhook calls, as
// it serves it: two of the guard's webhooks and one of Cluster API's.
const exposition = `# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.machinedeployment.rollout-guard.io",operation="UPDATE",rejected="false",type="admit",le="+Inf"} 40
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp.machinedeployment.rollout-guard.io",operation="UPDATE",rejected="false",type="admit"} 0.2
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.machinedeployment.rollout-guard.io",operation="UPDATE",rejected="false",type="admit"} 40
apiserver_admission_webhook_admission_duration_seconds_bucket{name="validate.kubeadmcontrolplane.rollout-guard.io",operation="UPDATE",rejected="false",type="validating",le="+Inf"} 10
apiserver_admission_webhook_admission_duration_seconds_sum{name="validate.kubeadmcontrolplane.rollout-guard.io",operation="UPDATE",rejected="false",type="validating"} 0.05
apiserver_admission_webhook_admission_duration_seconds_count{name="validate.kubeadmcontrolplane.rollout-guard.io",operation="UPDATE",rejected="false",type="validating"} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{name="validation.machinedeployment.cluster.x-k8s.io",operation="UPDATE",rejected="false",type="validating",le="+Inf"} 99
apiserver_admission_webhook_admission_duration_seconds_sum{name="validation.machinedeployment.cluster.x-k8s.io",operation="UPDATE",rejected="false",type="validating"} 9
apiserver_admission_webhook_admission_duration_seconds_count{name="validation.machinedeployment.cluster.x-k8s.io",operation="UPDATE",rejected="false",type="validating"} 99
# HELP apiserver_admission_match_condition_exclusions_total [ALPHA] Admission match condition evaluation exclusions count.
# TYPE apiserver_admission_match_condition_exclusions_total counter
apiserver_admission_match_condition_exclusions_total{kind="webhook",name="validate.machinedeployment.rollout-guard.io",operation="UPDATE",type="validating"} 120
apiserver_admission_match_condition_exclusions_total{kind="webhook",name="stamp.kubeadmcontrolplane.rollout-guard.io",operation="UPDATE",type="admit"} 30
apiserver_admission_match_condition_exclusions_total{kind="webhook",name="other.example.com",operation="UPDATE",type="admit"} 7
`

func TestGuardAdmissionsOf(t *testing.T) {
	samples, err := framework.ParseMetrics(strings.NewReader(exposition))
	require.NoError(t, err)
	a := guardAdmissionsOf(samples)
	assert.EqualValues(t, 50, a.count, "only the guard's webhooks")
	assert.Equal(t, 250*time.Millisecond, a.sum)
	assert.InDelta(t, 5.0, mean(a.sum, a.count), 1e-9)
	assert.EqualValues(t, 150, a.skipped, "only the guard's webhooks")

	none, err := framework.ParseMetrics(strings.NewReader("# TYPE up gauge\nup 1\n"))
	require.NoError(t, err)
	assert.Equal(t, admissions{}, guardAdmissionsOf(none), "no webhook called yet")
}

func TestSummarize(t *testing.T) {
	guarded := &arm{durations: []time.Duration{50 * time.Second, 60 * time.Second, 55 * time.Second},
		through: []float64{300, 320, 310}, waited: []time.Duration{time.Second, 2 * time.Second, 1500 * time.Millisecond},
		skipped: []float64{9, 7, 8}}
	bare := &arm{durations: []time.Duration{50 * time.Second, 50 * time.Second, 55 * time.Second}}
	s := summarize(guarded, bare, report.Machine{})
	assert.InDelta(t, 55.0/50, s.Ratio.Pooled, 0.001)
	assert.InDelta(t, 1.0, s.Ratio.Min, 0.001)
	assert.InDelta(t, 1.2, s.Ratio.Max, 0.001)
	assert.Equal(t, [3]float64{300, 310, 320}, s.GuardRequests)
	assert.InDelta(t, 4500.0/930, s.GuardWaitMeanMS, 0.001)
	assert.Equal(t, [3]float64{7, 8, 9}, s.SkippedByMatchConditions)
	assert.Equal(t, 6, s.Machines)
}
