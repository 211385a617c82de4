package status

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// With Cluster API's InPlaceUpdates, a machine to be rolled out may be
// updated where it runs instead of replaced: its controller marks it with
// clusterv1.UpdateInProgressAnnotation, then the Machine's Updating
// condition is True while the update runs, with the reason and message of
// the extension's progress. Such a machine is neither old (it will not be
// deleted) nor done: status says it is updating, and why, until both are
// gone and the machine is up to date.

// updatingInPlace reports whether m is being updated in place, with the
// reason and message of its Updating condition when it has one.
func updatingInPlace(m *clusterv1.Machine) (bool, string, string) {
	_, marked := m.Annotations[clusterv1.UpdateInProgressAnnotation]
	c := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpdatingCondition)
	updating := c != nil && c.Status == metav1.ConditionTrue
	switch {
	case updating:
		return true, c.Reason, core.ConditionLine(c.Message)
	case marked:
		return true, "UpdateInProgress", "the in-place update has begun"
	}
	return false, "", ""
}

// applyInPlace marks ms as updating in place when m is: not old, not done,
// with the update's reason.
func applyInPlace(m *clusterv1.Machine, ms *MachineStatus) {
	updating, reason, message := updatingInPlace(m)
	if !updating || ms.Deleting {
		return
	}
	ms.Updating, ms.Old = true, false
	ms.Reason, ms.Message = reason, message
}
