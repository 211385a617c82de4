package rollout

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/history"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// historyNow is the clock of the history tests.
var historyNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// The user Cluster API's controllers run as in the sandbox.
const capiManager = "system:serviceaccount:capi-system:capi-manager"

// chainHistory is c1 after its chained upgrade v1.33.4 → v1.34.2 →
// v1.35.0, with the history the guard recorded: the topology controller
// created the control plane and the pool, a user restarted the pool
// through the Cluster, and the topology controller made each step; the
// control plane's live revision is stamped but not recorded yet (the
// guard's reconciler records it shortly after a change).
func chainHistory(t *testing.T) []client.Object {
	t.Helper()
	c, o := chainDone.objects()
	kcp, md := o.ControlPlane, &o.MachineDeployments[0]
	at := func(d time.Duration) time.Time { return historyNow.Add(-d) }
	kcpAt := func(v string) *controlplanev1.KubeadmControlPlane {
		k := kcp.DeepCopy()
		k.Spec.Version = v
		return k
	}
	mdAt := func(v string) *clusterv1.MachineDeployment {
		m := md.DeepCopy()
		m.Spec.Template.Spec.Version = v
		return m
	}
	topology := func(n int64, when time.Time, cause, ctype string) revisions.Record {
		return revisions.Record{Revision: n, History: []int64{n}, ChangedBy: capiManager, ChangedAt: when, FieldManager: history.TopologyFieldManager, ChangeCause: cause, ChangeType: ctype}
	}
	kcpSnap := func(v string) revisions.Snapshot {
		s, err := revisions.ForKubeadmControlPlane(kcpAt(v))
		require.NoError(t, err)
		return s
	}
	mdSnap := func(v string) revisions.Snapshot {
		s, err := revisions.ForMachineDeployment(mdAt(v))
		require.NoError(t, err)
		return s
	}
	mdCreated := topology(1, at(72*time.Hour-30*time.Second), "created", revisions.ChangeCreated)
	mdCreated.Restarts = []revisions.Restart{{At: at(26 * time.Hour), By: capiManager, FieldManager: history.TopologyFieldManager, After: "2026-11-30T10:00:00Z"}}
	objs := []client.Object{
		revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, kcpSnap("v1.33.4"), topology(1, at(72*time.Hour), "created", revisions.ChangeCreated)),
		revisions.RolloutRevision(md, core.MachineDeployment.GVK, mdSnap("v1.33.4"), mdCreated),
		revisions.RolloutRevision(kcp, core.KubeadmControlPlane.GVK, kcpSnap("v1.34.2"), topology(2, at(2*time.Hour), "version v1.33.4 → v1.34.2", revisions.ChangeRollout)),
		revisions.RolloutRevision(md, core.MachineDeployment.GVK, mdSnap("v1.35.0"), topology(2, at(time.Hour), "version v1.33.4 → v1.35.0", revisions.ChangeRollout)),
	}
	stamp := func(obj client.Object, rec revisions.Record) {
		ann := obj.GetAnnotations()
		for k, v := range rec.Annotations() {
			if v != "" {
				ann[k] = v
			}
		}
		obj.SetAnnotations(ann)
	}
	stamp(kcp, topology(3, at(90*time.Minute), "version v1.34.2 → v1.35.0", revisions.ChangeRollout))
	stamp(md, topology(2, at(time.Hour), "version v1.33.4 → v1.35.0", revisions.ChangeRollout))
	return append(objs, c, kcp, md)
}

// TestHistoryCluster pins `rollout history cluster/c1` after a chained
// upgrade: one table ordered by time, the topology controller's steps
// marked capi-topology (docs/reading-history.md quotes it).
func TestHistoryCluster(t *testing.T) {
	cl := newFakeClient(chainHistory(t)...)
	out, errOut, code := runFake(t, cl, historyNow, "history", "cluster/c1")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Empty(t, errOut)
	golden(t, "history-cluster.txt", out)

	out, errOut, code = runFake(t, cl, historyNow, "history", "cluster/c1", "-o", "yaml")
	require.Equal(t, core.ExitOK, code, errOut)
	golden(t, "history-cluster.yaml", out)

	out, _, code = runFake(t, cl, historyNow, "history", "cluster/c1", "-o", "name")
	require.Equal(t, core.ExitOK, code)
	assert.Regexp(t, regexp.MustCompile(`^(rolloutrevision\.rollout-guard\.io/c1-(control-plane|md-0)-[0-9a-f]+\n){4}$`), out)

	out, _, code = runFake(t, cl, historyNow, "history", "cluster/c1", "-o", "json")
	require.Equal(t, core.ExitOK, code)
	assert.Contains(t, out, `"kind": "ClusterRolloutHistory"`)
	assert.Contains(t, out, `"fieldManager": "capi-topology"`)
}

// TestHistoryClusterRefusesRevisionAndDiff: revision numbers belong to
// each object; the refusal names the objects to ask.
func TestHistoryClusterRefusesRevisionAndDiff(t *testing.T) {
	cl := newFakeClient(chainHistory(t)...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--revision", "2"}, "error: --revision 2 has no meaning for cluster/c1: its control plane and worker pools number their revisions apart; ask one of them: rollout history kcp/c1-control-plane --revision 2 -n demo, rollout history md/c1-md-0 --revision 2 -n demo\n"},
		{[]string{"--diff"}, "error: --diff has no meaning for cluster/c1: its control plane and worker pools number their revisions apart; ask one of them: rollout history kcp/c1-control-plane --diff -n demo, rollout history md/c1-md-0 --diff -n demo\n"},
		{[]string{"--revision", "2", "--diff"}, "error: --revision 2 --diff has no meaning for cluster/c1: its control plane and worker pools number their revisions apart; ask one of them: rollout history kcp/c1-control-plane --revision 2 --diff -n demo, rollout history md/c1-md-0 --revision 2 --diff -n demo\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runFake(t, cl, historyNow, append([]string{"history", "cluster/c1"}, tc.args...)...)
			assert.Equal(t, core.ExitError, code)
			assert.Empty(t, out)
			assert.Equal(t, tc.want, errOut)
		})
	}
}

// TestHistoryClusterUnrecorded: without the guard's records the cluster
// history says so; an object without records next to recorded ones is a
// warning.
func TestHistoryClusterUnrecorded(t *testing.T) {
	c, o := chainDone.objects()
	kcp, md := o.ControlPlane, &o.MachineDeployments[0]
	kcp.Annotations, md.Annotations = nil, nil
	out, errOut, code := runFake(t, newFakeClient(c, kcp, md), historyNow, "history", "cluster/c1")
	assert.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "No revision history recorded for Cluster demo/c1, its control plane and worker pools. Is rollout-guard installed? It records every change from the moment it is.\n", out)

	objs := chainHistory(t)
	var kept []client.Object
	for _, o := range objs {
		if md, ok := o.(*clusterv1.MachineDeployment); ok {
			md.Annotations = nil
		}
		if o.GetLabels()[revisions.LabelOwnerKind] == revisions.KindMachineDeployment {
			continue
		}
		kept = append(kept, o)
	}
	out, errOut, code = runFake(t, newFakeClient(kept...), historyNow, "history", "cluster/c1")
	assert.Equal(t, core.ExitOK, code)
	assert.Equal(t, "Warning: no revision history recorded for MachineDeployment demo/c1-md-0; rollout history md/c1-md-0 shows what the cluster itself keeps\n", errOut)
	assert.NotContains(t, out, "md/c1-md-0")
	assert.Contains(t, out, "kcp/c1-control-plane")
}

// TestMergeHistories: rows by time; at one time, the control plane first,
// then revision numbers, a restart after its revision; unknown times first.
func TestMergeHistories(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rev := func(n int64, at time.Time, restarts ...time.Time) revisions.Revision {
		r := revisions.Revision{Record: revisions.Record{Revision: n, ChangedAt: at}}
		for _, rs := range restarts {
			r.Record.Restarts = append(r.Record.Restarts, revisions.Restart{At: rs})
		}
		return r
	}
	cp := &core.RevisionSet{Obj: &controlplanev1.KubeadmControlPlane{}, Kind: core.KubeadmControlPlane, Revs: []revisions.Revision{rev(1, time.Time{}), rev(2, t0.Add(time.Hour), t0.Add(3*time.Hour)), rev(3, t0.Add(2*time.Hour))}}
	cp.Obj.SetName("cp")
	md := &core.RevisionSet{Obj: &clusterv1.MachineDeployment{}, Kind: core.MachineDeployment, Revs: []revisions.Revision{rev(1, t0, t0.Add(time.Hour)), rev(2, t0.Add(time.Hour))}}
	md.Obj.SetName("md")
	var got []string
	for _, r := range history.MergeHistories([]*core.RevisionSet{cp, md}) {
		line := history.ShortRef(r.Set) + " " + strings.TrimPrefix(core.Label(r.Rev), "revision ")
		if r.Restart != nil {
			line += " restart"
		}
		got = append(got, line)
	}
	assert.Equal(t, []string{"kcp/cp 1", "md/md 1", "kcp/cp 2", "md/md 1 restart", "md/md 2", "kcp/cp 3", "kcp/cp 2 restart"}, got)
}
