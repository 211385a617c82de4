package rollouts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The scenarios of `rollout status` below run the CLI against the real
// Cluster API controllers of the sandbox; each starts and ends with the
// demo ready.

// background is a `rollout` command running concurrently with the test.
type background struct{ *sandbox.CLI }

// startRollout runs the rollout CLI in-process in the background, as
// runRollout does; wait returns its result.
func startRollout(t *testing.T, args ...string) *background {
	t.Helper()
	b := &background{sb.StartCLI(t.TempDir(), demo.Namespace, args...)}
	t.Cleanup(func() {
		// Tests wait for every command they start; this only keeps a
		// failed test from leaking one into the next.
		select {
		case <-b.Done():
		case <-time.After(rolloutTimeout):
		}
	})
	return b
}

// wait returns the command's result, failing the test if it runs longer
// than limit (the command's own --timeout is shorter: this is a backstop).
func (b *background) wait(t *testing.T, what string, limit time.Duration) sandbox.CLIRun {
	t.Helper()
	select {
	case r := <-b.Done():
		b.Done() <- r // Cleanup reads it again.
		t.Logf("%s (%s)\n--- exit %d\n--- stdout\n%s--- stderr\n%s", what, r.Took.Round(100*time.Millisecond), r.Code, r.Stdout, r.Stderr)
		return r
	case <-time.After(limit):
		require.FailNowf(t, "command did not return", "%s still running after %s; stdout so far:\n%s", what, limit, b.Stdout.String())
		return sandbox.CLIRun{}
	}
}

// revisionOf reads the guard's revision stamp of obj.
func revisionOf(t *testing.T, obj client.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(obj.GetAnnotations()[revisions.AnnotationRevision], 10, 64)
	require.NoError(t, err, "the guard stamped no revision on %s", obj.GetName())
	return n
}

// requireAllNew checks, right after a status command returned 0, that the
// machines matching labels are exactly want of them, none of them in old,
// all ready, up to date and not being deleted.
func requireAllNew(t *testing.T, labels client.MatchingLabels, old map[string]*clusterv1.Machine, want int) {
	t.Helper()
	current := machines(t, labels)
	assert.Len(t, current, want, "machines when status returned: %v", names(current))
	for name, m := range current {
		_, isOld := old[name]
		assert.False(t, isOld, "old machine %s still exists when status returned", name)
		assert.True(t, m.DeletionTimestamp.IsZero(), "machine %s is being deleted", name)
		assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition), "machine %s not ready", name)
		assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition), "machine %s not up to date", name)
	}
}

// TestStatusWaitsForControlPlaneRestart restarts the control plane with
// `rollout restart` and follows it with `rollout status kcp/...`: exit 0
// only once every old control-plane machine is gone, by name.
func TestStatusWaitsForControlPlaneRestart(t *testing.T) {
	requireClusterReady(t)
	old := machines(t, controlPlaneLabels())
	require.Len(t, old, controlPlaneMachines)
	name := "kcp/" + demo.ControlPlaneName()

	begin := time.Now()
	require.Equal(t, 0, runRollout(t, "restart", name, "--yes").Code, "rollout restart")
	r := runRollout(t, "status", name, "--timeout", "3m")
	require.Equal(t, 0, r.Code, "exit code; stderr:\n%s", r.Stderr)
	requireAllNew(t, controlPlaneLabels(), old, controlPlaneMachines)
	recordTiming(fmt.Sprintf("rollout status kcp: restart, %d machine replaced, exit 0", controlPlaneMachines), time.Since(begin))

	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: demo.Namespace, Name: demo.ControlPlaneName()}, kcp))
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	assert.Equal(t, fmt.Sprintf("kubeadmcontrolplane/%s successfully rolled out (revision %d)", kcp.Name, revisionOf(t, kcp)), lines[len(lines)-1], "last line")
	assert.Contains(t, r.Stdout, "old machine pending deletion", "the old machine was seen and reported")
	requireClusterReady(t)
}

// TestStatusPausedMidRolloutThenResumed switches the worker pool's template
// while `rollout status --revision N` waits for that change's revision;
// once a new machine exists the pool is paused: status exits 4. Resumed, the
// rollout completes and status for revision N exits 0 with every old machine
// gone; status for the revision before it then exits 5.
func TestStatusPausedMidRolloutThenResumed(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	old := machines(t, workerLabels())
	require.Len(t, old, workerMachines)
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
	name := "md/" + key.Name
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, key, md))
	prev := revisionOf(t, md)
	want := prev + 1

	// status for a revision not live yet waits for it.
	waiting := startRollout(t, "status", name, "--revision", strconv.FormatInt(want, 10), "--timeout", "3m")
	framework.WaitFor(t, rolloutTimeout, pollInterval, "status to wait for revision "+strconv.FormatInt(want, 10), func() (bool, string) {
		out := waiting.Stdout.String()
		return strings.Contains(out, fmt.Sprintf("waiting for revision %d (revision %d is live)", want, prev)), out
	})

	resumed := false
	defer func() {
		if !resumed {
			runRollout(t, "resume", name)
		}
	}()
	switchWorkerTemplate(t, md, otherWorkerTemplate(md))
	require.Equal(t, want, revisionOf(t, md), "the template switch's revision")
	framework.WaitFor(t, rolloutTimeout, pollInterval, "a new worker machine", func() (bool, string) {
		current := machines(t, workerLabels())
		for n := range current {
			if _, isOld := old[n]; !isOld {
				return true, ""
			}
		}
		return false, fmt.Sprintf("worker machines %v", names(current))
	})
	require.Equal(t, 0, runRollout(t, "pause", name).Code, "rollout pause")
	r := waiting.wait(t, "status --revision while paused", rolloutTimeout)
	assert.Equal(t, rollout.ExitPaused, r.Code, "exit code once paused mid-rollout")
	assert.Contains(t, r.Stderr, "machinedeployment/"+key.Name+" is paused (spec.paused is true): it will not roll out until resumed")
	assert.Contains(t, r.Stdout, "old machine", "status saw the rollout under way before the pause")

	require.Equal(t, 0, runRollout(t, "resume", name).Code, "rollout resume")
	resumed = true
	r = runRollout(t, "status", name, "--revision", strconv.FormatInt(want, 10), "--timeout", "3m")
	require.Equal(t, 0, r.Code, "exit code after resume; stderr:\n%s", r.Stderr)
	requireAllNew(t, workerLabels(), old, workerMachines)
	assert.True(t, strings.HasSuffix(r.Stdout, fmt.Sprintf("machinedeployment/%s successfully rolled out (revision %d)\n", key.Name, want)), "last line")

	// The object is past the revision before: documented error, exit 5.
	r = runRollout(t, "status", name, "--revision", strconv.FormatInt(prev, 10))
	assert.Equal(t, rollout.ExitSuperseded, r.Code, "exit code for a past revision")
	assert.Contains(t, r.Stderr, fmt.Sprintf("error: machinedeployment/%s is at revision %d, past the desired revision %d", key.Name, want, prev))
	requireClusterReady(t)
}

// TestStatusStalledOnMachinesThatNeverStart switches the worker pool to a
// template whose machines take an hour to start: with --progress-deadline
// 20s, status exits 3 naming the new machine and the condition that holds
// it. `rollout undo` then brings the pool back.
func TestStatusStalledOnMachinesThatNeverStart(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	old := machines(t, workerLabels())
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
	name := "md/" + key.Name
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, key, md))

	// A copy of the pool's template whose simulated VM starts in an hour.
	current := &infrav1.DevMachineTemplate{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, current))
	stuck := &infrav1.DevMachineTemplate{}
	stuck.Namespace, stuck.Name, stuck.Labels = demo.Namespace, key.Name+"-never-ready", current.Labels
	stuck.Spec = *current.Spec.DeepCopy()
	stuck.Spec.Template.Spec.Backend.InMemory.VM.Provisioning.StartupDuration = metav1.Duration{Duration: time.Hour}
	require.NoError(t, client.IgnoreAlreadyExists(sb.Client.Create(ctx, stuck)))

	undone := false
	defer func() {
		if !undone {
			runRollout(t, "undo", name)
		}
	}()
	switchWorkerTemplate(t, md, stuck.Name)
	r := runRollout(t, "status", name, "--progress-deadline", "20s", "--timeout", "2m")
	require.Equal(t, rollout.ExitStalled, r.Code, "exit code; stderr:\n%s", r.Stderr)
	assert.Contains(t, r.Stderr, "error: machinedeployment/"+key.Name+" made no progress for 20s (--progress-deadline); blocked by:")
	var stuckMachines []string
	for n := range machines(t, workerLabels()) {
		if _, isOld := old[n]; !isOld {
			stuckMachines = append(stuckMachines, n)
		}
	}
	require.NotEmpty(t, stuckMachines, "no machine from the never-ready template")
	for _, n := range stuckMachines {
		// The machine's Ready condition says the infrastructure is not
		// provisioned yet.
		assert.Regexp(t, `machine `+n+`: \w+, not ready: NotReady: .*InfrastructureReady`, r.Stderr, "the stuck machine and its condition")
	}

	require.Equal(t, 0, runRollout(t, "undo", name).Code, "rollout undo")
	undone = true
	r = runRollout(t, "status", name, "--timeout", "3m")
	require.Equal(t, 0, r.Code, "exit code after undo; stderr:\n%s", r.Stderr)
	current2 := machines(t, workerLabels())
	for _, n := range stuckMachines {
		assert.NotContains(t, current2, n, "the stuck machine is gone after the undo")
	}
	requireClusterReady(t)
}

// otherWorkerTemplate is the demo's worker template md does not use.
func otherWorkerTemplate(md *clusterv1.MachineDeployment) string {
	if md.Spec.Template.Spec.InfrastructureRef.Name == demo.SpareWorkerTemplate() {
		return demo.MachineDeploymentName()
	}
	return demo.SpareWorkerTemplate()
}

// switchWorkerTemplate points md at the DevMachineTemplate template, with
// its version brought to the control plane's (Cluster API's MachineSet
// preflight checks hold back workers whose minor differs from it); md is
// updated with the result.
func switchWorkerTemplate(t *testing.T, md *clusterv1.MachineDeployment, template string) {
	t.Helper()
	ctx := context.Background()
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: demo.ControlPlaneName()}, kcp))
	base := md.DeepCopy()
	md.Spec.Template.Spec.InfrastructureRef.Name = template
	md.Spec.Template.Spec.Version = kcp.Spec.Version
	require.NoError(t, framework.UserClient(t, sb, "dave@example.com").Patch(ctx, md, client.MergeFrom(base)))
}
