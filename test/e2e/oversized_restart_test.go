package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// guardMemoryLimit is the memory limit of the guard's container in
// config/manager/manager.yaml.
const guardMemoryLimit = 384 << 20

// TestAGuardRestartedAfterOversizedCausesStaysUnderItsLimit: the
// oversized-cause attack on 100 worker pools of a paused Cluster (where
// recording waits) — two edits each with a 240 KB change-cause, plus, per
// pool, a record an earlier release kept with such a cause whole — then a
// restart: the guard starts, fills its revision index and serves, its
// peak resident memory (VmHWM) under the limit of its Deployment.
func TestAGuardRestartedAfterOversizedCausesStaysUnderItsLimit(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	paused := w.Cluster.DeepCopy()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(paused), paused))
	patch := client.MergeFrom(paused.DeepCopy())
	paused.Spec.Paused = ptr.To(true)
	require.NoError(t, env.Client.Patch(ctx, paused, patch))

	cause := strings.Repeat("c", 240_000)
	const pools = 100
	for i := range pools {
		md := builder.MachineDeployment(w.Namespace, fmt.Sprintf("c1-md-big-%d", i)).WithSpecOf(w.MD).
			WithLabels(map[string]string{clusterv1.ClusterNameLabel: w.Cluster.Name}).Build()
		require.NoError(t, env.Client.Create(ctx, md))
		for _, v := range []string{"v1.34.1", "v1.34.0"} {
			body, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"annotations": map[string]string{revisions.AnnotationChangeCause: v + cause}},
				"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"version": v}}},
			})
			require.NoError(t, err)
			require.NoError(t, env.Client.Patch(ctx, md, client.RawPatch(types.MergePatchType, body)))
		}
		// A record an earlier release kept whole.
		old := md.DeepCopy()
		old.Spec.Template.Spec.Version = "v1.33.0"
		snap, err := kinds.MachineDeployment.Snapshot(old)
		require.NoError(t, err)
		cr := revisions.RolloutRevision(md, kinds.MachineDeployment.GVK, snap, revisions.Record{Revision: 1000, ChangedBy: "alice"})
		cr.Annotations[revisions.AnnotationChangeCause] = cause
		require.NoError(t, env.Client.Create(ctx, cr))
	}

	require.NoError(t, env.StopGuard())
	require.NoError(t, env.StartGuard(ctx))
	pid := env.GuardPID()
	require.NotZero(t, pid)
	// The guard serves; a new edit elsewhere is recorded (its reconcilers
	// and index are running). Its peak memory is what the restart took.
	w2 := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	waitLiveRecorded(t, w2.MD, kinds.MachineDeployment)
	require.NoError(t, edit(t, mergePatch, w2.MD, "v1.34.1", mdVersion...))
	hwm := vmHWM(t, pid)
	t.Logf("guard VmHWM after a restart on %d pools with 240 KB change-causes: %d KiB (limit %d KiB)", pools, hwm>>10, guardMemoryLimit>>10)
	assert.Less(t, hwm, int64(guardMemoryLimit), "peak resident memory of the restarted guard")

	unpause := client.MergeFrom(paused.DeepCopy())
	paused.Spec.Paused = ptr.To(false)
	require.NoError(t, env.Client.Patch(ctx, paused, unpause))
}

// vmHWM reads the peak resident memory of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kib << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
