package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestRefusalOfManyWorkersIsShort downgrades a control plane below 50 worker
// Machines in 2 MachineDeployments, through the API server, each way a
// client writes and with kubectl: the refusal names the rule once per pool
// with its count of Machines, so it is 3 lines, not 53. The safe neighbour,
// a patch release, is allowed with the same workers.
func TestRefusalOfManyWorkersIsShort(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.35.2"})
	md1 := w.AddPool(t, "c1-md-1", "v1.35.2")
	w.AddPoolMachines(t, w.MD, 20, "v1.35.2")
	w.AddPoolMachines(t, md1, 30, "v1.35.2")
	require.NoError(t, env.WaitGuardSees(ctx, md1, w.KCP))

	const lines = `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.35.2 to v1.34.3 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)
spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 and 20 of its Machines (c1-md-0-00, c1-md-0-01, c1-md-0-02 and 17 more) run v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment c1-md-0 runs v1.35
spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-1 and 30 of its Machines (c1-md-1-00, c1-md-1-01, c1-md-1-02 and 27 more) run v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment c1-md-1 runs v1.35`
	want := kcpDenied + "[" + strings.ReplaceAll(lines, "\n", ", ") + "]"

	// The guard reads Machines through its cache: wait until it counts all 50.
	downgrade := func() error {
		fresh := w.KCP.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(fresh), fresh); err != nil {
			return err
		}
		fresh.Spec.Version = "v1.34.3"
		return env.Client.Update(ctx, fresh, client.DryRunAll)
	}
	deadline := time.Now().Add(15 * time.Second)
	for err := downgrade(); err == nil || err.Error() != want; err = downgrade() {
		require.True(t, time.Now().Before(deadline), "the guard never counted the 50 Machines; last answer:\n%v", err)
		time.Sleep(50 * time.Millisecond)
	}

	before := w.KCP.DeepCopy()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(before), before))
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			err := edit(t, mode, w.KCP, "v1.34.3", kcpVersion...)
			require.Error(t, err, "the guard let the downgrade through")
			assert.Equal(t, want, err.Error())
			var status apierrors.APIStatus
			require.True(t, errors.As(err, &status), "%T", err)
			require.NotNil(t, status.Status().Details)
			causes := status.Status().Details.Causes
			var got []string
			for _, c := range causes {
				assert.Equal(t, "spec.version", c.Field, "every line keeps its field path")
				got = append(got, c.Field+": "+c.Message)
			}
			assert.Equal(t, strings.Split(lines, "\n"), got, "one cause per rule and per pool")
		})
	}

	t.Run("kubectl", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", env.Kubeconfig, "--namespace", w.Namespace,
			"patch", "kubeadmcontrolplane", "c1-control-plane", "--type", "merge", "--patch", `{"spec":{"version":"v1.34.3"}}`)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.Error(t, cmd.Run(), "kubectl patched the downgrade: %s", stdout.String())
		out := strings.TrimRight(stderr.String(), "\n")
		assert.Equal(t, `The KubeadmControlPlane "c1-control-plane" is invalid: 
* `+strings.ReplaceAll(lines, "\n", "\n* "), out)
		assert.LessOrEqual(t, strings.Count(out, "\n")+1, 6, "the refusal an operator reads is at most 6 lines")
	})

	after := w.KCP.DeepCopy()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(after), after))
	assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "a refused edit changed the control plane")

	t.Run("the safe neighbour, a patch release, is allowed", func(t *testing.T) {
		require.NoError(t, edit(t, mergePatch, w.KCP, "v1.35.3", kcpVersion...))
	})
}
