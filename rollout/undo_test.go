package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// gitOpsMD is the worker pool of gitOpsWorld, to read back.
func gitOpsMD() *clusterv1.MachineDeployment {
	md := &clusterv1.MachineDeployment{}
	md.Namespace, md.Name = topoNS, "c1-md-0"
	return md
}

// TestUndo: undo rolls back to the previous revision, or --to-revision N,
// with one patch; a revision already live is skipped, an unknown one
// refused with the numbers there are; a client dry run prints the
// difference and sends nothing.
func TestUndo(t *testing.T) {
	cl, w := newWriteRecordingClient(gitOpsWorld(t, nil)...)
	out, errOut, code := runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--dry-run=client")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, `MachineDeployment demo/c1-md-0: would roll back from revision 3 to revision 2 (dry run: nothing sent)
FIELD     LIVE (REVISION 3)   REVISION 2
version   v1.34.2             v1.34.1   (rolls out)
machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 2 (dry run)
`, out)
	assert.Empty(t, w.all())

	out, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, `MachineDeployment demo/c1-md-0: rolling back from revision 3 to revision 2
FIELD     LIVE (REVISION 3)   REVISION 2
version   v1.34.2             v1.34.1   (rolls out)
machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 2 (now revision 3)
`, out, "what it sends, then what it did; the fake has no guard to stamp the new revision")
	md := gitOpsMD()
	getObj(t, cl, md)
	assert.Equal(t, "v1.34.1", md.Spec.Template.Spec.Version)
	assert.Equal(t, "rollout undo md/c1-md-0", md.Annotations["rollout-guard.io/change-cause"])
	assert.Equal(t, []string{"patch *v1beta2.MachineDeployment c1-md-0"}, w.all())

	out, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "2")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 skipped rollback: already at revision 2\n", out,
		"without a guard to stamp it, the rollback's content carries the number it replaced, unsigned: not credited to it")
	assert.Len(t, w.all(), 1, "nothing sent")

	_, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "9")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, "error: cannot undo MachineDeployment demo/c1-md-0: it has no revision 9; recorded revisions: 1, 2 (see rollout history machinedeployment/c1-md-0)\n", errOut)
}

// TestUndoRefused: what undo cannot do is refused before anything is sent:
// a revision the guard's policy refuses, with its words; an object without
// history; a paused one; one a Cluster's topology manages.
func TestUndoRefused(t *testing.T) {
	cl, w := newWriteRecordingClient(gitOpsWorld(t, nil)...)
	_, errOut, code := runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0", "--to-revision", "1")
	assert.Equal(t, core.ExitRefused, code)
	assert.Contains(t, errOut, "error: rollout-guard's policy refuses this change (checked before sending; nothing was changed): ")
	assert.Contains(t, errOut, "[rule WorkerNewerThanControlPlane]")
	assert.Contains(t, errOut, "\nTo ask the guard itself, add --dry-run=server.")

	bare := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "bare", UID: "bare-uid"}}
	bare.Spec.ClusterName = "c1"
	require.NoError(t, cl.Create(context.Background(), bare))
	_, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/bare")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, "error: cannot undo MachineDeployment demo/bare: rollout-guard recorded no history for it (no RolloutRevisions, no rollout-guard.io/ stamps), so there is nothing to roll back to; is the guard installed? See rollout history machinedeployment/bare\n", errOut)

	md := gitOpsMD()
	getObj(t, cl, md)
	md.Annotations[clusterv1.PausedAnnotation] = ""
	require.NoError(t, cl.Update(context.Background(), md))
	_, errOut, code = runFake(t, cl, gitOpsNow, "undo", "md/c1-md-0")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, "error: cannot undo MachineDeployment demo/c1-md-0: it is paused (annotation cluster.x-k8s.io/paused), so Cluster API would not roll it out; resume it first with: rollout resume machinedeployment/c1-md-0 -n demo\n", errOut)
	assert.Equal(t, []string{"create *v1beta2.MachineDeployment bare", "update *v1beta2.MachineDeployment c1-md-0"}, w.all(), "the test's own writes; undo sent nothing")

	topo := newFakeClient(objectsOf(chainDone)...)
	for ref, instead := range map[string]string{
		"md/c1-md-0":           "change it through Cluster c1 instead: its spec.topology.version, the class of spec.topology.workers.machineDeployments[name=md-0], or that worker class's templates in the ClusterClass",
		"kcp/c1-control-plane": "change it through Cluster c1 instead: its spec.topology.version, or the control plane's templates in the ClusterClass (spec.controlPlane)",
	} {
		_, errOut, code = runFake(t, topo, gitOpsNow, "undo", ref)
		assert.Equal(t, core.ExitError, code, ref)
		assert.Contains(t, errOut, "the topology controller would revert a direct edit; "+instead+"\n", ref)
	}
}

// TestUndoConflict: a change made between the read and the write is a
// conflict; undo reads the object again and decides anew: a change of
// something else is checked again and the rollback sent, a change of the
// revision itself to "the previous revision" stops.
func TestUndoConflict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(md *clusterv1.MachineDeployment)
		args   []string
		code   int
		errOut string
	}{
		{name: "another change", change: func(md *clusterv1.MachineDeployment) { md.Labels["team"] = "a" }, args: []string{"undo", "md/c1-md-0"}, code: core.ExitOK,
			errOut: "conflict: MachineDeployment demo/c1-md-0 changed after it was read (not its revision: still revision 3); reading it again and checking again\n"},
		{name: "a new revision", change: func(md *clusterv1.MachineDeployment) {
			md.Spec.Template.Spec.Version = "v1.34.0"
			md.Annotations["rollout-guard.io/revision"], md.Annotations["rollout-guard.io/changed-by"] = "4", "bob"
		}, args: []string{"undo", "md/c1-md-0"}, code: core.ExitError,
			errOut: `error: cannot undo MachineDeployment demo/c1-md-0: it changed while this command ran: it is now at revision 4, made by bob via rollout (rollout md/c1-md-0 --version v1.34.2); "the previous revision" no longer means revision 2, so nothing was rolled back: run rollout undo again to decide on the new state, or name the revision with --to-revision` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, w := newWriteRecordingClient(gitOpsWorld(t, nil)...)
			changed := false
			o := core.Options{Now: func() time.Time { return gitOpsNow }, BeforeWrite: func(ctx context.Context, _ client.Object) error {
				if changed {
					return nil
				}
				changed = true
				md := gitOpsMD()
				getObj(t, cl, md)
				tc.change(md)
				return cl.Update(ctx, md)
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := startFakeWith(ctx, cl, topoNS, o, tc.args...)
			assert.Equal(t, tc.code, <-r.done, r.errOut.String())
			assert.Equal(t, tc.errOut, r.errOut.String())
			patches := 0
			for _, op := range w.all() {
				if op == "patch *v1beta2.MachineDeployment c1-md-0" {
					patches++
				}
			}
			assert.Equal(t, map[bool]int{true: 2, false: 1}[tc.code == core.ExitOK], patches, "the conflicting patch, and the one sent after reading again")
		})
	}
}
