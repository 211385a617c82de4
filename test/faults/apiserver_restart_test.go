package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// apiServerDown is how long kube-apiserver stays stopped in these tests:
// longer than a watch's reconnect backoff starts, shorter than anyone's timeout.
const apiServerDown = 5 * time.Second

// TestAPIServerRestartDuringStatus restarts the worker pool and, while
// `rollout status` watches it and the first new machine is on its way,
// stops kube-apiserver for a few seconds and starts it again (same port,
// same etcd). status must ride through — its watch resumes — and exit 0
// only once the rollout is really done: every old machine gone and every
// new one ready.
func TestAPIServerRestartDuringStatus(t *testing.T) {
	requireClusterReady(t)
	old := workerList(t)
	md := getMD(t)

	r := runRollout(t, "restart", "md/"+md.Name)
	require.Equal(t, 0, r.Code, "restart; stderr:\n%s", r.Stderr)

	statusDone := make(chan sandbox.CLIRun, 1)
	go func() { statusDone <- runRollout(t, "status", "md/"+md.Name, "--timeout", "3m") }()

	framework.WaitFor(t, readyTimeout, pollInterval, "the first new worker", func() (bool, string) {
		current := workerList(t)
		for name := range current {
			if _, isOld := old[name]; !isOld {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d machines, all old", len(current))
	})
	restarted, err := sb.Env.RestartAPIServer(context.Background(), framework.APIServerRestart{Down: apiServerDown})
	require.NoError(t, err)
	t.Logf("kube-apiserver restarted: %+v", restarted)

	var status sandbox.CLIRun
	select {
	case status = <-statusDone:
	case <-time.After(4 * time.Minute):
		require.FailNow(t, "rollout status did not return")
	}
	// Right after status returned: the rollout must be done.
	current := workerList(t)
	require.Equal(t, 0, status.Code, "status exit code; stdout:\n%s\nstderr:\n%s", status.Stdout, status.Stderr)
	assert.Len(t, current, workerMachines, "machines when status returned: %v", current)
	for name, m := range current {
		_, isOld := old[name]
		assert.False(t, isOld, "old machine %s still exists when status returned", name)
		assert.True(t, sandbox.MachineReady(m), "machine %s not ready when status returned", name)
	}
	fresh := getMD(t)
	lines := strings.Split(strings.TrimSuffix(status.Stdout, "\n"), "\n")
	assert.Equal(t, "machinedeployment/"+md.Name+" successfully rolled out (revision "+fresh.Annotations[revisions.AnnotationRevision]+")", lines[len(lines)-1])
	recordFigure("kube-apiserver restarted during rollout status: %s; status exit %d after %s",
		describeRestart(restarted), status.Code, status.Took.Round(100*time.Millisecond))
	requireClusterReady(t)
}

// TestAPIServerRestartGuardCaches restarts kube-apiserver, then creates a
// fact the guard can only know from its caches after the restart — a
// second worker pool three minors behind the control plane — and checks
// that the guard refuses (server-side dry run) a control-plane upgrade that
// is safe without that pool and unsafe with it.
func TestAPIServerRestartGuardCaches(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	kcp := getKCP(t)
	upgrade := func() error {
		fresh := getKCP(t)
		fresh.Spec.Version = "v1.36.0"
		return sb.Client.Update(ctx, fresh, client.DryRunAll)
	}
	require.Equal(t, "v1.35.2", kcp.Spec.Version, "the test assumes the demo's version")
	require.NoError(t, upgrade(), "the upgrade must be safe before the old pool exists")

	restarted, err := sb.Env.RestartAPIServer(ctx, framework.APIServerRestart{Down: apiServerDown})
	require.NoError(t, err)
	restartedAt := time.Now()
	t.Logf("kube-apiserver restarted: %+v", restarted)

	base := getMD(t)
	oldPool := builder.MachineDeployment(demo.Namespace, demo.Name+"-md-old").WithSpecOf(base).
		WithLabels(map[string]string{clusterv1.ClusterNameLabel: demo.Name}).WithReplicas(0).
		WithSelector(map[string]string{"faults.rollout-guard.io/pool": "old"}).
		WithTemplateLabels(map[string]string{clusterv1.ClusterNameLabel: demo.Name}).WithVersion("v1.32.0").Build()
	// The guard's and the controllers' clients reconnect on their own; the
	// test's may need a moment too.
	framework.WaitFor(t, 30*time.Second, pollInterval, "creating the old pool", func() (bool, string) {
		err := sb.Client.Create(ctx, oldPool)
		return err == nil, fmt.Sprint(err)
	})
	createdAt := time.Now()
	t.Cleanup(func() {
		if err := sb.Client.Delete(context.Background(), oldPool); err != nil {
			t.Errorf("deleting the old pool: %v", err)
		}
	})

	// client-go's reflectors retry a failed watch with a backoff of up to
	// 30 s, jittered up to twice that, so the guard's caches may miss the
	// old pool for about a minute; the guard knows its watches are down and
	// judges from live reads until they are back (webhooks.Watches). The
	// refusal must come at once: the 10 s bound only absorbs a busy
	// machine, far below the reflectors' backoff.
	var last error
	framework.WaitFor(t, 10*time.Second, pollInterval, "the guard to see the old pool", func() (bool, string) {
		last = upgrade()
		return last != nil && strings.Contains(last.Error(), "MachineDeployment "+oldPool.Name), fmt.Sprint(last)
	})
	t.Logf("refused after the restart: %v", last)
	assert.Contains(t, last.Error(), "[rule ControlPlaneLeavesWorkerTooOld]")
	recordFigure("kube-apiserver restarted under the guard: %s; a pool created %s after it was ready made the guard refuse an upgrade %s after its creation",
		describeRestart(restarted), createdAt.Sub(restartedAt).Round(100*time.Millisecond), time.Since(createdAt).Round(100*time.Millisecond))
}

// describeRestart renders a restart for the figures.
func describeRestart(r framework.APIServerRestarted) string {
	how := "stopped on SIGTERM"
	if r.Killed {
		how = "killed (SIGTERM grace ran out)"
	}
	return fmt.Sprintf("%s after %s, down %s, ready %s after its start", how, r.Stopped.Round(100*time.Millisecond), apiServerDown, r.Ready.Round(100*time.Millisecond))
}
