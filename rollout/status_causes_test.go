package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// Replacements no edit caused are named on the machine: a MachineHealthCheck
// that has the machine's owner remediate it, certificates that expire soon.
// An unhealthy machine no remediation was decided for, and a machine out of
// date for another reason, get no cause.
func TestStatusNamesCausesNoEditMade(t *testing.T) {
	with := func(m clusterv1.Machine, conds ...metav1.Condition) clusterv1.Machine {
		m = *m.DeepCopy()
		for _, c := range conds {
			replaced := false
			for i := range m.Status.Conditions {
				if m.Status.Conditions[i].Type == c.Type {
					m.Status.Conditions[i], replaced = c, true
				}
			}
			if !replaced {
				m.Status.Conditions = append(m.Status.Conditions, c)
			}
		}
		return m
	}
	unhealthy := metav1.Condition{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse, Reason: "UnhealthyNode", Message: "Condition Ready on node is reporting status False for more than 5m0s"}
	remediate := metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: "WaitingForRemediation", Message: "Waiting for remediation"}
	expiring := metav1.Condition{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionFalse, Reason: "NotUpToDate", Message: "* Certificates will expire soon"}
	otherwise := metav1.Condition{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionFalse, Reason: "NotUpToDate", Message: "* Version v1.35.2, v1.36.1 required"}
	m := goodMachines(1)[0]
	cases := []struct {
		name    string
		machine clusterv1.Machine
		cause   string
	}{
		{name: "remediated by a MachineHealthCheck", machine: with(m, unhealthy, remediate),
			cause: "remediated: a MachineHealthCheck found it unhealthy (UnhealthyNode: Condition Ready on node is reporting status False for more than 5m0s)"},
		{name: "unhealthy, no remediation decided", machine: with(m, unhealthy)},
		{name: "certificates expire soon", machine: with(m, expiring),
			cause: "its certificates expire soon (KubeadmControlPlane spec.rollout.before.certificatesExpiryDays)"},
		{name: "out of date after an edit", machine: with(m, otherwise)},
		{name: "healthy and up to date", machine: m},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := status.EvaluateStatus(statusMD(2, 1, 1, 1, false), []clusterv1.Machine{tc.machine}, nil)
			assert.Equal(t, tc.cause, s.Machines[0].Cause)
			if tc.cause != "" {
				assert.Contains(t, s.Machines[0].Line(), "; replaced because "+tc.cause)
			} else {
				assert.NotContains(t, s.Machines[0].Line(), "replaced because")
			}
		})
	}
}
