package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// A MachineDeployment with the OnDelete strategy whose controller has done
// all it does by itself waits for its old machines to be deleted: status
// names them and gives its own verdict at once, not a stall. While the
// controller still has something to do, or with RollingUpdate, it does not.
func TestStatusOfAnOnDeleteMachineDeployment(t *testing.T) {
	withOwnerSet := func(ms []clusterv1.Machine, set string) []clusterv1.Machine {
		for i := range ms {
			ms[i].OwnerReferences[0].Name = set
			ms[i].Name = set + "-" + ms[i].Name
		}
		return ms
	}
	old := func(n int) []clusterv1.Machine { return withOwnerSet(goodMachines(n), "md-0-old") }
	fresh := func(n int) []clusterv1.Machine { return withOwnerSet(goodMachines(n), newSetName) }
	notReady := statusMachine("m-x", false, true, false, "Provisioning", "")
	deleting := old(1)[0]
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	cases := []struct {
		name     string
		strategy clusterv1.MachineDeploymentRolloutStrategyType
		observed int64
		machines []clusterv1.Machine
		sets     []clusterv1.MachineSet
		want     []string // the old machines waited for; nil: no OnDelete verdict
		summary  string
	}{
		{name: "template switched, no machine deleted yet: waiting for 3", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: old(3), sets: []clusterv1.MachineSet{machineSet(newSetName, "2", 0, 0), machineSet("md-0-old", "1", 3, 3)},
			want:    []string{"md-0-old-m-0", "md-0-old-m-1", "md-0-old-m-2"},
			summary: "waiting for 3 old machines to be deleted (OnDelete strategy); 0 of 3 machines replaced"},
		{name: "two deleted and replaced: waiting for 1", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: append(fresh(2), old(1)...), sets: []clusterv1.MachineSet{machineSet(newSetName, "2", 2, 2), machineSet("md-0-old", "1", 1, 1)},
			want:    []string{"md-0-old-m-0"},
			summary: "waiting for 1 old machine to be deleted (OnDelete strategy); 2 of 3 machines replaced"},
		{name: "a machine being deleted: progressing", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: append(old(2), deleting), sets: []clusterv1.MachineSet{machineSet(newSetName, "2", 0, 0), machineSet("md-0-old", "1", 3, 3)}},
		{name: "a replacement not ready yet: progressing", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: append(old(2), notReady), sets: []clusterv1.MachineSet{machineSet(newSetName, "2", 1, 1), machineSet("md-0-old", "1", 2, 2)}},
		{name: "a deleted machine not replaced yet: progressing", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: old(2), sets: []clusterv1.MachineSet{machineSet(newSetName, "2", 1, 0), machineSet("md-0-old", "1", 2, 2)}},
		{name: "the generation not observed yet: progressing", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 1,
			machines: old(3), sets: []clusterv1.MachineSet{machineSet("md-0-old", "1", 3, 3)}},
		{name: "the new MachineSet not seen yet: progressing", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: old(3), sets: []clusterv1.MachineSet{machineSet("md-0-old", "1", 3, 3)}},
		{name: "every old machine replaced: rolled out", strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, observed: 2,
			machines: fresh(3), sets: settled()},
		{name: "RollingUpdate with the same machines: progressing", strategy: clusterv1.RollingUpdateMachineDeploymentStrategyType, observed: 2,
			machines: old(3), sets: []clusterv1.MachineSet{machineSet(newSetName, "2", 0, 0), machineSet("md-0-old", "1", 3, 3)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			upToDate := int32(0)
			for _, m := range tc.machines {
				if m.OwnerReferences[0].Name == newSetName && m.DeletionTimestamp == nil {
					upToDate++
				}
			}
			md := statusMD(tc.observed, int32(len(tc.machines)), upToDate, 3, false)
			md.Spec.Rollout.Strategy.Type = tc.strategy
			s := status.EvaluateStatus(md, tc.machines, tc.sets)
			assert.Equal(t, tc.want, s.OldToDelete)
			tr := &status.StatusTracker{ProgressDeadline: 10 * time.Minute}
			verdict := tr.Observe(s, time.Unix(100, 0))
			if tc.want == nil {
				assert.NotEqual(t, status.PhaseWaitingForDeletion, verdict.Phase)
				assert.NotContains(t, s.Summary(), "OnDelete")
				return
			}
			assert.Equal(t, status.PhaseWaitingForDeletion, verdict.Phase, "a verdict at once, not after the progress deadline")
			assert.True(t, verdict.Wake.IsZero(), "the verdict is final")
			assert.Equal(t, tc.summary, s.Summary())
		})
	}
}
