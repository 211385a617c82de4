package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// A machine Cluster API updates in place is neither old nor done: status
// says it is updating, with the update's reason, until the update is over
// and the machine up to date; then the rollout is complete with the same
// machines.
func TestStatusFollowsInPlaceUpdates(t *testing.T) {
	marked := func(m clusterv1.Machine) clusterv1.Machine {
		m.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
		return m
	}
	updating := func(m clusterv1.Machine, reason, message string) clusterv1.Machine {
		m = marked(m)
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineUpdatingCondition, Status: metav1.ConditionTrue, Reason: reason, Message: message})
		return m
	}
	notUpToDate := func(m clusterv1.Machine) clusterv1.Machine {
		for i := range m.Status.Conditions {
			if m.Status.Conditions[i].Type == clusterv1.MachineUpToDateCondition {
				m.Status.Conditions[i].Status = metav1.ConditionFalse
			}
		}
		return m
	}
	good := goodMachines(3)
	cases := []struct {
		name       string
		machines   []clusterv1.Machine
		complete   bool
		summary    string
		line       string // the line of m-0
		wantUpdate bool
	}{
		{name: "the update has begun (annotation only)", machines: []clusterv1.Machine{notUpToDate(marked(good[0])), good[1], good[2]},
			summary: "3 of 3 machines up to date, 3 available (1 machine updating in place)", wantUpdate: true,
			line: "machine m-0: Running, updating in place: UpdateInProgress: the in-place update has begun"},
		{name: "the extension reports progress", machines: []clusterv1.Machine{notUpToDate(updating(good[0], "InPlaceUpdating", "running kubeadm upgrade")), good[1], good[2]},
			summary: "3 of 3 machines up to date, 3 available (1 machine updating in place)", wantUpdate: true,
			line: "machine m-0: Running, updating in place: InPlaceUpdating: running kubeadm upgrade"},
		{name: "updated, the same machines up to date: complete", machines: goodMachines(3), complete: true,
			summary: "3 of 3 machines up to date, 3 available"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), tc.machines, settled())
			assert.Equal(t, tc.complete, s.Complete)
			assert.Equal(t, tc.summary, s.Summary())
			assert.Equal(t, tc.wantUpdate, s.Machines[0].Updating)
			assert.False(t, s.Machines[0].Old, "a machine updated in place is not old")
			if tc.line != "" {
				assert.Equal(t, tc.line, s.Machines[0].Line())
			}
		})
	}
}
