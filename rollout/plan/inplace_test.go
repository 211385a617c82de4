package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// With a Runtime Extension registered for in-place updates, a machine
// replaced for its content is "updated in place if the extension accepts,
// otherwise replaced"; one replaced for a restart, or untouched, is not;
// without an extension nothing changes. --fail-on-replace says what it
// cannot promise.
func TestInPlaceIfAccepted(t *testing.T) {
	const handler = "can-update-machine.test-extension"
	live := planKCP("v1.34.3")
	ms := []clusterv1.Machine{
		planMachine("cp-a", "", "c1-control-plane", "v1.34.3", time.Hour),
		planMachine("cp-b", "", "c1-control-plane", "v1.35.2", time.Minute),
	}
	bump := planKCP("v1.35.2")
	cases := []struct {
		name      string
		planned   func() machineChange
		handlers  string
		wantByWho map[string]string // machine → InPlaceIfAccepted
	}{
		{name: "a version bump, an extension registered", handlers: handler,
			planned:   func() machineChange { return kcpChange(t, live, bump) },
			wantByWho: map[string]string{"cp-a": handler, "cp-b": ""}},
		{name: "a version bump, no extension", handlers: "",
			planned:   func() machineChange { return kcpChange(t, live, bump) },
			wantByWho: map[string]string{"cp-a": "", "cp-b": ""}},
		{name: "a restart, an extension registered: replaced", handlers: handler,
			planned: func() machineChange {
				ch := kcpChange(t, live, live)
				ch.restartAt = planEpoch
				return ch
			},
			wantByWho: map[string]string{"cp-a": "", "cp-b": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := tc.planned()
			ch.inPlaceIfAccepted = tc.handlers
			got := planControlPlaneMachines(bump, ch, ms)
			for _, m := range got {
				assert.Equal(t, tc.wantByWho[m.Name], m.InPlaceIfAccepted, m.Name)
			}
		})
	}

	md := planMD("v1.35.2", "md-0")
	assert.Equal(t, hookCanUpdateMachineSet, inPlaceHook(md))
	md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	assert.Empty(t, inPlaceHook(md), "an OnDelete pool is never updated in place")
	assert.Equal(t, hookCanUpdateMachine, inPlaceHook(bump))

	op := v1alpha1.ObjectPlan{Object: v1alpha1.PlanObjectRef{Kind: "KubeadmControlPlane", Name: "c1-control-plane"}, Verdict: v1alpha1.PlanVerdict{Admitted: true},
		Machines: []v1alpha1.PlanMachine{
			{Name: "cp-a", Action: v1alpha1.ActionReplace, InPlaceIfAccepted: handler},
			{Name: "cp-b", Action: v1alpha1.ActionReplace},
		}}
	op.Counts = countMachines(op.Machines)
	err := planVerdictError(newRolloutPlan("c", []v1alpha1.ObjectPlan{op}), true)
	assert.Equal(t, ExitWouldReplace, core.ExitCode(err))
	assert.EqualError(t, err, "the change would replace 2 machines (--fail-on-replace); 1 of them Cluster API first offers for an in-place update to "+handler+
		" (with its InPlaceUpdates feature gate): whether it accepts is known only when Cluster API asks, so plan cannot promise that none is replaced; nothing was changed")
	assert.Equal(t, "updated in place if one of the extensions a.x, b.y accepts (Cluster API's InPlaceUpdates), otherwise replaced", inPlaceText("a.x, b.y"))
}
