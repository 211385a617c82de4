package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestBookkeepingWakesNoHistoryReconcile: the status, label and replicas
// updates Cluster API's controllers and autoscalers make all day wake the
// guard's history reconciler for nothing — it reconciles the
// MachineDeployment once for a template edit made after sixty of them,
// exactly as often as for the same edit alone.
func TestBookkeepingWakesNoHistoryReconcile(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	waitLiveRecorded(t, w.MD, kinds.MachineDeployment)
	token, err := framework.MetricsReaderToken(ctx, env.Client, w.Namespace+"-metrics", time.Hour)
	require.NoError(t, err)
	reconciles := func() float64 {
		t.Helper()
		var samples []framework.Sample
		require.Eventually(t, func() bool {
			samples, err = framework.ScrapeMetrics(ctx, env.GuardMetricsURL(), token)
			return err == nil // the token's binding takes a moment to take effect
		}, 30*time.Second, 200*time.Millisecond)
		// Successful reconciles only: a paused Cluster elsewhere is looked
		// at again now and then (requeue_after).
		return framework.SumBy(samples, "controller_runtime_reconcile_total",
			map[string]string{"controller": "history-machinedeployment", "result": "success"})[""]
	}
	patch := func(subresource bool, body string) {
		t.Helper()
		md := w.MD.DeepCopy()
		p := client.RawPatch("application/merge-patch+json", []byte(body))
		if subresource {
			require.NoError(t, env.Client.Status().Patch(ctx, md, p), body)
			return
		}
		require.NoError(t, env.Client.Patch(ctx, md, p), body)
	}
	marker := 0
	templateEdit := func() {
		t.Helper()
		marker++
		patch(false, fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{"rollout-guard.io/test-marker":"%d"}}}}}`, marker))
		waitLiveRecorded(t, w.MD, kinds.MachineDeployment)
	}

	before := reconciles()
	for i := range 20 {
		patch(true, fmt.Sprintf(`{"status":{"replicas":%d}}`, i))
		patch(false, fmt.Sprintf(`{"metadata":{"labels":{"bookkeeping":"l%d"}}}`, i))
		patch(false, fmt.Sprintf(`{"spec":{"replicas":%d}}`, 3+i%2))
	}
	// The reconcile that records an edit is counted once it has returned,
	// a moment after its record is there: wait for the count to move.
	reconciledSince := func(before float64) float64 {
		t.Helper()
		var n float64
		framework.WaitFor(t, 30*time.Second, 100*time.Millisecond, "a history reconcile of the template edit", func() (bool, string) {
			n = reconciles() - before
			return n > 0, fmt.Sprintf("%v reconciles since", n)
		})
		return n
	}
	// Watch events of an object arrive in order: once the template edit
	// after them is recorded, the guard has seen all sixty.
	templateEdit()
	withBookkeeping := reconciledSince(before)

	before = reconciles()
	templateEdit()
	alone := reconciledSince(before)

	t.Logf("history reconciles of the MachineDeployment: %v after 60 bookkeeping updates and a template edit, %v for a template edit alone", withBookkeeping, alone)
	require.Positive(t, alone, "a template edit wakes the reconciler")
	require.LessOrEqual(t, withBookkeeping, alone+1, "bookkeeping updates woke the history reconciler")
}
