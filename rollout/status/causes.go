package status

import (
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// Not every replacement is caused by an edit. Cluster API also replaces a
// machine that a MachineHealthCheck found unhealthy and has its owner
// remediate (its HealthCheckSucceeded condition False, OwnerRemediated
// present), and a control-plane machine whose
// certificates expire within the KubeadmControlPlane's
// spec.rollout.before.certificatesExpiryDays (its UpToDate condition then
// says "Certificates will expire soon"). status names such a cause on the
// machine, instead of leaving it an unexplained old machine.

// certificatesExpiring is the message of the UpToDate condition that the
// KubeadmControlPlane controller writes on a machine it replaces because
// its certificates expire soon.
const certificatesExpiring = "Certificates will expire soon"

// causeOf is why m is replaced when no edit caused it, "" otherwise.
func causeOf(m *clusterv1.Machine) string {
	// OwnerRemediated is present only once a MachineHealthCheck decided
	// that the machine's owner remediates it.
	if hc := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition); hc != nil && hc.Status == metav1.ConditionFalse &&
		apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition) != nil {
		why := strings.TrimSuffix(hc.Reason+": "+core.ConditionLine(hc.Message), ": ")
		return "remediated: a MachineHealthCheck found it unhealthy (" + why + ")"
	}
	if up := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition); up != nil && up.Status == metav1.ConditionFalse &&
		strings.Contains(up.Message, certificatesExpiring) {
		return "its certificates expire soon (KubeadmControlPlane spec.rollout.before.certificatesExpiryDays)"
	}
	return ""
}
