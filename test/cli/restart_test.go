package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestRestart restarts a MachineDeployment and a KubeadmControlPlane, now
// and at a given time, and through `rollout KIND/NAME` alone.
func TestRestart(t *testing.T) {
	w := newWorld(t, "cli-restart", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	fixed := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	setNow(fixed)
	t.Cleanup(func() { setNow(time.Time{}) })

	out := rolloutCmd(t, "restart", "machinedeployment/"+mdName, "-n", w.Namespace).ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 restarted\n", out)
	w.Refresh(t)
	assert.Equal(t, fixed, w.MD.Spec.Rollout.After.Time.UTC())

	// The same second again: nothing to do.
	out = rolloutCmd(t, "restart", "md/"+mdName, "-n", w.Namespace).ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 already restarted (spec.rollout.after is 2031-05-06T07:08:09Z)\n", out)

	out = rolloutCmd(t, "restart", "kcp/"+kcpName, "-n", w.Namespace, "--yes", "--at", "2032-01-02T03:04:05Z").ok(t)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restart scheduled at 2032-01-02T03:04:05Z\n", out)
	w.Refresh(t)
	assert.Equal(t, time.Date(2032, 1, 2, 3, 4, 5, 0, time.UTC), w.KCP.Spec.Rollout.After.Time.UTC())

	// `rollout KIND NAME` with no switch flag is a restart now, once confirmed.
	setNow(fixed.Add(time.Minute))
	out = rolloutCmd(t, "kubeadmcontrolplane", kcpName, "-n", w.Namespace, "--yes").ok(t)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restarted\n", out)
	w.Refresh(t)
	assert.Equal(t, fixed.Add(time.Minute), w.KCP.Spec.Rollout.After.Time.UTC())

	// -o name prints the name only.
	setNow(fixed.Add(2 * time.Minute))
	out = rolloutCmd(t, "restart", "md/"+mdName, "-n", w.Namespace, "-o", "name").ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0\n", out)

	// --change-cause says why; history shows it on the restart's line, and
	// the cause the CLI gives by default (its command line) on the others.
	setNow(fixed.Add(3 * time.Minute))
	rolloutCmd(t, "restart", "md/"+mdName, "-n", w.Namespace, "--change-cause", "INC-7: kernel CVE").ok(t)
	hist := rolloutCmd(t, "history", "md/"+mdName, "-n", w.Namespace).ok(t)
	assert.Contains(t, hist, "restart (spec.rollout.after 2031-05-06T07:11:09Z): INC-7: kernel CVE\n")
	assert.Contains(t, hist, "restart (spec.rollout.after 2031-05-06T07:08:09Z): rollout restart machinedeployment/c1-md-0\n")
	assert.Contains(t, hist, "restart (spec.rollout.after 2031-05-06T07:10:09Z): rollout restart md/c1-md-0 -o name\n")

	// The guard recorded each restart, by whom and through which field manager.
	rec := env.Stamps(t, w.MD)
	assert.EqualValues(t, 1, rec.Revision, "a restart is not a new revision")
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.MD), w.MD))
}
