package rollouts

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// machineWebhooks are the guard's webhooks of MachineSets and Machines.
var machineWebhooks = []string{
	"validate-create.machineset.rollout-guard.io", "validate.machineset.rollout-guard.io",
	"validate-create.machine.rollout-guard.io", "validate.machine.rollout-guard.io",
}

// machineWebhookCalls reads the API server's counts of its calls of the
// guard's MachineSet and Machine webhooks, by webhook name and whether the
// guard refused.
func machineWebhookCalls(t *testing.T) (answered, refused map[string]float64) {
	t.Helper()
	samples, err := framework.APIServerMetrics(context.Background(), sb.Config)
	require.NoError(t, err)
	ours := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for _, name := range machineWebhooks {
			out[name] = m[name]
		}
		return out
	}
	return ours(framework.SumBy(samples, "apiserver_admission_webhook_request_total", map[string]string{"code": "200"}, "name")),
		ours(framework.SumBy(samples, "apiserver_admission_webhook_request_total", map[string]string{"rejected": "true"}, "name"))
}

// TestClusterAPIsOwnMachinesPassTheGuard: what Cluster API's own
// controllers write of MachineSets and Machines passes the guard's
// webhooks of those kinds, which are called: a real rollout (the
// MachineDeployment controller makes a MachineSet, the MachineSet
// controller its Machines, each at the MachineDeployment's version), then
// a worker Machine deleted as a remediation deletes it and made again by
// its MachineSet. The API server counts every call of the guard's
// MachineSet and Machine webhooks as answered and none as refused.
func TestClusterAPIsOwnMachinesPassTheGuard(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	answeredBefore, refusedBefore := machineWebhookCalls(t)

	// A rollout: the pool to its other template.
	old := machines(t, workerLabels())
	require.Len(t, old, workerMachines)
	md := &clusterv1.MachineDeployment{}
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
	require.NoError(t, sb.Client.Get(ctx, key, md))
	to := otherWorkerTemplate(md)
	switchWorkerTemplate(t, md, to)
	progress := func() (sandbox.RolloutState, error) {
		fresh := &clusterv1.MachineDeployment{}
		err := sb.Client.Get(ctx, key, fresh)
		return sandbox.MachineDeploymentState(fresh), err
	}
	waitReplaced(t, replaced{what: "MachineDeployment " + md.Name, labels: workerLabels(), old: old, replicas: workerMachines, check: clonedFrom(to), progress: progress})

	// A remediation: one worker Machine deleted, its MachineSet makes
	// another.
	current := machines(t, workerLabels())
	victim := current[names(current)[0]]
	require.NoError(t, sb.Client.Delete(ctx, victim))
	waitReplaced(t, replaced{what: "MachineDeployment " + md.Name + " after a Machine was deleted", labels: workerLabels(),
		old: map[string]*clusterv1.Machine{victim.Name: victim}, replicas: workerMachines, progress: progress})
	requireClusterReady(t)

	answered, refused := machineWebhookCalls(t)
	delta := func(after, before map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for _, name := range machineWebhooks {
			out[name] = after[name] - before[name]
		}
		return out
	}
	calls, refusals := delta(answered, answeredBefore), delta(refused, refusedBefore)
	t.Logf("the guard's MachineSet and Machine webhooks: answered %v, refused %v", calls, refusals)
	for _, name := range machineWebhooks {
		assert.Zero(t, refusals[name], "%s refused what Cluster API's controllers wrote; see the guard's log", name)
	}
	assert.GreaterOrEqual(t, calls["validate-create.machineset.rollout-guard.io"], 1.0, "the new MachineSet was never judged")
	assert.GreaterOrEqual(t, calls["validate-create.machine.rollout-guard.io"], float64(workerMachines+1),
		"the %d new Machines of the rollout and the remediation's were never judged", workerMachines+1)
	require.NoError(t, sb.Client.Get(ctx, key, md))
	for _, m := range machines(t, workerLabels()) {
		assert.Equal(t, md.Spec.Template.Spec.Version, m.Spec.Version, "Machine %s", m.Name)
	}
}
