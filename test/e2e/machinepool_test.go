package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// mpGuardPrefix is how the API server prefixes the guard's refusal of a
// MachinePool change.
const mpGuardPrefix = `admission webhook "validate.machinepool.rollout-guard.io" denied the request: `

// newMachinePool returns MachinePool name of the world's cluster at
// version, its bootstrap configuration KubeadmConfig name (see
// framework.World.MachinePool: the pool has no Machines).
func newMachinePool(w *framework.World, name, version string) *clusterv1.MachinePool {
	return w.MachinePool(name, version).WithBootstrapConfig(name).Build()
}

// TestMachinePoolEdits: a MachinePool's version is judged by the worker
// rules through the API server, however the client writes it: newer than
// the control plane and four minors below it are refused (on create too),
// with the guard's words naming the pool, the field and the way out; a safe
// change goes through, stamped with who, when and why, and the revision it
// replaced is recorded. The pool has no Machines (see newMachinePool).
func TestMachinePoolEdits(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.35.2"})

	const refusedNewer = `MachinePool.cluster.x-k8s.io "c1-mp-0" is invalid: spec.template.spec.version: Forbidden: MachinePool c1-mp-0: v1.36.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.35.x or older until every machine of control plane KubeadmControlPlane c1-control-plane runs v1.36 or newer`
	newer := mpGuardPrefix + refusedNewer
	tooOld := mpGuardPrefix + `MachinePool.cluster.x-k8s.io "c1-mp-0" is invalid: spec.template.spec.version: Forbidden: MachinePool c1-mp-0: v1.31.4 is 4 minors older than v1.35.2, the newest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet may be at most 3 minors older than the API server [rule WorkerTooOld]; set spec.template.spec.version to v1.32.x or newer`

	// Created newer than the control plane: refused.
	err := env.Client.Create(ctx, newMachinePool(w, "c1-mp-0", "v1.36.0"))
	require.Error(t, err)
	assert.Equal(t, `admission webhook "validate-create.machinepool.rollout-guard.io" denied the request: `+refusedNewer, err.Error())

	mp := newMachinePool(w, "c1-mp-0", "v1.35.2")
	require.NoError(t, env.Client.Create(ctx, mp))
	rec := env.Stamps(t, mp)
	assert.EqualValues(t, 1, rec.Revision, "stamped at create")

	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			err := edit(t, mode, mp, "v1.36.0", "spec", "template", "spec", "version")
			require.Error(t, err)
			assert.Equal(t, newer, err.Error())
			err = edit(t, mode, mp, "v1.31.4", "spec", "template", "spec", "version")
			require.Error(t, err)
			assert.Equal(t, tooOld, err.Error())
		})
	}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp))
	assert.Equal(t, "v1.35.2", mp.Spec.Template.Spec.Version, "no refused edit was stored")

	// The safe neighbours: three minors below, then back up to the control
	// plane, as user alice with a change-cause.
	alice := framework.UserClient(t, env, "alice")
	for i, version := range []string{"v1.32.4", "v1.35.2"} {
		fresh := &clusterv1.MachinePool{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mp), fresh))
		fresh.Spec.Template.Spec.Version = version
		fresh.Annotations = map[string]string{revisions.AnnotationChangeCause: "INC-7: pool to " + version}
		// The stamp's time has whole seconds: from the second the edit was sent.
		sent := time.Now().Truncate(time.Second)
		require.NoError(t, alice.Update(ctx, fresh), "version %s", version)
		answered := time.Now()
		rec := env.Stamps(t, mp)
		assert.EqualValues(t, i+2, rec.Revision)
		assert.Equal(t, "alice", rec.ChangedBy)
		assert.Equal(t, "INC-7: pool to "+version, rec.ChangeCause)
		assert.Equal(t, revisions.ChangeRollout, rec.ChangeType)
		assert.False(t, rec.ChangedAt.Before(sent) || rec.ChangedAt.After(answered), "the change's time %s is of the edit, sent at %s and answered at %s", rec.ChangedAt, sent, answered)
	}

	// Every revision is recorded: 1 and 2 when they were replaced, 3 (the
	// live one, the content of 1 again) by the history reconciler.
	want := map[string][]int64{"v1.35.2": {1, 3}, "v1.32.4": {2}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, bad, err := history.List(ctx, env.Client, w.Namespace, string(mp.UID))
		require.NoError(c, err)
		require.Empty(c, bad)
		got := map[string][]int64{}
		for _, r := range revs {
			sum, err := r.Snapshot.Summary()
			require.NoError(c, err)
			require.Equal(c, revisions.KindMachinePool, r.Snapshot.Kind)
			got[sum.Version] = r.Record.History
		}
		assert.Equal(c, want, got)
	}, 20*time.Second, 100*time.Millisecond, "the MachinePool's revisions were never recorded as %v", want)
}
