package rollouts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// runRollout runs the rollout CLI in-process against the sandbox, as the
// admin, and returns its exit code and output.
func runRollout(t *testing.T, args ...string) sandbox.CLIRun {
	t.Helper()
	r := sb.RunCLI(t.TempDir(), demo.Namespace, args...)
	t.Logf("rollout %s (%s)\n--- exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), r.Took.Round(100*time.Millisecond), r.Code, r.Stdout, r.Stderr)
	return r
}

// TestStatusWaitsForMachineDeploymentRollout rolls the worker pool (a
// restart, with the workers' version brought to the control plane's, which
// the earlier upgrade moved on) and runs `rollout status` concurrently: it
// must print its progress and exit 0 only once every old machine is gone
// and every new one ready and up to date.
func TestStatusWaitsForMachineDeploymentRollout(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	old := machines(t, workerLabels())
	require.Len(t, old, workerMachines)

	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: demo.ControlPlaneName()}, kcp))
	md := &clusterv1.MachineDeployment{}
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
	require.NoError(t, sb.Client.Get(ctx, key, md))
	base := md.DeepCopy()
	// Cluster API's MachineSet preflight checks hold back workers whose
	// minor differs from the control plane's: roll to its version.
	md.Spec.Template.Spec.Version = kcp.Spec.Version
	md.Spec.Rollout.After = metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	begin := time.Now()
	require.NoError(t, framework.UserClient(t, sb, "carol@example.com").Patch(ctx, md, client.MergeFrom(base)))

	r := runRollout(t, "status", "md/"+md.Name, "--timeout", "3m")
	exited := time.Now()
	// Right after it returned: the cluster must already be rolled out.
	current := machines(t, workerLabels())
	require.Equal(t, 0, r.Code, "exit code; stderr:\n%s", r.Stderr)
	assert.Len(t, current, workerMachines, "machines when status returned: %v", names(current))
	for name, m := range current {
		_, isOld := old[name]
		assert.False(t, isOld, "old machine %s still exists when status returned", name)
		assert.True(t, m.DeletionTimestamp.IsZero(), "machine %s is being deleted", name)
		assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition), "machine %s not ready", name)
		assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition), "machine %s not up to date", name)
		assert.Equal(t, kcp.Spec.Version, m.Spec.Version, "machine %s version", name)
	}

	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 3, "progress lines, then the verdict")
	prefix := "machinedeployment/" + md.Name
	fresh := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, key, fresh))
	assert.Equal(t, prefix+" successfully rolled out (revision "+fresh.Annotations[revisions.AnnotationRevision]+")", lines[len(lines)-1], "last line")
	progress := 0
	for i, l := range lines {
		if strings.HasPrefix(l, prefix+": ") && strings.Contains(l, "machines up to date") {
			progress++
		}
		if i > 0 {
			assert.NotEqual(t, lines[i-1], l, "line %d repeated", i)
		}
	}
	assert.GreaterOrEqual(t, progress, 2, "progress lines")
	took := exited.Sub(begin)
	recordTiming(fmt.Sprintf("rollout status md: restart, %d machines replaced, exit 0", workerMachines), took)

	// A finished rollout: one report, exit 0, and the same as JSON.
	r = runRollout(t, "status", "md/"+md.Name, "--watch=false")
	assert.Equal(t, 0, r.Code, "--watch=false on a rolled out MachineDeployment")
	assert.Contains(t, r.Stdout, prefix+": 2 of 2 machines up to date, 2 available")
	r = runRollout(t, "status", "md/"+md.Name, "--watch=false", "-o", "json")
	require.Equal(t, 0, r.Code)
	var event struct {
		Object   string `json:"object"`
		Phase    string `json:"phase"`
		Replicas int32  `json:"replicas"`
		UpToDate int32  `json:"upToDate"`
		Done     bool   `json:"done"`
		Machines []struct {
			Name  string `json:"name"`
			Ready bool   `json:"ready"`
		} `json:"machines"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &event), r.Stdout)
	assert.Equal(t, prefix, event.Object)
	assert.Equal(t, "RolledOut", event.Phase)
	assert.True(t, event.Done)
	assert.Len(t, event.Machines, workerMachines)

	// The whole cluster, in order: control plane, then worker pool.
	r = runRollout(t, "status", "cluster/"+demo.Name, "--grace", "1s", "--timeout", "1m")
	require.Equal(t, 0, r.Code, "status cluster/%s; stderr:\n%s", demo.Name, r.Stderr)
	cp := strings.Index(r.Stdout, "kubeadmcontrolplane/"+demo.ControlPlaneName()+" successfully rolled out")
	workers := strings.Index(r.Stdout, prefix+" successfully rolled out")
	assert.True(t, cp >= 0 && workers > cp, "control plane, then workers:\n%s", r.Stdout)

	// --timeout shorter than a --grace the user asked for: exit 2.
	r = runRollout(t, "status", "md/"+md.Name, "--grace", "1m", "--timeout", "2s")
	assert.Equal(t, rollout.ExitTimeout, r.Code, "exit code on --timeout")
	assert.Contains(t, r.Stderr, "error: timed out waiting for machinedeployment/"+md.Name+" to roll out (--timeout 2s)")
	requireClusterReady(t)
}

// TestStatusReportsPausedMachineDeployment: status on a paused worker pool
// exits 4 at once instead of waiting forever: on its first look, before
// its --timeout (exit 2), with one report printed.
func TestStatusReportsPausedMachineDeployment(t *testing.T) {
	requireClusterReady(t)
	name := "md/" + demo.MachineDeploymentName()
	require.Equal(t, 0, runRollout(t, "pause", name).Code)
	defer func() {
		require.Equal(t, 0, runRollout(t, "resume", name).Code)
		requireClusterReady(t)
	}()
	r := runRollout(t, "status", name, "--timeout", "1m")
	assert.Equal(t, rollout.ExitPaused, r.Code, "exit code")
	assert.Contains(t, r.Stderr, "is paused (spec.paused is true)")
	// Every look status takes at an object that is not done prints one
	// event (-o json prints every one): a single event is the verdict of
	// the first look.
	r = runRollout(t, "status", name, "--timeout", "1m", "-o", "json")
	assert.Equal(t, rollout.ExitPaused, r.Code, "exit code with -o json")
	var phases []string
	for dec := json.NewDecoder(strings.NewReader(r.Stdout)); dec.More(); {
		var event struct {
			Phase string `json:"phase"`
		}
		require.NoError(t, dec.Decode(&event), r.Stdout)
		phases = append(phases, event.Phase)
	}
	assert.Equal(t, []string{"Paused"}, phases, "status printed one event, of its first look:\n%s", r.Stdout)
}
