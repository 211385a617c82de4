package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// mpGuardPrefix is how the API server prefixes the guard's refusal of a
// MachinePool change.
const mpGuardPrefix = `admission webhook "validate.machinepool.rollout-guard.io" denied the request: `

// createMachinePool creates DevMachinePool and MachinePool name of the
// world's cluster at version (see framework.World.MachinePool: the pool
// never gets instances or Machines).
func createMachinePool(t *testing.T, w *framework.World, name, version string) *clusterv1.MachinePool {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, builder.DevMachinePool(w.Namespace, name).Unstructured()))
	mp := w.MachinePool(name, version).WithLabels(map[string]string{clusterv1.ClusterNameLabel: clusterName}).
		WithBootstrapDataSecret(name + "-bootstrap").Build()
	require.NoError(t, env.Client.Create(ctx, mp))
	return mp
}

// TestMachinePool works a MachinePool (without Machines, see
// createMachinePool) through the CLI: history shows who made each revision,
// when and why, for the pool and among its cluster's; an undo to a revision
// four minors below the control plane is refused before anything is sent, in
// the guard's words (which --dry-run=server confirms); pause and resume go
// through its annotation; restart is refused, naming why; status reads its
// counts.
func TestMachinePool(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "cli-machinepool", framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2"})
	mp := createMachinePool(t, w, "c1-mp-0", "v1.32.4")
	ref := "mp/c1-mp-0"

	// Revision 2: alice brings the pool up to the control plane.
	alice := framework.UserClient(t, env, "alice")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp))
	mp.Spec.Template.Spec.Version = "v1.35.2"
	mp.Annotations[revisions.AnnotationChangeCause] = "INC-7: pool up to the control plane"
	require.NoError(t, alice.Update(ctx, mp))
	assert.EqualValues(t, 2, env.Stamps(t, mp).Revision)

	// The control plane moves on, with the pool along (the guard judges
	// the pool as one of its workers).
	rolloutCmd(t, "kcp/"+kcpName, "--version", "v1.36.1", "-n", w.Namespace).ok(t)

	settle(t, mp)
	golden(t, "history/mp-table.txt", rolloutCmd(t, "history", ref, "-n", w.Namespace).ok(t))
	// The cluster's history has the pool's revisions among its control
	// plane's and worker pools'.
	clusterHistory := rolloutCmd(t, "history", "cluster/"+clusterName, "-n", w.Namespace).ok(t)
	assert.Regexp(t, `(?m)^mp/c1-mp-0\s+1\s`, clusterHistory)
	assert.Regexp(t, `(?m)^mp/c1-mp-0\s+2\s+v1\.35\.2\s.*INC-7: pool up to the control plane`, clusterHistory)
	assert.Regexp(t, `(?m)^kcp/`+kcpName+`\s+2\s+v1\.36\.1\s`, clusterHistory)

	refusal := `MachinePool.cluster.x-k8s.io "c1-mp-0" is invalid: spec.template.spec.version: Forbidden: MachinePool c1-mp-0: v1.32.4 is 4 minors older than v1.36.1, the newest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet may be at most 3 minors older than the API server [rule WorkerTooOld]; set spec.template.spec.version to v1.33.x or newer`
	r := rolloutCmd(t, "undo", ref, "-n", w.Namespace)
	r.refused(t, "rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+refusal+
		"\nTo ask the guard itself, add --dry-run=server. To override (members of the guard's override groups only; recorded in the history), add --force --reason TEXT.")
	assert.Empty(t, r.stdout)
	assert.EqualValues(t, 2, env.Stamps(t, mp).Revision, "nothing was sent")
	rolloutCmd(t, "undo", ref, "-n", w.Namespace, "--dry-run=server").refused(t, mpGuardPrefix+refusal)
	assert.EqualValues(t, 2, env.Stamps(t, mp).Revision)
	assert.Equal(t, "v1.35.2", mp.Spec.Template.Spec.Version)

	// Pause and resume: the annotation, as Cluster API pauses a MachinePool.
	assert.Equal(t, "machinepool.cluster.x-k8s.io/c1-mp-0 paused\n", rolloutCmd(t, "pause", ref, "-n", w.Namespace).ok(t))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp))
	assert.Contains(t, mp.Annotations, clusterv1.PausedAnnotation)
	rolloutCmd(t, "undo", ref, "-n", w.Namespace).fails(t, "cannot undo MachinePool "+w.Namespace+"/c1-mp-0: it is paused (annotation cluster.x-k8s.io/paused), so Cluster API would not roll it out; resume it first with: rollout resume machinepool/c1-mp-0 -n "+w.Namespace)
	assert.Equal(t, "machinepool.cluster.x-k8s.io/c1-mp-0 resumed\n", rolloutCmd(t, "resume", ref, "-n", w.Namespace).ok(t))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp))
	assert.NotContains(t, mp.Annotations, clusterv1.PausedAnnotation)

	rolloutCmd(t, "restart", ref, "-n", w.Namespace).fails(t, "cannot restart MachinePool "+w.Namespace+"/c1-mp-0: a MachinePool has no spec.rollout.after in Cluster API v1beta2, so there is nothing to ask a rollout with; roll its instances through its infrastructure provider (for example a new spec.template.spec.infrastructureRef), or use a MachineDeployment")

	// Status from the pool's counts, as its controller would write them.
	mp.Status = clusterv1.MachinePoolStatus{ObservedGeneration: mp.Generation, Replicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2),
		AvailableReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](2)}
	require.NoError(t, env.Client.Status().Update(ctx, mp))
	assert.Equal(t, "machinepool/c1-mp-0 successfully rolled out (revision 2)\n", rolloutCmd(t, "status", ref, "-n", w.Namespace, "--timeout", "20s").ok(t))
}

// TestTopologyStatusWithMachinePools: status of a ClusterClass cluster,
// through the API server, watches its MachinePools (by the cluster-name
// label) beside its control plane and MachineDeployments, and names a
// MachinePool topology the Cluster declares that has no MachinePool yet.
func TestTopologyStatusWithMachinePools(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "cli-topology-mp", framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2", Topology: true, Labelled: true})
	require.NoError(t, env.Client.Create(ctx, builder.DevMachinePool(w.Namespace, "c1-mp-0").Unstructured()))
	mp := w.MachinePool("c1-mp-0", "v1.35.2").WithLabels(map[string]string{
		clusterv1.ClusterNameLabel: clusterName, clusterv1.ClusterTopologyOwnedLabel: "", clusterv1.ClusterTopologyMachinePoolNameLabel: "mp-0",
	}).WithBootstrapDataSecret("c1-mp-0-bootstrap").Build()
	require.NoError(t, env.Client.Create(ctx, mp))
	// Its controller counted 1 of its 2 instances up to date.
	mp.Status = clusterv1.MachinePoolStatus{ObservedGeneration: mp.Generation, Replicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2),
		AvailableReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](1)}
	require.NoError(t, env.Client.Status().Update(ctx, mp))
	w.Refresh(t)
	w.Cluster.Spec.Topology.Workers.MachinePools = []clusterv1.MachinePoolTopology{{Class: "default-pool", Name: "mp-0"}, {Class: "default-pool", Name: "mp-1"}}
	require.NoError(t, env.Client.Update(ctx, w.Cluster))

	r := rolloutCmd(t, "status", "cluster/"+clusterName, "-n", w.Namespace, "--watch=false")
	assert.Equal(t, rollout.ExitNotRolledOut, r.code, "stderr:\n%s", r.stderr)
	require.EqualValues(t, 2, *mp.Spec.Replicas)
	assert.Contains(t, r.stdout, "machinepool/c1-mp-0: 1 of 2 instances up to date, 2 available\n")
	assert.Contains(t, r.stderr, "MachinePool topology mp-1 not created yet")
}
